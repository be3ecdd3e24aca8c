package plugin

import (
	"context"
	"errors"
	"fmt"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	"github.com/crdver/kubectl-crdver/migrate"
	"github.com/crdver/kubectl-crdver/preflight"
	"github.com/crdver/kubectl-crdver/printers"
)

// MigrateAllReport is the -o json|yaml shape of `kubectl crdver migrate --all`: the library's
// report.
type MigrateAllReport = migrate.AllReport[*preflight.Report]

// completeAll checks the arguments and flags of --all (no CRD name; no per-CRD flags).
func (o *MigrateOptions) completeAll(args []string) error {
	switch {
	case len(args) > 0:
		return UsageErrorf("--all migrates every CRD with a pending migration: do not name one (%s)", strings.Join(args, " "))
	case o.To != "":
		return UsageErrorf("--to cannot be combined with --all: each CRD is migrated to its own storage version")
	case o.Checkpoint != "":
		return UsageErrorf("--checkpoint cannot be combined with --all: each CRD has its own checkpoint in your cache folder")
	case o.Engine == engineCluster:
		return UsageErrorf("--engine cluster cannot be combined with --all yet: run migrate --engine cluster per CRD")
	}
	return nil
}

// runAll runs migrate.All with the flags, the preflight, the prompt and the progress display,
// prints its report and words how it ended.
func (o *MigrateOptions) runAll(ctx context.Context) error {
	c, err := o.g.migrateClients()
	if err != nil {
		return err
	}
	cs, err := o.g.crdClient()
	if err != nil {
		return err
	}
	crds, err := listCRDs(ctx, cs)
	if err != nil {
		return err
	}
	report, err := o.newAll(c).Run(ctx, crds)
	if err != nil {
		return end(report.Outcome.Outcome, o.allError(report, err))
	}
	if err := o.printer.PrintReport(o.g.Out, printers.MigrateAll(report)); err != nil {
		return err
	}
	return end(report.Outcome.Outcome, nil)
}

// newAll is migrate.All as the flags say, with the printer, the preflight and its refusal
// (plan.Consent, through RewriteFlags), the prompt (unless --yes) and the progress display.
func (o *MigrateOptions) newAll(c *migrate.Clients) *migrate.All[*preflight.Report] {
	a := &migrate.All[*preflight.Report]{Clients: c, DryRun: o.DryRun, NoTrim: o.NoTrim, Rewrite: o.rewriteOptions(),
		// --quiet leaves only the result: the plan is shown when it is the result (a dry run,
		// or nothing pending) or when a question is asked about it.
		Planned: func(r *MigrateAllReport) {
			if !o.progressFlags.quiet || o.DryRun || len(r.Plans) == 0 || !o.Yes {
				_ = o.printer.PrintPart(o.g.Out, printers.MigrateAllPlan(r))
			}
		},
		PreWrite: func(ctx context.Context, crd *apiextensionsv1.CustomResourceDefinition) (*preflight.Report, error) {
			return o.g.runPreflight(ctx, crd, "", o.RewriteFlags, o.progress, o.printer, "migrate --all")
		},
		Refuse:   func(found []*preflight.Report) error { return o.refusal(found, "kubectl crdver migrate --all") },
		Progress: o.rewriteProgress("migrate --all"),
		OwnershipLossConsented: func(it migrate.AllItem, found *preflight.Report) bool {
			return o.ownershipLossConsented(found, it.Result)
		},
	}
	if !o.Yes {
		a.Confirm = func(_ context.Context, r *MigrateAllReport) (bool, error) {
			return o.confirm(fmt.Sprintf("Migrate %d CRDs (%d objects)? [y/N]: ", len(r.Plans), r.Objects))
		}
	}
	return a
}

// allError prints the report of a run refused before its rewrites and words the step that
// stopped it with this command's flags (its exit code is the report's Outcome).
func (o *MigrateOptions) allError(report *MigrateAllReport, err error) error {
	var se *migrate.StepError
	if !errors.As(err, &se) {
		return err
	}
	switch se.Step {
	case migrate.StepPlan:
		return clusterText("planning the migrations", se.Err)
	case migrate.StepRefused:
		if o.DryRun || printsData(o.printer) {
			_ = o.printer.PrintReport(o.g.Out, printers.MigrateAll(report))
		}
		return se.Err
	case migrate.StepAccess:
		if errors.Is(se.Err, migrate.ErrAccessDenied) {
			return se.Err
		}
		return clusterText("checking your rights", se.Err)
	case migrate.StepConfirm:
		if errors.Is(se.Err, migrate.ErrNotConfirmed) {
			return errors.New("nothing was written: not confirmed (use --yes to skip the question)")
		}
	}
	return se.Err // the preflight's, worded by runPreflight; the prompt's
}
