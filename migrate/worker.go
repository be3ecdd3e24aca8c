package migrate

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"

	crdinfo "github.com/crdver/kubectl-crdver/crd"
	"github.com/crdver/kubectl-crdver/internal/pager"
	"github.com/crdver/kubectl-crdver/ownership"
)

// lister lists the pages of a rewrite, one after the other, registers each with the
// watermark and hands its objects to the workers. It closes work when it stops; err is the
// error that stopped it (nil when it ran out of pages or was cancelled).
type lister struct {
	r    *Rewriter
	wm   *watermark
	work chan<- item
	err  error
}

// run lists from the continue token cont; pages is the number of pages already done (both
// from the checkpoint). Transient errors are retried and expired continue tokens followed by
// the pager (package pager); what stops it is in l.err.
func (l *lister) run(ctx context.Context, pages int64, cont string) {
	defer close(l.work)
	if pages > 0 && cont == "" {
		return // nothing left
	}
	pg := pager.Dynamic(l.r.res, pager.Options{Limit: l.r.opts.ChunkSize, Continue: cont, Wait: l.r.lim.Wait, MaxAttempts: l.r.opts.MaxAttempts})
	defer func() { l.r.expired.Add(pg.Expired()) }()
	for idx := pages; ; idx++ {
		list, err := pg.Next(ctx)
		if errors.Is(err, io.EOF) {
			return
		}
		if err != nil {
			if ctx.Err() == nil {
				l.err = fmt.Errorf("listing %s: %w", l.r.crd.Name, err)
			}
			return
		}
		p := &page{index: idx, next: pg.Continue()}
		if k := len(list.Items); k > 0 {
			p.last = ObjectKey(list.Items[k-1].GetNamespace(), list.Items[k-1].GetName())
		}
		p.remaining.Store(int64(len(list.Items)))
		l.wm.add(p)
		for i := range list.Items {
			select {
			case l.work <- item{obj: &list.Items[i], page: p}:
			case <-ctx.Done():
				return
			}
		}
	}
}

// worker writes back the objects it is handed until work is closed or ctx is cancelled, and
// counts each outcome in its page and in the live counters.
func (r *Rewriter) worker(ctx context.Context, work <-chan item, wm *watermark) {
	for {
		select {
		case <-ctx.Done():
			return
		case it, ok := <-work:
			if !ok {
				return
			}
			if ctx.Err() != nil {
				return // interrupted: leave the rest of the page to the resumed run
			}
			outcome, reason, ok := r.migrateOne(ctx, it.obj)
			if !ok {
				continue // interrupted during a back-off: the page stays unfinished
			}
			r.record(it, outcome, reason)
			wm.finishItem(it.page)
		}
	}
}

// record counts one object's outcome in its page and in the live counters.
func (r *Rewriter) record(it item, o outcome, reason string) {
	p := it.page
	p.mu.Lock()
	defer p.mu.Unlock()
	switch o {
	case outcomeRewritten:
		p.counts.Rewritten++
		r.rewritten.Add(1)
	case outcomeCurrent:
		p.counts.Current++
		r.current.Add(1)
	case outcomeDeleted:
		p.counts.Deleted++
		r.deleted.Add(1)
	case outcomeFailed:
		p.counts.Failed++
		r.failed.Add(1)
		if len(p.failures) < MaxListed {
			p.failures = append(p.failures, Failure{Namespace: it.obj.GetNamespace(), Name: it.obj.GetName(), Reason: reason})
		}
	}
}

type outcome int

const (
	outcomeRewritten outcome = iota
	outcomeCurrent
	outcomeDeleted
	outcomeFailed
)

// migrateOne writes obj back unchanged. ok is false only when ctx was cancelled during a
// back-off (the object is then left for the resumed run). The write in flight is never cut
// short by ctx: it runs to its end (at most a minute).
func (r *Rewriter) migrateOne(ctx context.Context, obj *unstructured.Unstructured) (outcome, string, bool) {
	ri := dynamic.ResourceInterface(r.res)
	if ns := obj.GetNamespace(); ns != "" {
		ri = r.res.Namespace(ns)
	}
	for attempt := 1; ; attempt++ {
		if err := r.lim.Wait(ctx); err != nil {
			return 0, "", false
		}
		if err := r.gate.acquire(ctx); err != nil {
			return 0, "", false
		}
		wctx, cancel := WriteContext(ctx)
		send, moved := r.moveEntries(wctx, obj)
		sent := time.Now()
		updated, err := ri.Update(wctx, send, metav1.UpdateOptions{})
		r.gate.release(time.Since(sent), apierrors.IsTooManyRequests(err))
		cancel()
		switch {
		case err == nil:
			r.mfMoved.Add(int64(moved))
			r.checkManagers(obj, updated)
			if updated.GetResourceVersion() != obj.GetResourceVersion() {
				return outcomeRewritten, "", true
			}
			return outcomeCurrent, "", true
		case apierrors.IsNotFound(err):
			return outcomeDeleted, "", true
		case apierrors.IsConflict(err):
			// Changed since it was listed: re-read it and write that back. (A write by someone
			// else after the storage switch already stored it at the storage version; the
			// no-op write then shows it as current.)
			if attempt >= r.opts.MaxAttempts {
				return outcomeFailed, fmt.Sprintf("still conflicting after %d attempts: the object keeps changing", attempt), true
			}
			fresh, gerr := r.getFresh(ctx, ri, obj.GetName())
			switch {
			case gerr == nil:
				obj = fresh
			case apierrors.IsNotFound(gerr):
				return outcomeDeleted, "", true
			case ctx.Err() != nil:
				return 0, "", false
			default:
				return outcomeFailed, "re-reading after a conflict: " + reasonOf(gerr), true
			}
		case pager.Retryable(err) && attempt < r.opts.MaxAttempts:
			if serr := pager.Sleep(ctx, pager.Backoff(err, attempt)); serr != nil {
				return 0, "", false
			}
		default:
			return outcomeFailed, reasonOf(err), true
		}
	}
}

func (r *Rewriter) getFresh(ctx context.Context, ri dynamic.ResourceInterface, name string) (*unstructured.Unstructured, error) {
	for attempt := 1; ; attempt++ {
		if err := r.lim.Wait(ctx); err != nil {
			return nil, err
		}
		obj, err := ri.Get(ctx, name, metav1.GetOptions{})
		if err == nil || !pager.Retryable(err) || attempt >= r.opts.MaxAttempts {
			return obj, err
		}
		if err := pager.Sleep(ctx, pager.Backoff(err, attempt)); err != nil {
			return nil, err
		}
	}
}

// Sleep waits d, or until ctx is done (then its error): the back-off of the rewrite and of
// the preflight's dry runs, so that Ctrl-C is never held up by a wait (pager.Sleep).
func Sleep(ctx context.Context, d time.Duration) error { return pager.Sleep(ctx, d) }

// reasonOf is the API server's message for err (e.g. what an admission webhook said).
func reasonOf(err error) string {
	var st apierrors.APIStatus
	if errors.As(err, &st) && st.Status().Message != "" {
		return st.Status().Message
	}
	return err.Error()
}

// moveEntries returns obj to send, with every managedFields entry that names another version
// of the CRD's group moved to the version obj is written at (ownership.Move, as retire does),
// and the number of entries moved. Without it, a rewrite that changes the object (a default
// that appears on read) makes the API server's field manager convert the object to each
// entry's version; when that fails (a field that version's schema lacks, a version gone from
// spec.versions) it drops every entry. Entries whose ownership cannot be worked out are left
// as they are (checkManagers reports a loss if the API server drops them). obj is not modified.
func (r *Rewriter) moveEntries(ctx context.Context, obj *unstructured.Unstructured) (*unstructured.Unstructured, int) {
	entries, total := ownership.ToVersion(obj.GetManagedFields(), r.crd.Spec.Group, r.version, obj.Object, readerAt(ctx, r.c, r.crd, obj))
	if total == 0 {
		return obj, 0
	}
	out := obj.DeepCopy()
	out.SetManagedFields(entries)
	return out, total
}

// readerAt reads obj at another version of crd, through the CRD's own conversion, for
// ownership.ToVersion: false when the version is not served or the object read is not the same
// (another resourceVersion: it changed since obj was read).
func readerAt(ctx context.Context, c *Clients, crd *apiextensionsv1.CustomResourceDefinition, obj *unstructured.Unstructured) func(version string) (map[string]any, bool) {
	return func(v string) (map[string]any, bool) {
		if !crdinfo.IsServed(crd, v) {
			return nil, false
		}
		ri := dynamic.ResourceInterface(c.Dynamic.Resource(crdinfo.GVR(crd, v)))
		if ns := obj.GetNamespace(); ns != "" {
			ri = c.Dynamic.Resource(crdinfo.GVR(crd, v)).Namespace(ns)
		}
		s, err := ri.Get(ctx, obj.GetName(), metav1.GetOptions{})
		if err != nil || s.GetResourceVersion() != obj.GetResourceVersion() {
			return nil, false
		}
		return s.Object, true
	}
}

// managerID names a field manager the way the API server keys it, without the apiVersion
// (which a move changes).
func managerID(e metav1.ManagedFieldsEntry) string {
	id := e.Manager + "/" + string(e.Operation)
	if e.Subresource != "" {
		id += "/" + e.Subresource
	}
	return id
}

// checkManagers compares the field managers of before (as listed or re-read) and after (as
// the update returned it) and records any that are gone.
func (r *Rewriter) checkManagers(before, after *unstructured.Unstructured) {
	have := map[string]bool{}
	for _, e := range after.GetManagedFields() {
		have[managerID(e)] = true
	}
	var lost []string
	for _, e := range before.GetManagedFields() {
		if ownership.Vanished(e, after.Object) {
			continue // it owned only fields the object no longer holds (a consented loss)
		}
		if id := managerID(e); !have[id] && !slices.Contains(lost, id) {
			lost = append(lost, id)
		}
	}
	if len(lost) == 0 {
		return
	}
	r.mfLost.Add(1)
	r.mfMu.Lock()
	defer r.mfMu.Unlock()
	if len(r.mfLosses) < MaxListed {
		r.mfLosses = append(r.mfLosses, ManagedFieldsLoss{Namespace: before.GetNamespace(), Name: before.GetName(), Managers: lost})
	}
}

// Reason is the API server's message for err (e.g. what an admission webhook said), else err's.
func Reason(err error) string { return reasonOf(err) }

// Retryable reports whether err is worth retrying after a back-off (pager.Retryable: the rule
// every request of a run shares).
func Retryable(err error) bool { return pager.Retryable(err) }

// Backoff is how long to wait before attempt+1 after err (pager.Backoff).
func Backoff(err error, attempt int) time.Duration { return pager.Backoff(err, attempt) }
