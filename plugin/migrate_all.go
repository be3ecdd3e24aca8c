package plugin

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/crdver/kubectl-crdver/migrate"
	"github.com/crdver/kubectl-crdver/preflight"
)

// MigrateAllReport is the -o json|yaml shape of `kubectl crdver migrate --all`.
type MigrateAllReport struct {
	Plans       []*migrate.Plan   `json:"plans"`
	DryRun      bool              `json:"dryRun"`
	Items       []migrate.AllItem `json:"items"`
	Interrupted bool              `json:"interrupted"`
	// Preflight is what each CRD's rewrite would lose or be refused, found before anything
	// was written.
	Preflight []*preflight.Report `json:"preflight,omitempty"`
}

// allPlan is the plan of --all, printed before the question.
type allPlan struct {
	plans []*migrate.Plan
	crds  int
	total int64
}

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

// runAll plans every pending migration of the cluster, asks once, migrates them one after
// another with one progress display, and prints a summary. The exit code is the worst one.
func (o *MigrateOptions) runAll(ctx context.Context) error {
	c, err := o.g.migrateClients()
	if err != nil {
		return err
	}
	cs, err := o.g.crdClient()
	if err != nil {
		return err
	}
	all, err := listCRDs(ctx, cs)
	if err != nil {
		return err
	}
	pending := migrate.Pending(all)
	trim := !o.NoTrim
	plans, err := migrate.PlanAll(ctx, c, pending, o.ChunkSize, trim)
	if err != nil {
		return clusterError("planning the migrations", err)
	}
	report := &MigrateAllReport{Plans: plans, DryRun: o.DryRun, Items: []migrate.AllItem{}}
	if report.Plans == nil {
		report.Plans = []*migrate.Plan{}
	}
	var total int64
	for _, p := range plans {
		total += p.Objects
	}
	// --quiet leaves only the result: the plan is shown when it is the result (a dry run, or
	// nothing pending) or when a question is asked about it.
	if !o.progressFlags.quiet || o.DryRun || len(plans) == 0 || !o.Yes {
		if err := o.printer.PrintPart(o.g.Out, allPlan{plans: plans, crds: len(all), total: total}); err != nil {
			return err
		}
	}
	// Preflight every CRD before anything is written: one refusal stops the whole run.
	for _, crd := range pending {
		rep, err := o.g.runPreflight(ctx, crd, "", o.RewriteFlags, o.progress, o.printer, "migrate --all")
		if err != nil {
			return err
		}
		report.Preflight = append(report.Preflight, rep)
	}
	if err := o.refusal(report.Preflight, "kubectl crdver migrate --all"); err != nil {
		if o.DryRun || printsData(o.printer) {
			_ = o.printer.PrintReport(o.g.Out, report)
		}
		return ProblemsFound("%s", err.Error())
	}
	if o.DryRun || len(plans) == 0 {
		return o.printer.PrintReport(o.g.Out, report)
	}

	var needed []migrate.Access
	for _, crd := range pending {
		needed = append(needed, migrate.NeededAccess(crd, false, trim)...)
	}
	if err := migrate.CheckAccess(ctx, c, needed); err != nil {
		if errors.Is(err, migrate.ErrAccessDenied) {
			return Unavailable(err)
		}
		return clusterError("checking your rights", err)
	}
	if !o.Yes {
		ok, err := o.confirm(fmt.Sprintf("Migrate %d CRDs (%d objects)? [y/N]: ", len(plans), total))
		if err != nil {
			return err
		}
		if !ok {
			return Unavailable(errors.New("nothing was written: not confirmed (use --yes to skip the question)"))
		}
	}

	progress := &migrate.AllProgress{}
	stop := o.progress.Start(Task{Name: "rewriting", Prefix: "migrate --all", Unit: "objects", Total: total,
		Done: func() int64 { return progress.Progress().Total() },
		Detail: func() string {
			p := progress.Progress()
			return fmt.Sprintf("rewritten %d, already current %d, deleted %d, failed %d", p.Rewritten, p.Current, p.Deleted, p.Failed)
		}})
	res := migrate.RunAll(ctx, c, plans, migrate.AllOptions{
		Rewrite: o.rewriteOptions(),
		Trim:    trim,
		OnRewrite: func(crd string, r *migrate.Rewriter) {
			progress.Start(crd, r)
		},
	})
	stop()
	report.Items, report.Interrupted = res.Items, res.Interrupted
	if err := o.printer.PrintReport(o.g.Out, report); err != nil {
		return err
	}

	worst := migrate.OutcomeDone
	var bad []string
	var lostManagers []string
	for _, it := range res.Items {
		if it.Result != nil && it.Result.ManagedFieldsLost > 0 && !o.ownershipLossConsented(preflightOf(report.Preflight, it.CRD), it.Result) {
			lostManagers = append(lostManagers, fmt.Sprintf("%s (%d objects)", it.CRD, it.Result.ManagedFieldsLost))
		}
		if it.Outcome != migrate.OutcomeDone {
			bad = append(bad, it.CRD+" ("+it.Outcome+")")
		}
		if rank(it.Outcome) > rank(worst) {
			worst = it.Outcome
		}
	}
	switch {
	case res.Interrupted:
		return Unavailable(fmt.Errorf("interrupted: %s; progress is saved per CRD: run kubectl crdver migrate --all again to resume", strings.Join(bad, ", ")))
	case worst == migrate.OutcomeFailed:
		return Unavailable(fmt.Errorf("some migrations could not complete: %s (see the summary)", strings.Join(bad, ", ")))
	case worst == migrate.OutcomeProblems:
		return ProblemsFound("some migrations found problems: %s (see the summary)", strings.Join(bad, ", "))
	case len(lostManagers) > 0:
		return ProblemsFound("objects lost field managers through their rewrite: %s (-o json lists them); re-apply them from their source to restore ownership", strings.Join(lostManagers, ", "))
	}
	return nil
}

func rank(outcome string) int {
	switch outcome {
	case migrate.OutcomeDone:
		return 0
	case migrate.OutcomeProblems:
		return 1
	}
	return 2 // failed, interrupted, not run
}

// preflightOf is crd's preflight report among reps (nil when none).
func preflightOf(reps []*preflight.Report, crd string) *preflight.Report {
	for _, r := range reps {
		if r.CRD == crd {
			return r
		}
	}
	return nil
}
