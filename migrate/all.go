package migrate

import (
	"context"
	"fmt"
	crdinfo "github.com/crdver/kubectl-crdver/crd"
	"sort"
	"sync"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Pending returns the CRDs whose status.storedVersions lists a version other than the storage
// version (a migration is pending), sorted by name.
func Pending(crds []*apiextensionsv1.CustomResourceDefinition) []*apiextensionsv1.CustomResourceDefinition {
	var out []*apiextensionsv1.CustomResourceDefinition
	for _, crd := range crds {
		storage := crdinfo.StorageVersion(crd)
		for _, v := range crd.Status.StoredVersions {
			if v != storage {
				out = append(out, crd)
				break
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// PlanAll builds the plan of every CRD in crds (each to its current storage version).
func PlanAll(ctx context.Context, c *Clients, crds []*apiextensionsv1.CustomResourceDefinition, chunkSize int64, trim bool) ([]*Plan, error) {
	var out []*Plan
	for _, crd := range crds {
		p, err := BuildPlan(ctx, c, crd, "", chunkSize, trim)
		if err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	return out, nil
}

// AllOptions tune RunAll.
type AllOptions struct {
	// Rewrite is the budget (Concurrency, QPS, ChunkSize, MaxAttempts) of the whole run: the
	// CRDs are migrated one after another, each with all of it, so that together they never
	// exceed it. Rewrite.Checkpoint is ignored: see Checkpoint.
	Rewrite RewriteOptions
	// Checkpoint gives the checkpoint file of a CRD (default: DefaultCheckpointPath).
	Checkpoint func(crd string) (string, error)
	// Trim trims status.storedVersions of each CRD after its rewrite (when proved safe).
	Trim bool
	// OnRewrite is called as each CRD's rewrite starts.
	OnRewrite func(crd string, r *Rewriter)
}

// AllItem is the outcome for one CRD.
type AllItem struct {
	CRD    string      `json:"crd"`
	Result *Result     `json:"result,omitempty"`
	Trim   *TrimResult `json:"trim,omitempty"`
	// Error is what stopped this CRD's migration ("" when it ran to the end).
	Error string `json:"error,omitempty"`
	// Outcome: "done" (every object accounted for, trimmed or nothing to trim), "problems"
	// (objects failed or the trim was not safe), "failed" (could not complete), "interrupted"
	// (stopped by Ctrl-C or a cancelled context; its checkpoint resumes it), "not run" (an
	// earlier interruption stopped the whole run).
	Outcome string `json:"outcome"`
}

// Outcomes of AllItem, from best to worst.
const (
	OutcomeDone        = "done"
	OutcomeProblems    = "problems"
	OutcomeFailed      = "failed"
	OutcomeInterrupted = "interrupted"
	OutcomeNotRun      = "not run"
)

// AllResult is what RunAll did, one item per plan, in the plans' order.
type AllResult struct {
	Items []AllItem `json:"items"`
	// Interrupted: the context was cancelled; the CRD being migrated has its checkpoint.
	Interrupted bool `json:"interrupted"`
}

// RunAll migrates the CRDs of plans one after another: for each, a fresh read of the CRD, a
// wait until the API server encodes at its storage version, the checkpointed rewrite, and the
// guarded trim. A CRD that fails does not stop the others; a cancelled context does.
func RunAll(ctx context.Context, c *Clients, plans []*Plan, o AllOptions) *AllResult {
	res := &AllResult{}
	for _, p := range plans {
		item := AllItem{CRD: p.CRD, Outcome: OutcomeNotRun}
		if ctx.Err() != nil {
			res.Interrupted = true
			res.Items = append(res.Items, item)
			continue
		}
		runOne(ctx, c, p.CRD, o, &item)
		if item.Result != nil && item.Result.Interrupted {
			res.Interrupted = true
		}
		res.Items = append(res.Items, item)
	}
	return res
}

func runOne(ctx context.Context, c *Clients, name string, o AllOptions, item *AllItem) {
	fail := func(err error) {
		item.Outcome, item.Error = OutcomeFailed, err.Error()
		if ctx.Err() != nil {
			item.Outcome = OutcomeInterrupted
		}
	}
	crd, err := c.CRDs.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		fail(fmt.Errorf("getting %s: %w", name, err))
		return
	}
	if err := WaitStorageVersion(ctx, c, crd, 30*time.Second); err != nil {
		fail(err)
		return
	}
	opts := o.Rewrite
	checkpoint := o.Checkpoint
	if checkpoint == nil {
		checkpoint = func(crd string) (string, error) { return DefaultCheckpointPath(c.Server, crd) }
	}
	if opts.Checkpoint, err = checkpoint(name); err != nil {
		fail(err)
		return
	}
	r, err := NewRewriter(c, crd, opts)
	if err != nil {
		fail(err)
		return
	}
	if o.OnRewrite != nil {
		o.OnRewrite(name, r)
	}
	result, err := r.Run(ctx)
	item.Result = result
	if err != nil {
		fail(fmt.Errorf("rewriting the objects of %s: %w", name, err))
		return
	}
	if result.Interrupted {
		item.Outcome, item.Error = OutcomeInterrupted, fmt.Sprintf("interrupted after %d objects; progress saved in %s", result.Total(), result.Checkpoint)
		return
	}
	item.Outcome = OutcomeDone
	if result.Failed > 0 {
		item.Outcome = OutcomeProblems
	}
	if !o.Trim {
		return
	}
	tr, err := Trim(ctx, c, EvidenceOf(result))
	if err != nil {
		fail(err)
		return
	}
	item.Trim = tr
	if !tr.Safe {
		item.Outcome = OutcomeProblems
	}
}

// AllProgress sums the progress of a RunAll: the CRDs finished and the one being rewritten.
// Its Progress method can be called while RunAll runs.
type AllProgress struct {
	mu   sync.Mutex
	done Counts
	cur  *Rewriter
}

// Start is an AllOptions.OnRewrite that follows r (the previous rewriter's counts are kept).
func (a *AllProgress) Start(_ string, r *Rewriter) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.cur != nil {
		a.done.add(a.cur.Progress())
	}
	a.cur = r
}

// Progress is the sum so far.
func (a *AllProgress) Progress() Counts {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := a.done
	if a.cur != nil {
		out.add(a.cur.Progress())
	}
	return out
}
