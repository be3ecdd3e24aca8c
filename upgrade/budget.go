package upgrade

import (
	"context"
	"slices"

	crdinfo "github.com/crdver/kubectl-crdver/crd"
	"github.com/crdver/kubectl-crdver/migrate"
	"github.com/crdver/kubectl-crdver/plan"
)

// budgets works out, before the first write, what each CRD the runbook rewrites will ask of
// the cluster (migrate.EstimateBudget: CRDs of at least migrate.MinBudgetObjects objects): at
// the version the rewrite writes at when the live CRD serves it, else at the version the
// live CRD is read at (the rewrite then runs under the intermediate CRD).
func (r *runner) budgets(ctx context.Context) error {
	for _, s := range r.rep.Plan.Runbook {
		if s.Action != plan.ActionMigrate && s.Action != plan.ActionRetire {
			continue
		}
		for _, name := range s.CRDs {
			it := r.item(name)
			if it == nil || slices.ContainsFunc(r.rep.Budgets, func(b *migrate.Budget) bool { return b.CRD == name }) {
				continue
			}
			live, _ := it.CRDs()
			if live == nil {
				continue
			}
			at := it.StorageVersion.After
			if !crdinfo.IsServed(live, at) {
				at, _ = crdinfo.AccessVersion(live)
			}
			b, err := migrate.EstimateBudget(ctx, r.c, live, at, it.Objects.Total)
			if err != nil {
				return err
			}
			if b != nil {
				r.rep.Budgets = append(r.rep.Budgets, b)
			}
		}
	}
	return nil
}
