package printers

import (
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/crdver/kubectl-crdver/migrate"
)

// MigrateReport prints what a migration did (its plan was printed before, as a part);
// untrimmed is the line printed when the run was told not to trim status.storedVersions,
// allListed what lists every object when only the first are shown.
func MigrateReport(w io.Writer, r *migrate.Report, noHeaders bool, untrimmed, allListed string) error {
	if r.DryRun {
		_, err := fmt.Fprintln(w, "\nDry run: nothing was written.")
		return err
	}
	if r.Result != nil {
		if err := printResult(w, r.Result, noHeaders, allListed); err != nil {
			return err
		}
		if r.Result.Interrupted {
			return nil
		}
	}
	if r.Cluster != nil {
		printClusterResult(w, r.Cluster)
	}
	printTrim(w, r.Trim, untrimmed)
	return nil
}

// printMigrateStatus prints `migrate status`.
func printMigrateStatus(w io.Writer, st *migrate.Status) error {
	var b strings.Builder
	fmt.Fprintf(&b, "CRD:               %s\n", st.CRD)
	fmt.Fprintf(&b, "storage version:   %s\n", st.StorageVersion)
	fmt.Fprintf(&b, "storedVersions:    [%s]\n", strings.Join(st.StoredVersions, " "))
	fmt.Fprintf(&b, "migration pending: %s\n", YesNo(st.Pending))
	if st.LastRun != nil {
		fmt.Fprintf(&b, "last run:          %s at %s, %d objects (rewritten %d, already current %d, deleted %d, failed %d), %s\n",
			st.LastRun.State, st.LastRun.StorageVersion, st.LastRun.Counts.Total(), st.LastRun.Counts.Rewritten, st.LastRun.Counts.Current,
			st.LastRun.Counts.Deleted, st.LastRun.Counts.Failed, st.LastRun.UpdatedAt.Format(time.RFC3339))
	}
	if st.Pending {
		fmt.Fprintf(&b, "trim safe:         %s: %s\n", YesNo(st.TrimSafe), st.Reason)
	} else {
		fmt.Fprintf(&b, "trim needed:       no: %s\n", st.Reason)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func printPlan(w io.Writer, p *migrate.Plan, noHeaders bool) error {
	scope := "cluster-scoped"
	if p.Namespaced {
		scope = "namespaced"
	}
	target := p.TargetVersion
	if p.SwitchStorage {
		target += " (switching from " + p.StorageVersion + ")"
	}
	fmt.Fprintf(w, "Plan for %s (%s)\n", p.CRD, scope)
	fmt.Fprintf(w, "  storage version:  %s\n", p.StorageVersion)
	fmt.Fprintf(w, "  storedVersions:   [%s]\n", strings.Join(p.StoredVersions, " "))
	fmt.Fprintf(w, "  target version:   %s\n", target)
	if p.Namespaced {
		fmt.Fprintf(w, "  objects:          %d in %d namespaces\n", p.Objects, len(p.Namespaces))
	} else {
		fmt.Fprintf(w, "  objects:          %d\n", p.Objects)
	}
	for i, s := range p.Steps {
		fmt.Fprintf(w, "  %d. %s\n", i+1, s)
	}
	printBudget(w, p.Budget, "  ")
	if p.Namespaced && len(p.Namespaces) > 0 {
		fmt.Fprintln(w)
		t := &Table{Header: []string{"namespace", "objects"}}
		for _, n := range p.Namespaces {
			t.Add(n.Namespace, strconv.FormatInt(n.Objects, 10))
		}
		return t.Print(w, noHeaders)
	}
	return nil
}

func printResult(w io.Writer, r *migrate.Result, noHeaders bool, allListed string) error {
	fmt.Fprintln(w)
	for _, n := range r.Notes {
		fmt.Fprintf(w, "Note: %s\n", n)
	}
	t := &Table{Header: []string{"result", "objects"}}
	t.Add("rewritten", strconv.FormatInt(r.Rewritten, 10))
	t.Add("already current", strconv.FormatInt(r.Current, 10))
	t.Add("deleted meanwhile", strconv.FormatInt(r.Deleted, 10))
	t.Add("failed", strconv.FormatInt(r.Failed, 10))
	t.Add("total", strconv.FormatInt(r.Total(), 10))
	if err := t.Print(w, noHeaders); err != nil {
		return err
	}
	fmt.Fprintf(w, "\n%s at %s: %s accounted for in %s (%.0f objects/s this run)\n",
		r.CRD, r.StorageVersion, Plural(int(r.Total()), "object"), (time.Duration(r.ElapsedSeconds * float64(time.Second))).Round(10*time.Millisecond), r.ObjectsPerSecond)
	printManagedFieldsOutcome(w, r, noHeaders, allListed)
	if len(r.Failures) > 0 {
		fmt.Fprintln(w, "\nObjects that could not be rewritten:")
		ft := &Table{Header: []string{"namespace", "name", "reason"}}
		for _, f := range r.Failures {
			ft.Add(f.Namespace, f.Name, f.Reason)
		}
		return ft.Print(w, noHeaders)
	}
	return nil
}

func printTrim(w io.Writer, tr *migrate.TrimResult, untrimmed string) {
	switch {
	case tr == nil:
		fmt.Fprintln(w, untrimmed)
	case tr.Trimmed:
		fmt.Fprintf(w, "status.storedVersions: [%s] -> [%s]; the other versions can now be removed from spec.versions\n", strings.Join(tr.Before, " "), strings.Join(tr.After, " "))
	case tr.Safe:
		fmt.Fprintf(w, "status.storedVersions: %s\n", tr.Reason)
	default:
		fmt.Fprintf(w, "status.storedVersions not trimmed (still [%s]): %s\n", strings.Join(tr.Before, " "), tr.Reason)
	}
}

func printClusterResult(w io.Writer, r *migrate.ClusterResult) {
	state := "Failed"
	switch {
	case r.Detached:
		state = "running in the cluster (detached: not followed to its end)"
	case r.Gone:
		state = "gone"
	case r.Succeeded:
		state = "Succeeded"
	}
	if r.Reattached {
		state = "re-attached, " + state
	}
	if r.Detached {
		fmt.Fprintf(w, "\nStorageVersionMigration %s (%s): %s\n", r.Name, r.APIVersion, state)
	} else {
		fmt.Fprintf(w, "\nStorageVersionMigration %s (%s): %s in %s", r.Name, r.APIVersion, state, (time.Duration(r.ElapsedSeconds * float64(time.Second))).Round(10*time.Millisecond))
		if r.Message != "" {
			fmt.Fprintf(w, ": %s", r.Message)
		}
		fmt.Fprintln(w)
	}
	for _, n := range r.Notes {
		fmt.Fprintf(w, "  note: %s\n", n)
	}
	if c := r.Check; c != nil {
		h := c.WrittenHere
		fmt.Fprintf(w, "Checked by this run, object by object: %d objects, %d written after the storage version was in force (resourceVersion after %s: by the migration or anyone); %d written back here (rewritten %d, already current %d, deleted meanwhile %d, failed %d)\n",
			c.Objects, c.WrittenSince, c.Since, h.Total(), h.Rewritten, h.Current, h.Deleted, h.Failed)
		for _, f := range c.Failures {
			fmt.Fprintf(w, "  failed: %s: %s\n", objectName(f.Namespace, f.Name), f.Reason)
		}
		for _, l := range c.ManagersLost {
			fmt.Fprintf(w, "  field manager %s: %d managedFields entries before the migration, %d after\n", l.Manager, l.Before, l.After)
		}
	}
}

// AllPlan prints the plan of migrate --all: one row per CRD, its last step wrapped to fit
// the terminal (in full with -o wide).
func AllPlan(w io.Writer, plans []*migrate.Plan, crds int, total int64, wide, noHeaders bool) error {
	if len(plans) == 0 {
		_, err := fmt.Fprintf(w, "No pending migration: each of the %d CRDs has only its storage version in status.storedVersions.\n", crds)
		return err
	}
	fmt.Fprintf(w, "%d of %d CRDs have a pending migration (%d objects):\n\n", len(plans), crds, total)
	t := &Table{Header: []string{"crd", "storage", "stored versions", "objects", "after the rewrite"}}
	if !wide {
		t.MaxWidth = TerminalWidth
	}
	for _, p := range plans {
		last := ""
		if len(p.Steps) > 0 {
			last = p.Steps[len(p.Steps)-1]
		}
		t.Add(p.CRD, p.StorageVersion, strings.Join(p.StoredVersions, ","), strconv.FormatInt(p.Objects, 10), last)
	}
	return t.Print(w, noHeaders)
}

// AllSummary prints one row per CRD, those that did not end "done" first (worst first),
// then the objects that failed. The notes (what stopped a CRD, why a trim was refused) come as
// lines under the table, wrapped to fit the terminal; with -o wide, as its last column.
func AllSummary(w io.Writer, items []migrate.AllItem, wide, noHeaders bool) error {
	fmt.Fprintln(w)
	header := []string{"crd", "outcome", "rewritten", "already current", "deleted", "failed", "stored versions"}
	if wide {
		header = append(header, "note")
	}
	t := &Table{Header: header}
	items = slices.Clone(items)
	slices.SortStableFunc(items, func(a, b migrate.AllItem) int { return outcomeRank(b.Outcome) - outcomeRank(a.Outcome) })
	var notes []string
	for _, it := range items {
		row := []string{it.CRD, it.Outcome, "-", "-", "-", "-", "-", it.Error}
		if r := it.Result; r != nil {
			row[2], row[3], row[4], row[5] = strconv.FormatInt(r.Rewritten, 10), strconv.FormatInt(r.Current, 10), strconv.FormatInt(r.Deleted, 10), strconv.FormatInt(r.Failed, 10)
		}
		if tr := it.Trim; tr != nil {
			row[6] = strings.Join(tr.After, ",")
			if !tr.Safe && row[7] == "" {
				row[7] = "not trimmed: " + tr.Reason
			}
		}
		if !wide {
			if row[7] != "" {
				notes = append(notes, it.CRD+": "+row[7])
			}
			row = row[:7]
		}
		t.Add(row...)
	}
	if err := t.Print(w, noHeaders); err != nil {
		return err
	}
	for _, n := range notes {
		fmt.Fprintln(w, strings.ReplaceAll(WrapWords(n, TerminalWidth-2), "\n", "\n  "))
	}
	for _, it := range items {
		if it.Result != nil && len(it.Result.Failures) > 0 {
			fmt.Fprintf(w, "\nObjects of %s that could not be rewritten:\n", it.CRD)
			ft := &Table{Header: []string{"namespace", "name", "reason"}}
			if !wide {
				ft.MaxWidth = TerminalWidth
			}
			for _, f := range it.Result.Failures {
				ft.Add(f.Namespace, f.Name, f.Reason)
			}
			if err := ft.Print(w, noHeaders); err != nil {
				return err
			}
		}
	}
	return nil
}

// lossesShown is how many objects that lost field managers are listed (-o json: all).
const lossesShown = 20

// printManagedFieldsOutcome says what the rewrite did to managedFields: entries moved to the
// storage version, and the objects that lost field managers (listed).
func printManagedFieldsOutcome(w io.Writer, r *migrate.Result, noHeaders bool, allListed string) {
	if r.ManagedFieldsMoved > 0 {
		fmt.Fprintf(w, "managedFields: %d entries of other versions moved to %s within the rewrite\n", r.ManagedFieldsMoved, r.StorageVersion)
	}
	if r.ManagedFieldsLost == 0 {
		return
	}
	fmt.Fprintf(w, "\n%s lost field managers through their rewrite:\n", Plural(int(r.ManagedFieldsLost), "object"))
	t := &Table{Header: []string{"namespace", "name", "managers lost"}, MaxWidth: TerminalWidth}
	for i, l := range r.ManagedFieldsLosses {
		if i == lossesShown {
			fmt.Fprintf(w, "… and %d more (%s lists them)\n", r.ManagedFieldsLost-int64(i), allListed)
			break
		}
		t.Add(l.Namespace, l.Name, strings.Join(l.Managers, ", "))
	}
	_ = t.Print(w, noHeaders)
}

// outcomeRank orders migrate --all's outcomes from best (0) to worst.
func outcomeRank(outcome string) int {
	switch outcome {
	case migrate.OutcomeDone:
		return 0
	case migrate.OutcomeProblems:
		return 1
	case migrate.OutcomeNotRun:
		return 2
	case migrate.OutcomeInterrupted:
		return 3
	}
	return 4
}
