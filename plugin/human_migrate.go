package plugin

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/crdver/kubectl-crdver/migrate"
)

// printMigrateReport prints what a migration did (its plan was printed before, as a part).
func printMigrateReport(w io.Writer, r *migrate.Report, noHeaders bool) error {
	if r.DryRun {
		_, err := fmt.Fprintln(w, "\nDry run: nothing was written.")
		return err
	}
	if r.Result != nil {
		if err := printResult(w, r.Result, noHeaders); err != nil {
			return err
		}
		if r.Result.Interrupted {
			return nil
		}
	}
	if r.Cluster != nil {
		printClusterResult(w, r.Cluster)
	}
	printTrim(w, r.Trim, r.StorageVersion())
	return nil
}

// printMigrateStatus prints `migrate status`.
func printMigrateStatus(w io.Writer, st *migrate.Status) error {
	var b strings.Builder
	fmt.Fprintf(&b, "CRD:               %s\n", st.CRD)
	fmt.Fprintf(&b, "storage version:   %s\n", st.StorageVersion)
	fmt.Fprintf(&b, "storedVersions:    [%s]\n", strings.Join(st.StoredVersions, " "))
	fmt.Fprintf(&b, "migration pending: %s\n", yesNo(st.Pending))
	if st.LastRun != nil {
		fmt.Fprintf(&b, "last run:          %s at %s, %d objects (rewritten %d, already current %d, deleted %d, failed %d), %s\n",
			st.LastRun.State, st.LastRun.StorageVersion, st.LastRun.Counts.Total(), st.LastRun.Counts.Rewritten, st.LastRun.Counts.Current,
			st.LastRun.Counts.Deleted, st.LastRun.Counts.Failed, st.LastRun.UpdatedAt.Format(time.RFC3339))
	}
	if st.Pending {
		fmt.Fprintf(&b, "trim safe:         %s: %s\n", yesNo(st.TrimSafe), st.Reason)
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
	if p.Namespaced && len(p.Namespaces) > 0 {
		fmt.Fprintln(w)
		t := &table{header: []string{"namespace", "objects"}}
		for _, n := range p.Namespaces {
			t.add(n.Namespace, strconv.FormatInt(n.Objects, 10))
		}
		return t.print(w, noHeaders)
	}
	return nil
}

func printResult(w io.Writer, r *migrate.Result, noHeaders bool) error {
	fmt.Fprintln(w)
	for _, n := range r.Notes {
		fmt.Fprintf(w, "Note: %s\n", n)
	}
	t := &table{header: []string{"result", "objects"}}
	t.add("rewritten", strconv.FormatInt(r.Rewritten, 10))
	t.add("already current", strconv.FormatInt(r.Current, 10))
	t.add("deleted meanwhile", strconv.FormatInt(r.Deleted, 10))
	t.add("failed", strconv.FormatInt(r.Failed, 10))
	t.add("total", strconv.FormatInt(r.Total(), 10))
	if err := t.print(w, noHeaders); err != nil {
		return err
	}
	fmt.Fprintf(w, "\n%s at %s: %d objects accounted for in %s (%.0f objects/s this run)\n",
		r.CRD, r.StorageVersion, r.Total(), (time.Duration(r.ElapsedSeconds * float64(time.Second))).Round(10*time.Millisecond), r.ObjectsPerSecond)
	printManagedFieldsOutcome(w, r, noHeaders)
	if len(r.Failures) > 0 {
		fmt.Fprintln(w, "\nObjects that could not be rewritten:")
		ft := &table{header: []string{"namespace", "name", "reason"}}
		for _, f := range r.Failures {
			ft.add(f.Namespace, f.Name, f.Reason)
		}
		return ft.print(w, noHeaders)
	}
	return nil
}

func printTrim(w io.Writer, tr *migrate.TrimResult, storage string) {
	switch {
	case tr == nil:
		fmt.Fprintln(w, "status.storedVersions left as it is (--no-trim)")
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
	if r.Succeeded {
		state = "Succeeded"
	}
	fmt.Fprintf(w, "\nStorageVersionMigration %s (%s): %s in %s", r.Name, r.APIVersion, state, (time.Duration(r.ElapsedSeconds * float64(time.Second))).Round(10*time.Millisecond))
	if r.Message != "" {
		fmt.Fprintf(w, ": %s", r.Message)
	}
	fmt.Fprintln(w)
}

// printMigrateAllReport prints what migrate --all did (its plan was printed before, as a part).
func printMigrateAllReport(w io.Writer, r *MigrateAllReport, noHeaders bool) error {
	switch {
	case r.DryRun:
		_, err := fmt.Fprintln(w, "\nDry run: nothing was written.")
		return err
	case len(r.Plans) == 0:
		return nil
	}
	return printAllSummary(w, r.Items, noHeaders)
}

func printAllPlan(w io.Writer, plans []*migrate.Plan, crds int, total int64, noHeaders bool) error {
	if len(plans) == 0 {
		_, err := fmt.Fprintf(w, "No pending migration: each of the %d CRDs has only its storage version in status.storedVersions.\n", crds)
		return err
	}
	fmt.Fprintf(w, "%d of %d CRDs have a pending migration (%d objects):\n\n", len(plans), crds, total)
	t := &table{header: []string{"crd", "storage", "stored versions", "objects", "after the rewrite"}}
	for _, p := range plans {
		last := ""
		if len(p.Steps) > 0 {
			last = p.Steps[len(p.Steps)-1]
		}
		t.add(p.CRD, p.StorageVersion, strings.Join(p.StoredVersions, ","), strconv.FormatInt(p.Objects, 10), last)
	}
	return t.print(w, noHeaders)
}

func printAllSummary(w io.Writer, items []migrate.AllItem, noHeaders bool) error {
	fmt.Fprintln(w)
	t := &table{header: []string{"crd", "outcome", "rewritten", "already current", "deleted", "failed", "stored versions", "note"}}
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
		t.add(row...)
	}
	if err := t.print(w, noHeaders); err != nil {
		return err
	}
	for _, it := range items {
		if it.Result != nil && len(it.Result.Failures) > 0 {
			fmt.Fprintf(w, "\nObjects of %s that could not be rewritten:\n", it.CRD)
			ft := &table{header: []string{"namespace", "name", "reason"}}
			for _, f := range it.Result.Failures {
				ft.add(f.Namespace, f.Name, f.Reason)
			}
			if err := ft.print(w, noHeaders); err != nil {
				return err
			}
		}
	}
	return nil
}

// printManagedFieldsOutcome says what the rewrite did to managedFields: entries moved to the
// storage version, and the objects that lost field managers (listed).
func printManagedFieldsOutcome(w io.Writer, r *migrate.Result, noHeaders bool) {
	if r.ManagedFieldsMoved > 0 {
		fmt.Fprintf(w, "managedFields: %d entries of other versions moved to %s within the rewrite\n", r.ManagedFieldsMoved, r.StorageVersion)
	}
	if r.ManagedFieldsLost == 0 {
		return
	}
	fmt.Fprintf(w, "\n%d objects lost field managers through their rewrite:\n", r.ManagedFieldsLost)
	t := &table{header: []string{"namespace", "name", "managers lost"}, maxWidth: terminalWidth}
	for i, l := range r.ManagedFieldsLosses {
		if i == preflightShown {
			fmt.Fprintf(w, "… and %d more (-o json lists them)\n", r.ManagedFieldsLost-int64(i))
			break
		}
		t.add(l.Namespace, l.Name, strings.Join(l.Managers, ", "))
	}
	_ = t.print(w, noHeaders)
}
