package migrate

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
)

// Counts are the outcomes of a rewrite, one per object.
type Counts struct {
	// Rewritten objects were written back and their resourceVersion changed: they were stored
	// at another version (or encoding) and are now stored at the storage version.
	Rewritten int64 `json:"rewritten"`
	// Current objects were written back unchanged: the API server found the stored bytes
	// identical and skipped the write (resourceVersion unchanged).
	Current int64 `json:"alreadyCurrent"`
	// Deleted objects were gone by the time they were written.
	Deleted int64 `json:"deleted"`
	// Failed objects could not be written (see Failures).
	Failed int64 `json:"failed"`
}

// Total is the number of objects accounted for.
func (c Counts) Total() int64 { return c.Rewritten + c.Current + c.Deleted + c.Failed }

func (c *Counts) add(o Counts) {
	c.Rewritten += o.Rewritten
	c.Current += o.Current
	c.Deleted += o.Deleted
	c.Failed += o.Failed
}

// Failure is an object that could not be rewritten, and why.
type Failure struct {
	Namespace string `json:"namespace,omitempty"`
	Name      string `json:"name"`
	Reason    string `json:"reason"`
}

// RewriteOptions tune a rewrite.
type RewriteOptions struct {
	// Concurrency is the number of concurrent writers (default 16).
	Concurrency int
	// QPS limits the requests per second, reads and writes together; 0 means no limit.
	QPS float64
	// ChunkSize is the page size of the list (default 500).
	ChunkSize int64
	// Checkpoint is the checkpoint file; "" runs without one.
	Checkpoint string
	// MaxAttempts bounds the writes of one object on conflicts and on 429/5xx (default 8).
	MaxAttempts int
	// Adaptive adapts the number of writes in flight to the observed latency and to 429/5xx,
	// from a few up to MaxConcurrency (default 256), instead of Concurrency; see window.
	Adaptive       bool
	MaxConcurrency int
}

// Result is what a rewrite did.
type Result struct {
	CRD            string `json:"crd"`
	StorageVersion string `json:"storageVersion"`
	// UID and Generation identify the CRD the run started with (they guard the trim).
	UID        string `json:"-"`
	Generation int64  `json:"-"`
	Counts
	Failures []Failure `json:"failures"`
	// Complete: every page was listed and every object accounted for.
	Complete bool `json:"complete"`
	// Interrupted: the context was cancelled; progress is in the checkpoint.
	Interrupted bool `json:"interrupted"`
	// Resumed: the run continued from a checkpoint (Counts include the earlier run's).
	Resumed bool `json:"resumed"`
	// ExpiredContinues counts list continue tokens that had expired (410 Gone) and were
	// replaced by the inconsistent continue token the API server returned with the error.
	ExpiredContinues int64   `json:"expiredContinues"`
	Checkpoint       string  `json:"checkpoint,omitempty"`
	ElapsedSeconds   float64 `json:"elapsedSeconds"`
	// ObjectsPerSecond is this run's rate (objects accounted for in this run per second).
	ObjectsPerSecond float64 `json:"objectsPerSecond"`
	// PeakInFlight is the highest adaptive limit of writes in flight (Adaptive only).
	PeakInFlight int      `json:"peakInFlight,omitempty"`
	Notes        []string `json:"notes,omitempty"`
}

// Rewriter writes every object of a CRD back unchanged so that the API server stores it at the
// current storage version.
type Rewriter struct {
	c    *Clients
	crd  *apiextensionsv1.CustomResourceDefinition
	opts RewriteOptions
	res  dynamic.NamespaceableResourceInterface
	lim  *rate.Limiter
	win  *window // nil unless opts.Adaptive

	// live counters (this run plus what the checkpoint brought), read by Progress.
	rewritten, current, deleted, failed atomic.Int64
	base                                Counts
	expired                             atomic.Int64
}

// NewRewriter prepares a rewrite of crd's objects. crd must be fresh from the cluster: its
// storage version, UID and generation are recorded in the checkpoint and guard the trim.
func NewRewriter(c *Clients, crd *apiextensionsv1.CustomResourceDefinition, opts RewriteOptions) (*Rewriter, error) {
	if opts.Concurrency <= 0 {
		opts.Concurrency = 16
	}
	if opts.ChunkSize <= 0 {
		opts.ChunkSize = 500
	}
	if opts.MaxAttempts <= 0 {
		opts.MaxAttempts = 8
	}
	read, err := servedVersion(crd)
	if err != nil {
		return nil, err
	}
	if StorageVersion(crd) == "" {
		return nil, fmt.Errorf("%s: no version is marked storage: true", crd.Name)
	}
	lim := rate.NewLimiter(rate.Inf, 1)
	if opts.QPS > 0 {
		burst := opts.Concurrency
		if burst < 1 {
			burst = 1
		}
		lim = rate.NewLimiter(rate.Limit(opts.QPS), burst)
	}
	r := &Rewriter{c: c, crd: crd, opts: opts, res: c.Dynamic.Resource(GVR(crd, read)), lim: lim}
	if opts.Adaptive {
		if opts.MaxConcurrency <= 0 {
			opts.MaxConcurrency = 256
		}
		r.win = newWindow(startWindow(opts.Concurrency), opts.MaxConcurrency)
	}
	return r, nil
}

// Progress is a snapshot of the counts so far (safe to call while Run runs).
func (r *Rewriter) Progress() Counts {
	return Counts{
		Rewritten: r.rewritten.Load(),
		Current:   r.current.Load(),
		Deleted:   r.deleted.Load(),
		Failed:    r.failed.Load(),
	}
}

// Resuming reports the checkpoint Run will resume from, or nil (and, when a checkpoint exists
// but cannot be used, why).
func (r *Rewriter) Resuming() (*Checkpoint, string, error) {
	if r.opts.Checkpoint == "" {
		return nil, "", nil
	}
	cp, err := LoadCheckpoint(r.opts.Checkpoint)
	if err != nil || cp == nil {
		return nil, "", err
	}
	if cp.State != StateRunning {
		return nil, fmt.Sprintf("checkpoint %s records a completed run (%s): starting a new one", r.opts.Checkpoint, cp.UpdatedAt.Format(time.RFC3339)), nil
	}
	if ok, why := cp.matches(r.c.Server, r.crd.Name, string(r.crd.UID), StorageVersion(r.crd), r.crd.Generation); !ok {
		return nil, fmt.Sprintf("checkpoint %s cannot be used (%s): starting from the beginning", r.opts.Checkpoint, why), nil
	}
	return cp, "", nil
}

// page is one list page in flight.
type page struct {
	index     int64
	next      string // the continue token after this page ("" = last page)
	remaining atomic.Int64
	mu        sync.Mutex
	counts    Counts
	failures  []Failure
	done      bool
}

type item struct {
	obj  *unstructured.Unstructured
	page *page
}

// Run lists every object (paged) and writes each back, with Concurrency workers. When ctx is
// cancelled it stops listing, lets the writes in flight finish, saves the checkpoint and
// returns a Result with Interrupted set. Errors that stop the whole run (the list fails for a
// reason other than an expired continue token or a transient error) are returned.
func (r *Rewriter) Run(ctx context.Context) (*Result, error) {
	start := time.Now()
	res := &Result{CRD: r.crd.Name, StorageVersion: StorageVersion(r.crd), UID: string(r.crd.UID), Generation: r.crd.Generation, Checkpoint: r.opts.Checkpoint}

	cp, note, err := r.Resuming()
	if err != nil {
		return nil, err
	}
	if note != "" {
		res.Notes = append(res.Notes, note)
	}
	if cp != nil {
		res.Resumed = true
		res.Notes = append(res.Notes, fmt.Sprintf("resumed from checkpoint %s (%d objects already accounted for, saved %s)", r.opts.Checkpoint, cp.Counts.Total(), cp.UpdatedAt.Format(time.RFC3339)))
	} else {
		cp = &Checkpoint{
			Server: r.c.Server, CRD: r.crd.Name, UID: string(r.crd.UID), StorageVersion: res.StorageVersion,
			Generation: r.crd.Generation, State: StateRunning, StartedAt: time.Now().UTC(),
		}
	}
	if !res.Resumed && r.opts.Checkpoint != "" {
		// Fail now, before any write, if the checkpoint cannot be written.
		cp.UpdatedAt = time.Now().UTC()
		if err := cp.Save(r.opts.Checkpoint); err != nil {
			return nil, fmt.Errorf("%w (give a writable file with --checkpoint)", err)
		}
	}
	r.base = cp.Counts
	r.rewritten.Store(cp.Counts.Rewritten)
	r.current.Store(cp.Counts.Current)
	r.deleted.Store(cp.Counts.Deleted)
	r.failed.Store(cp.Counts.Failed)

	// The watermark: pages complete out of order; the checkpoint advances over those done in order.
	var (
		mu       sync.Mutex
		pending  []*page // listed pages not yet folded into cp, in order
		saveErr  error
		complete bool
	)
	advance := func() {
		mu.Lock()
		defer mu.Unlock()
		moved := false
		for len(pending) > 0 && pending[0].done {
			p := pending[0]
			pending = pending[1:]
			p.mu.Lock()
			cp.Counts.add(p.counts)
			cp.Failures = append(cp.Failures, p.failures...)
			p.mu.Unlock()
			cp.Continue = p.next
			cp.Pages++
			moved = true
			if p.next == "" {
				complete = true
			}
		}
		if moved && r.opts.Checkpoint != "" {
			cp.UpdatedAt = time.Now().UTC()
			if complete {
				cp.State = StateComplete
				cp.Continue = ""
			}
			if err := cp.Save(r.opts.Checkpoint); err != nil && saveErr == nil {
				saveErr = err
			}
		}
	}
	finishItem := func(p *page) {
		if p.remaining.Add(-1) == 0 {
			mu.Lock()
			p.done = true
			mu.Unlock()
			advance()
		}
	}

	work := make(chan item, r.opts.Concurrency)
	listCtx, stopList := context.WithCancel(ctx)
	defer stopList()
	var listErr error
	go func() {
		defer close(work)
		cont := cp.Continue
		if cp.Pages > 0 && cont == "" {
			return // nothing left
		}
		for idx := cp.Pages; ; idx++ {
			list, err := r.listPage(listCtx, cont)
			if err != nil {
				if listCtx.Err() == nil {
					listErr = err
				}
				return
			}
			p := &page{index: idx, next: list.GetContinue()}
			p.remaining.Store(int64(len(list.Items)))
			mu.Lock()
			pending = append(pending, p)
			mu.Unlock()
			if len(list.Items) == 0 {
				mu.Lock()
				p.done = true
				mu.Unlock()
				advance()
			}
			for i := range list.Items {
				select {
				case work <- item{obj: &list.Items[i], page: p}:
				case <-listCtx.Done():
					return
				}
			}
			if cont = p.next; cont == "" {
				return
			}
		}
	}()

	var wg sync.WaitGroup
	workers := r.opts.Concurrency
	if r.win != nil {
		workers = int(r.win.max) // the window decides how many write at once
	}
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-listCtx.Done():
					return
				case it, ok := <-work:
					if !ok {
						return
					}
					if listCtx.Err() != nil {
						return // interrupted: leave the rest of the page to the resumed run
					}
					outcome, reason, ok := r.migrateOne(listCtx, it.obj)
					if !ok {
						continue // interrupted during a back-off: the page stays unfinished
					}
					p := it.page
					p.mu.Lock()
					switch outcome {
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
						p.failures = append(p.failures, Failure{Namespace: it.obj.GetNamespace(), Name: it.obj.GetName(), Reason: reason})
					}
					p.mu.Unlock()
					finishItem(p)
				}
			}
		}()
	}
	wg.Wait()
	stopList()
	// Drain what the lister may still hold so its goroutine ends.
	for range work {
	}

	mu.Lock()
	res.Counts = cp.Counts
	res.Failures = append([]Failure{}, cp.Failures...)
	res.Complete = complete
	// Pages finished out of order after the watermark still count for this run's report.
	for _, p := range pending {
		p.mu.Lock()
		res.Counts.add(p.counts)
		res.Failures = append(res.Failures, p.failures...)
		p.mu.Unlock()
	}
	mu.Unlock()
	if res.Failures == nil {
		res.Failures = []Failure{}
	}
	res.ExpiredContinues = r.expired.Load()
	if r.win != nil {
		_, res.PeakInFlight = r.win.stats()
	}
	elapsed := time.Since(start)
	res.ElapsedSeconds = elapsed.Seconds()
	if s := elapsed.Seconds(); s > 0 {
		res.ObjectsPerSecond = float64(res.Counts.Total()-r.base.Total()) / s
	}
	if listErr != nil {
		return res, listErr
	}
	if ctx.Err() != nil && !complete {
		res.Interrupted = true
		if r.opts.Checkpoint != "" && saveErr == nil {
			cp.UpdatedAt = time.Now().UTC()
			saveErr = cp.Save(r.opts.Checkpoint)
		}
	}
	if saveErr != nil {
		return res, saveErr
	}
	return res, nil
}

// listPage lists one page, retrying transient errors with back-off and following the
// inconsistent continue token a 410 Gone carries.
func (r *Rewriter) listPage(ctx context.Context, cont string) (*unstructured.UnstructuredList, error) {
	for attempt := 1; ; attempt++ {
		if err := r.lim.Wait(ctx); err != nil {
			return nil, err
		}
		list, err := r.res.List(ctx, metav1.ListOptions{Limit: r.opts.ChunkSize, Continue: cont})
		if err == nil {
			return list, nil
		}
		switch {
		case apierrors.IsResourceExpired(err) || apierrors.IsGone(err):
			next := continueFromExpired(err)
			if cont == "" || next == "" || next == cont {
				return nil, fmt.Errorf("listing %s: %w", r.crd.Name, err)
			}
			cont = next // objects changed since are already stored at the storage version
			r.expired.Add(1)
		case retryable(err) && attempt < r.opts.MaxAttempts:
			if err := sleep(ctx, backoff(err, attempt)); err != nil {
				return nil, err
			}
		default:
			return nil, fmt.Errorf("listing %s: %w", r.crd.Name, err)
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
		if r.win != nil && r.win.acquire(ctx) != nil {
			return 0, "", false
		}
		wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		sent := time.Now()
		updated, err := ri.Update(wctx, obj, metav1.UpdateOptions{})
		cancel()
		if r.win != nil {
			r.win.release(time.Since(sent), err != nil && retryable(err))
		}
		switch {
		case err == nil:
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
		case retryable(err) && attempt < r.opts.MaxAttempts:
			if serr := sleep(ctx, backoff(err, attempt)); serr != nil {
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
		if err == nil || !retryable(err) || attempt >= r.opts.MaxAttempts {
			return obj, err
		}
		if err := sleep(ctx, backoff(err, attempt)); err != nil {
			return nil, err
		}
	}
}

// retryable: throttled (429), server errors (5xx), timeouts, and transport errors.
func retryable(err error) bool {
	var st apierrors.APIStatus
	if errors.As(err, &st) {
		code := st.Status().Code
		return code == 429 || code >= 500 || apierrors.IsServerTimeout(err) || apierrors.IsTimeout(err) || apierrors.IsTooManyRequests(err)
	}
	return !errors.Is(err, context.Canceled)
}

// backoff honours the server's Retry-After, else doubles from 100 ms up to 5 s.
func backoff(err error, attempt int) time.Duration {
	if s, ok := apierrors.SuggestsClientDelay(err); ok && s > 0 {
		return time.Duration(s) * time.Second
	}
	d := 100 * time.Millisecond << (attempt - 1)
	if d > 5*time.Second || d <= 0 {
		d = 5 * time.Second
	}
	return d
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// reasonOf is the API server's message for err (e.g. what an admission webhook said).
func reasonOf(err error) string {
	var st apierrors.APIStatus
	if errors.As(err, &st) && st.Status().Message != "" {
		return st.Status().Message
	}
	return err.Error()
}
