package upgrade

// conversion.go: the conversion the release's CRDs rely on (plan's ConversionCheck), in the
// preflight: a conversion that cannot convert the stored objects refuses the run before its
// first write, with the runbook step's instruction, and no option goes on; what its round
// trips lose is data loss, like any other.

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/crdver/kubectl-crdver/plan"
	"github.com/crdver/kubectl-crdver/webhookcheck"
)

// conversionFindings adds to pf what plan found of it's conversion: a refusal when it breaks,
// what it could not ask as unknown, the objects its round trips lose fields of as data loss.
func conversionFindings(it *plan.Item, runbook []plan.RunbookStep, pf *Preflight) {
	c := it.ConversionCheck
	if c == nil {
		return
	}
	switch {
	case c.Breaks():
		cr := ConversionRefusal{CRD: it.CRD, Reason: c.Reason}
		for _, s := range runbook {
			if (s.Action == plan.ActionDeployWebhook || s.Action == plan.ActionFixConversion) && slices.Contains(s.CRDs, it.CRD) {
				cr.Instruction, cr.Objects = s.Why, s.Objects
				break
			}
		}
		if !slices.ContainsFunc(pf.Conversion, func(x ConversionRefusal) bool { return x.CRD == cr.CRD }) {
			pf.Conversion = append(pf.Conversion, cr)
		}
	case c.State == webhookcheck.StateNotAsked:
		if u := it.CRD + ": " + c.Reason; !slices.Contains(pf.Unknown, u) {
			pf.Unknown = append(pf.Unknown, u)
		}
	}
	if _, ls := c.StorageLosses(); len(ls) > 0 {
		for _, l := range ls {
			ns, name, ok := strings.Cut(l.Object, "/")
			if !ok {
				ns, name = "", l.Object
			}
			f := ObjectFinding{CRD: it.CRD, Namespace: ns, Name: name, HeldAt: l.HeldAt}
			for _, p := range l.Fields {
				f.Fields = append(f.Fields, strings.TrimPrefix(p, "."))
			}
			if !slices.ContainsFunc(pf.DataLoss, sameObject(f)) {
				pf.DataLoss = append(pf.DataLoss, f)
			}
		}
	}
}

// conversionUnasked: plan could not convert it's objects through the conversion its CRD relies
// on (it breaks, or could not be asked): the deeper check would only fail the same way.
func (r *runner) conversionUnasked(it *plan.Item) bool {
	c := it.ConversionCheck
	return c != nil && (c.Breaks() || c.State == webhookcheck.StateNotAsked)
}

// conversionRefusal is the refusal's clause: each CRD with what to do first, then run again.
func conversionRefusal(cs []ConversionRefusal) string {
	var parts []string
	seen := map[string]bool{}
	for _, c := range cs {
		what := c.Instruction
		if what == "" {
			what = c.Reason
		}
		if seen[what] {
			continue
		}
		seen[what] = true
		parts = append(parts, what)
	}
	return fmt.Sprintf("the conversion the release's CRDs rely on cannot convert their stored objects (no option goes on): %s; then run the same command again", strings.Join(parts, "; "))
}

// ownWebhooks: a release whose conversion was judged through another webhook (Options.Webhook)
// is still converted, by every write of the run, through the webhook its CRDs name: before the
// first write, that one must answer too (its configuration and Service; the round trips were
// the other's). A CRD whose own webhook is down is refused like a conversion that breaks.
func (r *runner) ownWebhooks(ctx context.Context, pf *Preflight) error {
	if r.o.Webhook == nil || r.o.DryRun {
		return nil
	}
	for i := range r.items {
		it := &r.items[i]
		c := it.ConversionCheck
		if c == nil || c.Target == "" || c.Breaks() {
			continue
		}
		_, next := it.CRDs()
		rep, err := webhookcheck.Check(ctx, next, webhookcheck.Options{Kube: r.c.Kube})
		if err != nil {
			return err
		}
		if rep.State != webhookcheck.StateDown {
			continue
		}
		pf.Conversion = append(pf.Conversion, ConversionRefusal{CRD: it.CRD,
			Reason:      fmt.Sprintf("its conversion was judged through %s, but the API server converts through %s, which is not running: %s", c.Target, rep.Webhook, rep.Reason()),
			Instruction: fmt.Sprintf("deploy the release's conversion webhook (%s) and wait until it answers: the upgrade's writes go through it, not through %s", rep.Webhook, c.Target)})
	}
	return nil
}
