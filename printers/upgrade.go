package printers

import (
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/crdver/kubectl-crdver/plan"
	"github.com/crdver/kubectl-crdver/upgrade"
)

// printUpgradePlan prints the preflight and the runbook, before anything is written. Per CRD,
// the table says both what a plain apply of the release does (plan's verdict) and what the
// upgrade does about it, so that a CRD a plain apply breaks and the upgrade carries out reads
// as such, and the table agrees with the exit status.
func printUpgradePlan(w io.Writer, r *upgrade.Report, noHeaders bool) error {
	t := &Table{Header: []string{"crd", "operation", "storage", "objects", "findings", "plain apply", "upgrade"}}
	for _, it := range r.Plan.Items {
		storage := it.StorageVersion.After
		if it.StorageVersion.Before != "" && it.StorageVersion.Before != it.StorageVersion.After {
			storage = it.StorageVersion.Before + " → " + it.StorageVersion.After
		}
		t.Add(it.CRD, it.Operation, storage, fmt.Sprintf("%d/%s", it.Objects.Evaluated, countText(it.Objects.Total)), fmt.Sprint(it.Objects.WithFindings()), plainApply(it.Verdict), upgradeDoes(r, it.CRD))
	}
	if err := t.Print(w, noHeaders); err != nil {
		return err
	}
	pf := r.Preflight
	if len(r.ServedAgain) > 0 {
		fmt.Fprintln(w)
		var vs []string
		for _, s := range r.ServedAgain {
			vs = append(vs, fmt.Sprintf("%s %s (%s)", s.CRD, s.Version, s.State))
		}
		WriteWrapped(w, "Stored but not served, so served again to read the objects stored at them (undone if the upgrade is refused): "+strings.Join(vs, ", "), "  ", 120)
	}
	fmt.Fprintln(w)
	if len(pf.Unread) > 0 {
		WriteWrapped(w, "Preflight: not evaluated for the objects stored at versions not served ("+strings.Join(pf.Unread, ", ")+"): what they would lose is unknown.", "  ", 120)
	}
	for _, c := range pf.Conversion {
		WriteWrapped(w, fmt.Sprintf("Preflight: %s: %s. Its stored objects cannot be converted: the runbook's first step says what to do; no option goes on.", c.CRD, c.Reason), "  ", 120)
	}
	if len(pf.DataLoss)+len(pf.Rejected)+len(pf.BlockedCRDs)+len(pf.TypeMismatch)+len(pf.OwnershipLoss) == 0 {
		if len(pf.Unread)+len(pf.Conversion) == 0 {
			fmt.Fprintln(w, "Preflight: no object loses a field or would be rejected.")
		}
	} else {
		fmt.Fprintln(w, "Preflight:")
		ft := &Table{Header: []string{"crd", "object", "loses fields / rejected because"}}
		for _, f := range pf.DataLoss {
			ft.Add(f.CRD, objectLabel(f), "loses "+strings.Join(f.Fields, ", "))
		}
		for _, f := range pf.Rejected {
			ft.Add(f.CRD, objectLabel(f), "rejected: "+strings.Join(f.Errors, "; "))
		}
		for _, f := range pf.TypeMismatch {
			ft.Add(f.CRD, objectLabel(f), "values of another type (server-side apply fails): "+strings.Join(f.Errors, "; "))
		}
		for _, f := range pf.OwnershipLoss {
			ft.Add(f.CRD, objectLabel(f), "loses field managers: "+strings.Join(f.Managers, ", "))
		}
		ft.MaxWidth = TerminalWidth - 4
		ft.WrapLastColumn(noHeaders)
		if err := printIndented(w, ft, noHeaders); err != nil {
			return err
		}
		if t := pf.Totals; t != nil {
			WriteWrapped(w, fmt.Sprintf("  The table lists the first objects of each kind; found in all: %s losing fields, %s rejected, %s with values of another type, %s losing field managers.",
				Plural(pf.Count(plan.KindDataLoss), "object"), Plural(pf.Count(plan.KindRejectedWrite), "object"), Plural(pf.Count(plan.KindTypeMismatch), "object"), Plural(pf.Count(plan.KindOwnershipLoss), "object")), "    ", 120)
		}
		for _, c := range pf.BlockedCRDs {
			fmt.Fprintf(w, "  %s: the API server would reject the new CRD (kubectl crdver plan shows why)\n", c)
		}
		if pf.Refused {
			WriteWrapped(w, "  Refused: "+pf.Reason+". Nothing is written. The runbook below says how to keep the data (backup, then convert or fix the objects).", "    ", 120)
		}
	}
	if len(pf.Added) > 0 {
		var objs []string
		for i, f := range pf.Added {
			if i == 5 {
				objs = append(objs, fmt.Sprintf("and %d more (the JSON report lists them)", len(pf.Added)-5))
				break
			}
			objs = append(objs, f.CRD+" "+objectLabel(f)+" ("+strings.Join(f.Added, ", ")+")")
		}
		WriteWrapped(w, fmt.Sprintf("Preflight, not a loss: the conversion of %s adds fields or normalises values, and loses nothing there: %s.", Plural(len(pf.Added), "object"), strings.Join(objs, "; ")), "  ", 120)
	}
	if len(pf.InvalidOnRecreate) > 0 {
		fmt.Fprintln(w)
		WriteWrapped(w, fmt.Sprintf("Invalid on re-create: %s the new CRDs reject on re-create (a restore, a GitOps replace), although the API server accepts their writes (it ratchets unchanged fields). The upgrade goes on and applies the release; fixing them is left to you, before or after (the runbook's fix-invalid-on-recreate step):", Plural(pf.Count(plan.KindInvalidOnRecreate), "object")), "  ", 120)
		if err := printObjectErrors(w, pf.InvalidOnRecreate, noHeaders); err != nil {
			return err
		}
	}
	for _, b := range r.Budgets {
		fmt.Fprintln(w)
		printBudget(w, b, "")
	}
	fmt.Fprintln(w)
	Runbook(w, "Runbook (the whole release, in this order):", r.Plan.Runbook)
	return nil
}

// plainApply says what applying the release as it is does to a CRD: plan's verdict, worded.
func plainApply(verdict string) string {
	switch verdict {
	case plan.VerdictBreaking:
		return "breaks"
	case plan.VerdictInvalidOnRecreate:
		return "invalid on re-create"
	}
	return Dash(verdict)
}

// upgradeDoes says what the upgrade does for a CRD, by the decision table: it refuses for the
// kinds of findings of the CRD that refuse the run (upgrade.Outcome.Refusals), stops with the
// release when another CRD refuses it, and otherwise carries out the CRD's steps (objects
// invalid on re-create are left to the user).
func upgradeDoes(r *upgrade.Report, crd string) string {
	kinds := r.Preflight.KindsOf(crd)
	var refuses []string
	for _, k := range kinds {
		if slices.Contains(r.Outcome.Refusals, k) {
			refuses = append(refuses, string(k))
		}
	}
	switch {
	case len(refuses) > 0:
		return "refuses: " + strings.Join(refuses, ", ")
	case r.Preflight.Refused:
		return "refused with the release"
	case slices.Contains(kinds, plan.KindInvalidOnRecreate):
		return "carries it out; objects left to you"
	}
	return "carries it out"
}

// printObjectErrors prints objects with the API server's errors, indented.
func printObjectErrors(w io.Writer, fs []upgrade.ObjectFinding, noHeaders bool) error {
	t := &Table{Header: []string{"crd", "object", "re-create rejected because"}}
	for _, f := range fs {
		t.Add(f.CRD, objectLabel(f), strings.Join(f.Errors, "; "))
	}
	t.MaxWidth = TerminalWidth - 4
	t.WrapLastColumn(noHeaders)
	return printIndented(w, t, noHeaders)
}

func objectLabel(f upgrade.ObjectFinding) string {
	if f.Namespace == "" {
		return f.Name
	}
	return f.Namespace + "/" + f.Name
}

// printUpgradeResult prints what each step did, the backup, the verification and problems.
func printUpgradeResult(w io.Writer, rep *upgrade.Report, ran, noHeaders bool) error {
	if !ran {
		return nil
	}
	fmt.Fprintln(w)
	t := &Table{Header: []string{"#", "step", "crds", "state", "detail"}}
	for i, s := range rep.Steps {
		crds := strings.Join(s.CRDs, ", ")
		if len(s.CRDs) > 1 {
			crds = fmt.Sprintf("%d CRDs", len(s.CRDs))
		}
		t.Add(fmt.Sprint(i+1), s.Action, Dash(crds), s.State, Dash(s.Detail))
	}
	t.MaxWidth = TerminalWidth
	t.WrapLastColumn(noHeaders)
	if err := t.Print(w, noHeaders); err != nil {
		return err
	}
	if rep.Backup != nil {
		note := ""
		if rep.Backup.Reused {
			note = " (taken by the first run of this upgrade)"
		}
		fmt.Fprintf(w, "\nBackup: %s%s\n", rep.Backup.File, note)
	}
	if v := rep.Verify; v != nil {
		fmt.Fprintln(w)
		vt := &Table{Header: []string{"crd", "storage", "storedVersions", "ssa checked", "ssa failed", "stale managedFields"}}
		for _, c := range v.CRDs {
			vt.Add(c.CRD, c.StorageVersion, strings.Join(c.StoredVersions, ","), fmt.Sprint(c.SSAChecked), fmt.Sprint(len(c.SSAFailures)), fmt.Sprint(c.StaleManagedFields))
		}
		if err := vt.Print(w, noHeaders); err != nil {
			return err
		}
		if len(v.PlanBreaking) == 0 {
			fmt.Fprintln(w, "plan of the same release: nothing breaking")
		}
		if len(v.InvalidOnRecreate) > 0 {
			WriteWrapped(w, fmt.Sprintf("plan of the same release: %s invalid on re-create (left for you; not caused by this upgrade, which rewrites objects unchanged):", Plural(len(v.InvalidOnRecreate), "object")), "  ", 120)
			if err := printObjectErrors(w, v.InvalidOnRecreate, noHeaders); err != nil {
				return err
			}
		}
	}
	for _, p := range rep.Warnings {
		WriteWrapped(w, "warning: "+p, "  ", 120)
	}
	for _, p := range rep.Problems {
		WriteWrapped(w, "problem: "+p, "  ", 120)
	}
	switch rep.Outcome.Result {
	case upgrade.ResultComplete:
		fmt.Fprintf(w, "\nUpgrade complete.\n")
	case upgrade.ResultAppliedRemaining:
		fmt.Fprintln(w)
		WriteWrapped(w, "Release applied and verified. Left for you: "+strings.Join(rep.Outcome.Remaining, "; "), "  ", 120)
	case upgrade.ResultNotApplied:
		fmt.Fprintln(w)
		WriteWrapped(w, "Not applied: "+rep.Outcome.Message, "  ", 120)
	}
	return nil
}
