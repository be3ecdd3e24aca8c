package plugin

// preflight.go: the check before a rewrite (preflight.CheckRewrite) wired to migrate,
// migrate --all and retire: its progress display and printer, --allow-data-loss,
// --skip-invalid and --allow-ownership-loss, and the refusal worded with the command line.

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/client-go/rest"

	"github.com/crdver/kubectl-crdver/migrate"
	"github.com/crdver/kubectl-crdver/plan"
	"github.com/crdver/kubectl-crdver/preflight"
	"github.com/crdver/kubectl-crdver/printers"
)

// preflightRefusal: the preflight found what the flags do not allow; nothing was written.
type preflightRefusal struct {
	reports []*preflight.Report
	msg     string
}

func (e *preflightRefusal) Error() string { return e.msg }

// runPreflight checks what rewriting crd's objects at target would lose or be refused
// (preflight.CheckRewrite), with a progress display, prints the findings for people (before
// any question) and returns the report.
func (g *Globals) runPreflight(ctx context.Context, crd *apiextensionsv1.CustomResourceDefinition, target string, rf RewriteFlags, progress Progress, printer ReportPrinter, prefix string) (*preflight.Report, error) {
	cs, err := g.clients()
	if err != nil {
		return nil, err
	}
	mc, err := cs.Migrate()
	if err != nil {
		return nil, err
	}
	var proxy rest.Interface // a service's webhook through the API server's service proxy
	if kube, err := cs.Kube(); err == nil {
		proxy = kube.CoreV1().RESTClient()
	}
	var done, total atomic.Int64
	total.Store(-1)
	stop := progress.Start(Task{Name: "preflight", Prefix: prefix + " preflight", Unit: "objects", Verb: "evaluated",
		TotalFunc: total.Load, Done: done.Load})
	rep, err := preflight.CheckRewrite(ctx, mc, crd, preflight.RewriteOptions{Target: target, Checkpoint: rf.Checkpoint, ChunkSize: rf.ChunkSize,
		Concurrency: rf.Concurrency, QPS: rf.QPS, Proxy: proxy, Progress: func(d, t int64) { done.Store(d); total.Store(t) }})
	stop()
	if err != nil {
		return nil, clusterError(fmt.Sprintf("checking what rewriting %s at %s would lose", crd.Name, target), err)
	}
	return rep, printer.PrintPart(g.Out, printers.Preflight(rep))
}

// consent is what the flags consent to: plan.Consent decides, by the decision table, which
// findings refuse the rewrite.
func (rf RewriteFlags) consent() plan.Consent {
	return plan.Consent{AllowDataLoss: rf.AllowDataLoss, SkipInvalid: rf.SkipInvalid, AllowOwnershipLoss: rf.AllowOwnershipLoss}
}

// ownershipLossConsented reports whether the field managers a rewrite dropped (res) were
// consented to: --allow-ownership-loss given (plan.Consent) and every object that lost them
// listed by its preflight (pre) before the first write.
func (rf RewriteFlags) ownershipLossConsented(pre *preflight.Report, res *migrate.Result) bool {
	return !rf.consent().Refuses(plan.KindOwnershipLoss) && consentedLosses(pre, res)
}

// refusal is the error that stops a run on reps' findings, or nil when the flags allow them.
// cmd is the command line to run again.
func (rf RewriteFlags) refusal(reps []*preflight.Report, cmd string) error {
	of := func(names []string) string {
		if len(reps) == 1 {
			return ""
		}
		return " of " + strings.Join(names, ", ")
	}
	var losing, rejecting, unknown, owning []string
	var lost, rejected, owners int64
	consent := rf.consent()
	for _, r := range reps {
		for _, k := range consent.Refusals(plan.PreflightKinds(r)) {
			switch k {
			case plan.KindDataLoss:
				losing = append(losing, r.CRD)
				lost += r.LossCount
			case plan.KindUnknown:
				unknown = append(unknown, r.CRD)
			case plan.KindOwnershipLoss:
				owning = append(owning, r.CRD)
				owners += r.OwnershipLossCount
			case plan.KindRejectedWrite:
				rejecting = append(rejecting, r.CRD)
				rejected += r.RejectedCount
			}
		}
	}
	if len(losing)+len(rejecting)+len(unknown)+len(owning) == 0 {
		return nil
	}
	var what, then []string
	if lost > 0 {
		what = append(what, fmt.Sprintf("%s%s would lose fields", plural(int(lost), "object"), of(losing)))
		then = append(then, "back up and convert them as said above, or accept the loss with "+cmd+" "+plan.OverrideFlag(plan.KindDataLoss))
	}
	if len(unknown) > 0 {
		what = append(what, fmt.Sprintf("what the rewrite%s loses is unknown", of(unknown)))
		if lost == 0 {
			then = append(then, "make it evaluable as said above, or accept the risk with "+cmd+" "+plan.OverrideFlag(plan.KindUnknown))
		}
	}
	if rejected > 0 {
		what = append(what, fmt.Sprintf("%s%s would be rejected by the rewrite", plural(int(rejected), "object"), of(rejecting)))
		then = append(then, "fix them as said above, or leave them unrewritten with "+cmd+" "+plan.OverrideFlag(plan.KindRejectedWrite)+" (status.storedVersions then keeps the old versions)")
	}
	if owners > 0 {
		what = append(what, fmt.Sprintf("%s%s would lose field managers (their managedFields entries) through the rewrite", plural(int(owners), "object"), of(owning)))
		then = append(then, "fix what the API server cannot type as said above, or accept that those managers lose their ownership with "+cmd+" "+plan.OverrideFlag(plan.KindOwnershipLoss)+" (--allow-data-loss does not)")
	}
	return &preflightRefusal{reports: reps, msg: fmt.Sprintf("refusing before any write: %s (listed above); nothing was written: %s",
		strings.Join(what, "; "), strings.Join(then, "; "))}
}
