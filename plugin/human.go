package plugin

import (
	"encoding/json"
	"fmt"
	"io"

	"github.com/crdver/kubectl-crdver/internal/buildinfo"
	"github.com/crdver/kubectl-crdver/migrate"
	"github.com/crdver/kubectl-crdver/ownership"
	"github.com/crdver/kubectl-crdver/plan"
	"github.com/crdver/kubectl-crdver/printers"
)

// humanPrinter prints every command's reports for people: the libraries' reports with
// printers.Human, the command layer's own (the views of a report for one command, parts, notes)
// here and in human_plan.go and human_upgrade.go. A command picks this printer or the data
// printer in Complete (toPrinter) and its Run only calls PrintReport.
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
		printers.Notes(w, r.notes)
		return nil
	case BuildInfo:
		return buildinfo.PrintHuman(w, r)
	case sortedVersions:
		return printers.Lines(w, r)
	case versionsSummary:
		return printers.VersionsSummary(w, r.Items, p.noHeaders)
	case *migrate.Report:
		return printers.MigrateReport(w, r, p.noHeaders, "status.storedVersions left as it is (--no-trim)", "-o json")
	case allPlan:
		return printers.AllPlan(w, r.r.Plans, r.r.CRDs, r.r.Objects, p.wide, p.noHeaders)
	case *MigrateAllReport:
		switch {
		case r.DryRun:
			_, err := fmt.Fprintln(w, "\nDry run: nothing was written.")
			return err
		case len(r.Plans) == 0:
			return nil
		}
		return printers.AllSummary(w, r.Items, p.wide, p.noHeaders)
	case *plan.Report:
		return printPlanReport(w, r, p.wide, p.noHeaders)
	case upgradePlanView:
		return printUpgradePlan(w, r.rep, p.noHeaders)
	case restoreView:
		return p.PrintReport(w, r.rep)
	case upgradeResultView:
		return printUpgradeResult(w, r, p.noHeaders)
	case retireReport:
		if r.showResult {
			printers.RetireResult(w, r.res, p.wide, p.noHeaders)
		}
		return nil
	case dryRunNote:
		_, err := fmt.Fprintln(w, "\nDry run: nothing was written.")
		return err
	case preflightPart:
		return printPreflight(w, r.r, p.noHeaders)
	}
	return printers.Human{NoHeaders: p.noHeaders, Wide: p.wide, AllListed: "-o json"}.PrintReport(w, report)
}

// withCensus is a report with the managedFields census of the CRD's objects: in JSON/YAML the
// census is the last key "managedFields" (printers.WithManagedFields); for people, notes after
// the report.
type withCensus struct {
	report any
	census *ownership.Census
	notes  []string
}

func (r withCensus) MarshalJSON() ([]byte, error) {
	v, err := printers.WithManagedFields(r.report, r.census)
	if err != nil {
		return nil, err
	}
	return json.Marshal(v)
}
