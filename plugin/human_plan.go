package plugin

import (
	"fmt"
	"io"
	"strings"

	"github.com/crdver/kubectl-crdver/plan"
)

// findingsShown is how many objects the default output lists per CRD (-o wide: all).
const findingsShown = 10

// printPlanReport prints a summary table, then each CRD's details.
func printPlanReport(w io.Writer, r *plan.Report, wide, noHeaders bool) error {
	t := &table{header: []string{"crd", "operation", "apply", "storage", "schema changes", "objects", "findings", "breaking"}}
	for _, it := range r.Items {
		apply := "allowed"
		if !it.Apply.Allowed {
			apply = "rejected"
		}
		storage := it.StorageVersion.After
		if it.StorageVersion.Before != "" && it.StorageVersion.Before != it.StorageVersion.After {
			storage = it.StorageVersion.Before + " → " + it.StorageVersion.After
		}
		breaking := 0
		for _, c := range it.SchemaChanges {
			if c.Breaking {
				breaking++
			}
		}
		objects := fmt.Sprintf("%d/%s", it.Objects.Evaluated, countText(it.Objects.Total))
		t.add(it.CRD, it.Operation, apply, storage, fmt.Sprintf("%d (%d breaking)", len(it.SchemaChanges), breaking), objects, fmt.Sprint(len(it.Objects.Findings)), yesNo(it.Breaking))
	}
	if err := t.print(w, noHeaders); err != nil {
		return err
	}
	for i := range r.Items {
		fmt.Fprintln(w)
		if err := printPlanItem(w, &r.Items[i], wide, noHeaders); err != nil {
			return err
		}
	}
	return nil
}

func countText(n int64) string {
	if n < 0 {
		return "?"
	}
	return fmt.Sprint(n)
}

func dashList(s []string) string { return dash(strings.Join(s, ", ")) }

func printPlanItem(w io.Writer, it *plan.Item, wide, noHeaders bool) error {
	fmt.Fprintf(w, "%s (%s)\n", it.CRD, it.Operation)
	dryRun := ""
	if it.ApplyVerdictSource == plan.VerdictServerDryRun {
		dryRun = " (server-side dry-run)"
	}
	if it.Apply.Allowed {
		fmt.Fprintf(w, "  Apply: allowed%s\n", dryRun)
	} else {
		fmt.Fprintf(w, "  Apply: rejected by the API server%s:\n", dryRun)
		for _, e := range it.Apply.Errors {
			fmt.Fprintf(w, "    %s\n", e)
		}
	}
	for _, wn := range it.Apply.Warnings {
		fmt.Fprintf(w, "    warning: %s\n", wn)
	}
	if it.Operation == plan.OperationUpdate {
		fmt.Fprintf(w, "  Versions: added %s; removed %s; unserved %s; deprecated %s\n",
			dashList(it.Versions.Added), dashList(it.Versions.Removed), dashList(it.Versions.Unserved), dashList(it.Versions.Deprecated))
	}
	storage := it.StorageVersion.After
	switch it.StorageVersion.Before {
	case "":
	case it.StorageVersion.After:
		storage += " (unchanged)"
	default:
		storage = it.StorageVersion.Before + " → " + it.StorageVersion.After
	}
	pending := "no migration pending"
	if it.MigrationPending {
		pending = fmt.Sprintf("migration pending for %d objects", it.MigrationObjects)
	}
	fmt.Fprintf(w, "  Storage: %s; storedVersions after the apply: %s (%s)\n", storage, dashList(it.StoredVersionsAfterApply), pending)
	if len(it.Conversion) > 0 {
		fmt.Fprintf(w, "  Conversion: %s\n", strings.Join(it.Conversion, "; "))
	}
	if len(it.ConversionSample) > 0 {
		fmt.Fprintln(w, "  Conversion sample (round trips through the new webhook):")
		t := &table{header: []string{"to", "objects", "converted", "problems"}}
		for _, c := range it.ConversionSample {
			t.add(c.To, fmt.Sprint(c.Objects), fmt.Sprint(c.Converted), fmt.Sprint(c.Problems))
		}
		if err := printIndented(w, t, noHeaders); err != nil {
			return err
		}
		for _, c := range it.ConversionSample {
			if c.Unreachable != "" {
				fmt.Fprintf(w, "    to %s: webhook unreachable: %s\n", c.To, c.Unreachable)
			}
			for i, f := range c.Findings {
				if !wide && i == findingsShown {
					fmt.Fprintf(w, "    … and %d more (-o wide lists them)\n", len(c.Findings)-i)
					break
				}
				fmt.Fprintf(w, "    %s: %s %s %s: %s\n", f.Object, f.Direction, f.Check, f.Path, f.Detail)
			}
		}
	}
	if len(it.SchemaChanges) > 0 {
		fmt.Fprintln(w, "  Schema changes:")
		t := &table{header: []string{"version", "path", "change", "breaking"}}
		for _, c := range it.SchemaChanges {
			t.add(c.Version, dash(c.Path), c.Change, yesNo(c.Breaking))
		}
		if err := printIndented(w, t, noHeaders); err != nil {
			return err
		}
	} else if it.Operation == plan.OperationUpdate {
		fmt.Fprintln(w, "  Schema changes: none")
	}
	if it.Operation == plan.OperationUpdate {
		at := ""
		if it.Objects.ReadVersion != "" {
			at = " at " + it.Objects.ReadVersion
		}
		fmt.Fprintf(w, "  Objects: %d of %s evaluated%s, %d with findings\n", it.Objects.Evaluated, countText(it.Objects.Total), at, len(it.Objects.Findings))
		for _, n := range it.Objects.Notes {
			fmt.Fprintf(w, "    note: %s\n", n)
		}
	}
	if len(it.Objects.Findings) > 0 {
		shown := it.Objects.Findings
		if !wide && len(shown) > findingsShown {
			shown = shown[:findingsShown]
		}
		t := &table{header: []string{"namespace", "name", "pruned on read", "defaulted on read", "re-create", "no-op update"}}
		for _, f := range shown {
			pruned := dashList(f.PrunedOnRead)
			if len(f.PossiblyPrunedOnRead) > 0 {
				pruned = strings.TrimPrefix(pruned+" ", "- ") + "(depending on the encoding: " + strings.Join(f.PossiblyPrunedOnRead, ", ") + ")"
			}
			t.add(dash(f.Namespace), f.Name, pruned, dashList(f.DefaultedOnRead), verdict(f.CreateErrors), verdict(f.UpdateErrors))
		}
		if err := printIndented(w, t, noHeaders); err != nil {
			return err
		}
		for _, f := range shown {
			name := f.Name
			if f.Namespace != "" {
				name = f.Namespace + "/" + name
			}
			msgs := f.CreateErrors
			if !wide && len(msgs) > 1 {
				msgs = msgs[:1]
			}
			for _, m := range msgs {
				fmt.Fprintf(w, "    %s: re-create: %s\n", name, m)
			}
			msgs = f.UpdateErrors
			if !wide && len(msgs) > 1 {
				msgs = msgs[:1]
			}
			for _, m := range msgs {
				fmt.Fprintf(w, "    %s: update: %s\n", name, m)
			}
			for _, m := range f.UpdateWarnings {
				fmt.Fprintf(w, "    %s: update warning: %s\n", name, m)
			}
			for _, m := range f.Notes {
				fmt.Fprintf(w, "    %s: note: %s\n", name, m)
			}
		}
		if len(shown) < len(it.Objects.Findings) {
			fmt.Fprintf(w, "    … and %d more objects (-o wide lists every object and every message)\n", len(it.Objects.Findings)-len(shown))
		}
	}
	if len(it.ManagedFields) > 0 {
		fmt.Fprintln(w, "  Field managers:")
		t := &table{header: []string{"version", "managers", "objects", "after the apply"}}
		for _, m := range it.ManagedFields {
			after := "ok"
			switch {
			case m.RemovedByThisChange:
				after = "version removed: server-side apply fails on these objects"
			case m.UnservedByThisChange:
				after = "version no longer served"
			}
			t.add(m.Version, strings.Join(m.Managers, ", "), fmt.Sprint(m.Objects), after)
		}
		if err := printIndented(w, t, noHeaders); err != nil {
			return err
		}
	}
	if len(it.Steps) > 0 {
		fmt.Fprintln(w, "  Steps:")
		for i, s := range it.Steps {
			fmt.Fprintf(w, "    %d. %s\n", i+1, s)
		}
	}
	for _, n := range it.Notes {
		fmt.Fprintf(w, "  note: %s\n", n)
	}
	return nil
}

func verdict(errs []string) string {
	if len(errs) > 0 {
		return "rejected"
	}
	return "ok"
}

// printIndented prints a table indented by four spaces.
func printIndented(w io.Writer, t *table, noHeaders bool) error {
	var b strings.Builder
	if err := t.print(&b, noHeaders); err != nil {
		return err
	}
	lines := strings.Split(strings.TrimRight(b.String(), "\n"), "\n")
	for _, l := range lines {
		if _, err := fmt.Fprintf(w, "    %s\n", l); err != nil {
			return err
		}
	}
	return nil
}
