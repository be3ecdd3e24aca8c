package printers

import (
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/crdver/kubectl-crdver/explain"
)

// VersionsSummary prints one row per CRD (`versions --all`).
func VersionsSummary(w io.Writer, items []explain.Summary, noHeaders bool) error {
	t := &Table{Header: []string{"name", "storage", "preferred", "stored versions", "served", "migration pending"}}
	unknown := 0
	for _, r := range items {
		stored := Dash(strings.Join(r.StoredVersions, ","))
		if !r.StoredVersionsKnown {
			stored = "?"
			unknown++
		}
		t.Add(r.Name, Dash(r.StorageVersion), Dash(r.PreferredVersion), stored,
			fmt.Sprintf("%d/%d", r.Served, r.Versions), strings.Replace(YesNoUnknown(r.MigrationPending), "?", "unknown", 1))
	}
	if err := t.Print(w, noHeaders); err != nil {
		return err
	}
	if unknown > 0 {
		_, err := fmt.Fprintf(w, "note: storedVersions unknown for %s: the files have no status.storedVersions; check the cluster (kubectl crdver versions --all)\n", Plural(unknown, "CRD"))
		return err
	}
	return nil
}

func printVersionsTable(w io.Writer, r explain.VersionsReport, wide, noHeaders bool) error {
	t := &Table{Header: []string{"rank", "version", "stability", "served", "storage", "stored", "deprecated", "preferred"}}
	if wide {
		t.Header = append(t.Header, "schema", "deprecation warning")
	}
	t.Header = append(t.Header, "notes")
	if !wide {
		t.MaxWidth = TerminalWidth
	}
	for _, v := range r.Versions {
		row := []string{strconv.Itoa(v.Rank), v.Name, string(v.Stability), YesNo(v.Served), YesNo(v.Storage), YesNoUnknown(v.Stored), YesNo(v.Deprecated), Mark(v.Preferred)}
		if wide {
			row = append(row, YesNo(v.HasSchema), Dash(v.DeprecationWarning))
		}
		row = append(row, strings.Join(v.Notes, "; "))
		t.Add(row...)
	}
	if err := t.Print(w, noHeaders); err != nil {
		return err
	}
	for _, n := range r.Notes {
		if !wide {
			n = strings.ReplaceAll(WrapWords(n, TerminalWidth-len("note: ")), "\n", "\n      ")
		}
		if _, err := fmt.Fprintf(w, "note: %s\n", n); err != nil {
			return err
		}
	}
	return nil
}
