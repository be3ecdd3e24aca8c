package printers

import (
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/crdver/kubectl-crdver/convert"
	"github.com/crdver/kubectl-crdver/doctor"
	"github.com/crdver/kubectl-crdver/explain"
	"github.com/crdver/kubectl-crdver/internal/textout"
	"github.com/crdver/kubectl-crdver/migrate"
	"github.com/crdver/kubectl-crdver/restore"
	"github.com/crdver/kubectl-crdver/retire"
	"github.com/crdver/kubectl-crdver/upgrade"
)

// ReportPrinter prints a command's report: as data (Data), for people (Human) or otherwise.
// A command resolves it from its flags once, before its work (kubectl's PrintFlags.ToPrinter).
type ReportPrinter interface {
	// PrintReport prints the command's report.
	PrintReport(w io.Writer, report any) error
	// PrintPart prints a part of the report as soon as it is known (a migration's plan before
	// its question). The data printers print nothing: the part is in the final report.
	PrintPart(w io.Writer, part any) error
}

// Data prints reports as indented JSON, or as YAML.
type Data struct{ YAML bool }

// PrintReport prints report as JSON or YAML.
func (p Data) PrintReport(w io.Writer, report any) error { return textout.Data(w, report, p.YAML) }

// PrintPart prints nothing: the part is in the final report.
func (Data) PrintPart(io.Writer, any) error { return nil }

// Human prints the libraries' reports for people, the way kubectl does: upper-case headers, no
// borders, aligned columns (Table), within TerminalWidth columns unless Wide.
type Human struct {
	NoHeaders bool
	Wide      bool
	// AllListed names what lists every item where only the first are shown ("-o json" for the
	// command line); empty: "the JSON report".
	AllListed string
}

// PrintPart prints a part of a report as soon as it is known.
func (p Human) PrintPart(w io.Writer, part any) error { return p.PrintReport(w, part) }

// PrintReport prints report with the printer of its type.
func (p Human) PrintReport(w io.Writer, report any) error {
	all := p.AllListed
	if all == "" {
		all = "the JSON report"
	}
	switch r := report.(type) {
	case explain.VersionsReport:
		return printVersionsTable(w, r, p.Wide, p.NoHeaders)
	case []explain.Summary:
		return VersionsSummary(w, r, p.NoHeaders)
	case *explain.Explanation:
		return printExplanation(w, r, p.NoHeaders)
	case *explain.MetadataExplanation:
		return printMetadataExplanation(w, r, p.NoHeaders)
	case *explain.SchemaDiff:
		return printCompare(w, r, p.NoHeaders)
	case *migrate.Plan:
		return printPlan(w, r, p.NoHeaders)
	case *migrate.Report:
		return MigrateReport(w, r, p.NoHeaders, "status.storedVersions left as it is (not trimmed)", all)
	case *migrate.Status:
		return printMigrateStatus(w, r)
	case *convert.Report:
		return printConvertReport(w, r, p.NoHeaders, all)
	case *convert.WriteReport:
		return printWriteReport(w, r, p.NoHeaders)
	case *convert.LoadReport:
		return printLoadReport(w, r, p.NoHeaders)
	case *doctor.Report:
		return printDoctorReport(w, r, p.Wide, p.NoHeaders)
	case *retire.Plan:
		return printRetirePlan(w, r, p.Wide, p.NoHeaders)
	case *retire.Result:
		RetireResult(w, r, p.Wide, p.NoHeaders)
		return nil
	case *restore.Report:
		return printRestoreReport(w, r, p.NoHeaders)
	case *upgrade.Status:
		return UpgradeStatus(w, r, p.NoHeaders)
	}
	return fmt.Errorf("no human printer for %T", report)
}

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
