package plugin

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/crdver/kubectl-crdver/convert"
	"github.com/crdver/kubectl-crdver/doctor"
	"github.com/crdver/kubectl-crdver/explain"
	"github.com/crdver/kubectl-crdver/migrate"
	"github.com/crdver/kubectl-crdver/ownership"
	"github.com/crdver/kubectl-crdver/plan"
	"github.com/crdver/kubectl-crdver/retire"
)

// humanPrinter prints every command's reports for people, the way kubectl does: upper-case
// headers, no borders, aligned columns (table). The printers of all commands live in the
// human*.go files; a command picks this printer or the data printer in Complete (toPrinter) and
// its Run only calls PrintReport.
type humanPrinter struct {
	noHeaders bool
	wide      bool
	// diff (preview): a unified diff from the input to the result instead of the result.
	diff bool
	// color: the diff in red and green (--color).
	color bool
}

// PrintPart prints a part of a report as soon as it is known.
func (p *humanPrinter) PrintPart(w io.Writer, part any) error { return p.PrintReport(w, part) }

// PrintReport prints report with the printer of its type.
func (p *humanPrinter) PrintReport(w io.Writer, report any) error {
	switch r := report.(type) {
	case withCensus:
		if err := p.PrintReport(w, r.report); err != nil {
			return err
		}
		printNotes(w, r.notes)
		return nil
	case BuildInfo:
		return printBuildInfo(w, r)
	case sortedVersions:
		return printLines(w, r)
	case versionsSummary:
		return printVersionsSummary(w, r, p.noHeaders)
	case explain.VersionsReport:
		return printVersionsTable(w, r, p.wide, p.noHeaders)
	case *explain.Explanation:
		return printExplanation(w, r, p.noHeaders)
	case *metadataExplanation:
		return printMetadataExplanation(w, r, p.noHeaders)
	case *explain.SchemaDiff:
		return printCompare(w, r, p.noHeaders)
	case nonStructural:
		return printViolations(w, r, p.noHeaders)
	case *PreviewReport:
		return printPreviewReport(w, r, p.diff, p.color)
	case *migrate.Plan:
		return printPlan(w, r, p.noHeaders)
	case *migrate.Report:
		return printMigrateReport(w, r, p.noHeaders)
	case allPlan:
		return printAllPlan(w, r.plans, r.crds, r.total, p.wide, p.noHeaders)
	case *MigrateAllReport:
		return printMigrateAllReport(w, r, p.wide, p.noHeaders)
	case *convert.Report:
		return printConvertReport(w, r, p.noHeaders)
	case *doctor.Report:
		return printDoctorReport(w, r, p.wide, p.noHeaders)
	case *plan.Report:
		return printPlanReport(w, r, p.wide, p.noHeaders)
	case upgradePlanView:
		return printUpgradePlan(w, r.rep, p.noHeaders)
	case restoreView:
		return printRestoreReport(w, r.rep, p.noHeaders)
	case upgradeResultView:
		return printUpgradeResult(w, r, p.noHeaders)
	case *retire.Plan:
		return printRetirePlan(w, r, p.wide, p.noHeaders)
	case retireReport:
		if r.showResult {
			printRetireResult(w, r.res, p.wide, p.noHeaders)
		}
		return nil
	case dryRunNote:
		_, err := fmt.Fprintln(w, "\nDry run: nothing was written.")
		return err
	case *migrate.Status:
		return printMigrateStatus(w, r)
	case preflightPart:
		return printPreflight(w, r.r, p.noHeaders)
	}
	return fmt.Errorf("no human printer for %T", report)
}

// withCensus is a report with the managedFields census of the CRD's objects: in JSON/YAML the
// census is the last key "managedFields" (withManagedFields); for people, notes after the report.
type withCensus struct {
	report any
	census *ownership.Census
	notes  []string
}

func (r withCensus) MarshalJSON() ([]byte, error) {
	v, err := withManagedFields(r.report, r.census)
	if err != nil {
		return nil, err
	}
	return json.Marshal(v)
}

func printBuildInfo(w io.Writer, bi BuildInfo) error {
	commit := ""
	if bi.Commit != "" {
		commit = " commit " + bi.Commit
	}
	_, err := fmt.Fprintf(w, "kubectl-crdver %s%s (%s, %s, Kubernetes libraries %s)\n", bi.Version, commit, bi.GoVersion, bi.Platform, bi.KubernetesLibrary)
	return err
}

func printLines(w io.Writer, lines []string) error {
	var b strings.Builder
	for _, l := range lines {
		b.WriteString(l)
		b.WriteByte('\n')
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func printVersionsSummary(w io.Writer, s versionsSummary, noHeaders bool) error {
	t := &table{header: []string{"name", "storage", "preferred", "stored versions", "served", "migration pending"}}
	unknown := 0
	for _, r := range s.Items {
		stored := dash(strings.Join(r.StoredVersions, ","))
		if !r.StoredVersionsKnown {
			stored = "?"
			unknown++
		}
		t.add(r.Name, dash(r.StorageVersion), dash(r.PreferredVersion), stored,
			fmt.Sprintf("%d/%d", r.Served, r.Versions), strings.Replace(yesNoUnknown(r.MigrationPending), "?", "unknown", 1))
	}
	if err := t.print(w, noHeaders); err != nil {
		return err
	}
	if unknown > 0 {
		_, err := fmt.Fprintf(w, "note: storedVersions unknown for %s: the files have no status.storedVersions; check the cluster (kubectl crdver versions --all)\n", plural(unknown, "CRD"))
		return err
	}
	return nil
}

func printVersionsTable(w io.Writer, r explain.VersionsReport, wide, noHeaders bool) error {
	t := &table{header: []string{"rank", "version", "stability", "served", "storage", "stored", "deprecated", "preferred"}}
	if wide {
		t.header = append(t.header, "schema", "deprecation warning")
	}
	t.header = append(t.header, "notes")
	if !wide {
		t.maxWidth = terminalWidth
	}
	for _, v := range r.Versions {
		row := []string{strconv.Itoa(v.Rank), v.Name, string(v.Stability), yesNo(v.Served), yesNo(v.Storage), yesNoUnknown(v.Stored), yesNo(v.Deprecated), mark(v.Preferred)}
		if wide {
			row = append(row, yesNo(v.HasSchema), dash(v.DeprecationWarning))
		}
		row = append(row, strings.Join(v.Notes, "; "))
		t.add(row...)
	}
	if err := t.print(w, noHeaders); err != nil {
		return err
	}
	for _, n := range r.Notes {
		if !wide {
			n = strings.ReplaceAll(wrapWords(n, terminalWidth-len("note: ")), "\n", "\n      ")
		}
		if _, err := fmt.Fprintf(w, "note: %s\n", n); err != nil {
			return err
		}
	}
	return nil
}
