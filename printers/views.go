package printers

// views.go: the Report of each library report, and of the parts and views the commands print.
// A command wraps its report in one of these to print it; as data each is the library's value.

import (
	"encoding/json"
	"fmt"
	"io"

	"github.com/crdver/kubectl-crdver/convert"
	"github.com/crdver/kubectl-crdver/doctor"
	"github.com/crdver/kubectl-crdver/explain"
	"github.com/crdver/kubectl-crdver/internal/buildinfo"
	"github.com/crdver/kubectl-crdver/markdown"
	"github.com/crdver/kubectl-crdver/migrate"
	"github.com/crdver/kubectl-crdver/ownership"
	"github.com/crdver/kubectl-crdver/plan"
	"github.com/crdver/kubectl-crdver/preflight"
	"github.com/crdver/kubectl-crdver/restore"
	"github.com/crdver/kubectl-crdver/retire"
	"github.com/crdver/kubectl-crdver/upgrade"
)

// Versions is a CRD's versions in priority order (`versions CRD`).
func Versions(r explain.VersionsReport) Report {
	return newView(r, func(w io.Writer, r explain.VersionsReport, h Human) error {
		return printVersionsTable(w, r, h.Wide, h.NoHeaders)
	})
}

// versionsAll is the data of VersionsAll.
type versionsAll struct {
	Items []explain.Summary `json:"items"`
}

// VersionsAll is one row per CRD (`versions --all`); as data {"items": […]}.
func VersionsAll(items []explain.Summary) MarkdownReport {
	return newMarkdownView(versionsAll{Items: items},
		func(w io.Writer, r versionsAll, h Human) error { return VersionsSummary(w, r.Items, h.NoHeaders) },
		func(r versionsAll, limit int) string { return markdown.Versions(r.Items, limit) })
}

// SortedVersions is version strings in priority order, one a line (`versions --sort`).
func SortedVersions(versions []string) Report {
	return newView(versions, func(w io.Writer, vs []string, _ Human) error { return Lines(w, vs) })
}

// BuildInfo is the build's version (`version`).
func BuildInfo(bi buildinfo.Info) Report {
	return newView(bi, func(w io.Writer, bi buildinfo.Info, _ Human) error { return buildinfo.PrintHuman(w, bi) })
}

// Explanation is a CRD's field tree (`explain`).
func Explanation(e *explain.Explanation) Report {
	return newView(e, func(w io.Writer, e *explain.Explanation, h Human) error { return printExplanation(w, e, h.NoHeaders) })
}

// Metadata is `metadata` explained (`explain CRD metadata`).
func Metadata(e *explain.MetadataExplanation) Report {
	return newView(e, func(w io.Writer, e *explain.MetadataExplanation, h Human) error {
		return printMetadataExplanation(w, e, h.NoHeaders)
	})
}

// Compare is the differences between two versions' schemas (`explain --compare`).
func Compare(d *explain.SchemaDiff) Report {
	return newView(d, func(w io.Writer, d *explain.SchemaDiff, h Human) error { return printCompare(w, d, h.NoHeaders) })
}

// MigratePlan is a migration's plan, printed before its question.
func MigratePlan(p *migrate.Plan) Report {
	return newView(p, func(w io.Writer, p *migrate.Plan, h Human) error { return printPlan(w, p, h.NoHeaders) })
}

// Migrate is what a migration did (its plan was printed before, as a part); untrimmed is the
// line printed when the run was told not to trim status.storedVersions.
func Migrate(r *migrate.Report, untrimmed string) Report {
	return newView(r, func(w io.Writer, r *migrate.Report, h Human) error {
		return MigrateReport(w, r, h.NoHeaders, untrimmed, h.all())
	})
}

// MigrateStatus is `migrate status`.
func MigrateStatus(st *migrate.Status) Report {
	return newView(st, func(w io.Writer, st *migrate.Status, _ Human) error { return printMigrateStatus(w, st) })
}

// MigrateAllPlan is the plan of migrate --all, printed before its question: one row per
// pending CRD.
func MigrateAllPlan[F any](r *migrate.AllReport[F]) Report {
	return newView(r, func(w io.Writer, r *migrate.AllReport[F], h Human) error {
		return AllPlan(w, r.Plans, r.CRDs, r.Objects, h.Wide, h.NoHeaders)
	})
}

// MigrateAll is what migrate --all did: one row per CRD (its plan was printed before).
func MigrateAll[F any](r *migrate.AllReport[F]) Report {
	return newView(r, func(w io.Writer, r *migrate.AllReport[F], h Human) error {
		switch {
		case r.DryRun:
			return dryRunNote(w)
		case len(r.Plans) == 0:
			return nil
		}
		return AllSummary(w, r.Items, h.Wide, h.NoHeaders)
	})
}

// Convert is what the webhook's responses and round trips showed (`convert`).
func Convert(r *convert.Report) Report {
	return newView(r, func(w io.Writer, r *convert.Report, h Human) error {
		return printConvertReport(w, r, h.NoHeaders, h.all())
	})
}

// ConvertWrite is what `convert --write` wrote.
func ConvertWrite(r *convert.WriteReport) MarkdownReport {
	return newMarkdownView(r,
		func(w io.Writer, r *convert.WriteReport, h Human) error { return printWriteReport(w, r, h.NoHeaders) },
		func(r *convert.WriteReport, _ int) string { return ConvertWriteMarkdown(r) })
}

// ConvertLoad is what `convert --load` measured: latency per request size against the
// API server's budget.
func ConvertLoad(r *convert.LoadReport) MarkdownReport {
	return newMarkdownView(r,
		func(w io.Writer, r *convert.LoadReport, h Human) error { return printLoadReport(w, r, h.NoHeaders) },
		func(r *convert.LoadReport, _ int) string { return ConvertLoadMarkdown(r) })
}

// Doctor is `doctor`'s checks.
func Doctor(r *doctor.Report) MarkdownReport {
	return newMarkdownView(r,
		func(w io.Writer, r *doctor.Report, h Human) error {
			return printDoctorReport(w, r, h.Wide, h.NoHeaders)
		},
		markdown.Doctor)
}

// Plan is what applying new CRDs would do (`plan`): a summary table, each CRD's details and
// the release runbook.
func Plan(r *plan.Report) MarkdownReport {
	return newMarkdownView(r, printPlanReport, markdown.Plan)
}

// PlanPath is a release path (`plan --via`): the hops' table and each hop's runbook.
func PlanPath(r *plan.PathReport) MarkdownReport {
	return newMarkdownView(r,
		func(w io.Writer, r *plan.PathReport, h Human) error { return Path(w, r, h.NoHeaders) },
		func(r *plan.PathReport, _ int) string { return PathMarkdown(r) })
}

// Preflight is what a rewrite would lose or be refused, printed before any question: counts,
// the first objects of each kind, what is unknown and how to keep the data.
func Preflight(r *preflight.Report) Report {
	return newView(r, printPreflight)
}

// RetirePlan is retire's plan, printed before its question.
func RetirePlan(p *retire.Plan) Report {
	return newView(p, func(w io.Writer, p *retire.Plan, h Human) error { return printRetirePlan(w, p, h.Wide, h.NoHeaders) })
}

// Retire is what retire did; for people, its steps only when shown (not after a dry run or a
// question answered no: the plan said it all).
func Retire(res *retire.Result, shown bool) Report {
	return newView(res, func(w io.Writer, res *retire.Result, h Human) error {
		if shown {
			RetireResult(w, res, h.Wide, h.NoHeaders)
		}
		return nil
	})
}

// Restore is what `restore` put back (or would, on a dry run).
func Restore(r *restore.Report) Report {
	return newView(r, func(w io.Writer, r *restore.Report, h Human) error { return printRestoreReport(w, r, h.NoHeaders) })
}

// UpgradePlan is an upgrade's preflight and runbook, printed before anything is written.
func UpgradePlan(r *upgrade.Report) Report {
	return newView(r, func(w io.Writer, r *upgrade.Report, h Human) error { return printUpgradePlan(w, r, h.NoHeaders) })
}

// UpgradeResult is what an upgrade did; for people, each step, the backup, the verification
// and the problems — only when it ran (ran), as its plan said the rest.
func UpgradeResult(r *upgrade.Report, ran bool) Report {
	return newView(r, func(w io.Writer, r *upgrade.Report, h Human) error { return printUpgradeResult(w, r, ran, h.NoHeaders) })
}

// UpgradePath is an upgrade along a release path: the path, then each hop's plan (on a dry
// run) and steps.
func UpgradePath(r *upgrade.PathReport) Report {
	return newView(r, func(w io.Writer, r *upgrade.PathReport, h Human) error {
		if err := Path(w, r.Path, h.NoHeaders); err != nil {
			return err
		}
		if err := PathPreflight(w, r.Preflight, h.NoHeaders); err != nil {
			return err
		}
		for _, hop := range r.Hops {
			if p := hop.Hop; p != nil {
				fmt.Fprintf(w, "\nHop %d/%d (kubectl crdver upgrade -f %s):\n", p.Index, p.Of, p.File)
			}
			if hop.DryRun {
				if err := printUpgradePlan(w, hop, h.NoHeaders); err != nil {
					return err
				}
			}
			if err := printUpgradeResult(w, hop, !hop.DryRun, h.NoHeaders); err != nil {
				return err
			}
		}
		return nil
	})
}

// UpgradeStatus is what an earlier upgrade of a release did on this cluster and what is left
// (`upgrade status`).
func UpgradeStatus(st *upgrade.Status) Report {
	return newView(st, func(w io.Writer, st *upgrade.Status, h Human) error { return printUpgradeStatus(w, st, h.NoHeaders) })
}

// DryRunNote ends a dry run's output for people (nothing as data).
func DryRunNote() Report {
	return newView(struct{}{}, func(w io.Writer, _ struct{}, _ Human) error { return dryRunNote(w) })
}

func dryRunNote(w io.Writer) error {
	_, err := fmt.Fprintln(w, "\nDry run: nothing was written.")
	return err
}

// WithCensus is a report with the managedFields census of its CRD's objects: as data the
// census is the last key "managedFields" (WithManagedFields); for people, notes after the
// report.
func WithCensus(r Report, census *ownership.Census, notes []string) Report {
	return withCensus{report: r, census: census, notes: notes}
}

type withCensus struct {
	report Report
	census *ownership.Census
	notes  []string
}

func (r withCensus) PrintHuman(w io.Writer, h Human) error {
	if err := r.report.PrintHuman(w, h); err != nil {
		return err
	}
	Notes(w, r.notes)
	return nil
}

func (r withCensus) MarshalJSON() ([]byte, error) {
	v, err := WithManagedFields(r.report, r.census)
	if err != nil {
		return nil, err
	}
	return json.Marshal(v)
}
