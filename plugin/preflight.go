package plugin

// preflight.go: the check before a rewrite (preflight.CheckRewrite) wired to migrate,
// migrate --all and retire: its progress display and printer, and --allow-data-loss,
// --skip-invalid and --allow-ownership-loss as a plan.Consent (which words the refusal).

import (
	"context"
	"fmt"
	"sync/atomic"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/client-go/rest"

	"github.com/crdver/kubectl-crdver/migrate"
	"github.com/crdver/kubectl-crdver/plan"
	"github.com/crdver/kubectl-crdver/preflight"
	"github.com/crdver/kubectl-crdver/printers"
)

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

// refusal is the end of a run refused on reps' findings (plan.Consent.Refusal), or nil when the
// flags allow them. cmd is the command line to run again.
func (rf RewriteFlags) refusal(reps []*preflight.Report, cmd string) error {
	return rf.consent().Refusal(reps, cmd)
}
