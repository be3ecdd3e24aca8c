package migrate

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/client-go/dynamic"

	crdinfo "github.com/crdver/kubectl-crdver/crd"
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
	// Failed objects could not be written (see Failures, which lists at most MaxListed).
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
	// Concurrency fixes the number of writes in flight; 0 adapts it to the observed latency
	// and to 429s (see inflightLimit), up to MaxConcurrency.
	Concurrency int
	// MaxConcurrency caps the adaptive limit (default DefaultMaxConcurrency).
	MaxConcurrency int
	// QPS limits the requests per second, reads and writes together; 0 means no limit.
	QPS float64
	// ChunkSize is the page size of the list (default 500).
	ChunkSize int64
	// Checkpoint is the checkpoint file; "" runs without one.
	Checkpoint string
	// MaxAttempts bounds the writes of one object on conflicts and on 429/5xx (default 8).
	MaxAttempts int
	// Detach is for the cluster engine (RewriteCluster): once the StorageVersionMigration is
	// created and recorded in Checkpoint, the run leaves it running in the cluster and stops
	// with a *DetachedError instead of following it; a run that finds it ended goes on.
	Detach bool
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
	ExpiredContinues int64 `json:"expiredContinues"`
	// InFlight says how many writes were in flight (fixed, or adapted to the latency).
	InFlight       InFlight `json:"inFlight"`
	Checkpoint     string   `json:"checkpoint,omitempty"`
	ElapsedSeconds float64  `json:"elapsedSeconds"`
	// ObjectsPerSecond is this run's rate (objects accounted for in this run per second).
	ObjectsPerSecond float64  `json:"objectsPerSecond"`
	Notes            []string `json:"notes,omitempty"`
	// ManagedFieldsMoved counts the managedFields entries of other versions that were moved
	// to the version the objects were written at, within their rewrite (this run).
	ManagedFieldsMoved int64 `json:"managedFieldsMoved"`
	// ManagedFieldsLost counts the objects that lost field managers through their rewrite
	// (this run); ManagedFieldsLosses lists them (at most MaxListed).
	ManagedFieldsLost   int64               `json:"managedFieldsLost"`
	ManagedFieldsLosses []ManagedFieldsLoss `json:"managedFieldsLosses,omitempty"`
}

// ManagedFieldsLoss is an object whose field managers were not all there after its rewrite.
type ManagedFieldsLoss struct {
	Namespace string `json:"namespace,omitempty"`
	Name      string `json:"name"`
	// Managers are the managers (manager/operation[/subresource]) missing afterwards.
	Managers []string `json:"managers"`
}

// MaxListed bounds the objects a rewrite lists by name for a kind of finding (the counts
// are complete).
const MaxListed = 1000

// Rewriter writes every object of a CRD back unchanged so that the API server stores it at the
// current storage version. Its parts: a lister (one goroutine, paged, following expired
// continue tokens), Concurrency workers (one write per object, retried), and the watermark
// that saves the checkpoint as pages complete in order.
type Rewriter struct {
	c    *Clients
	crd  *apiextensionsv1.CustomResourceDefinition
	opts RewriteOptions
	res  dynamic.NamespaceableResourceInterface
	// version is the version objects are read and written at (the storage version when
	// served): managedFields entries of other versions are moved to it.
	version string
	lim     *rate.Limiter
	gate    *inflightLimit

	// live counters (this run plus what the checkpoint brought), read by Progress.
	rewritten, current, deleted, failed atomic.Int64
	base                                Counts
	expired                             atomic.Int64
	mfMoved, mfLost                     atomic.Int64
	mfMu                                sync.Mutex
	mfLosses                            []ManagedFieldsLoss

	// the checkpoint is read once (Resuming and Run share it).
	resumeOnce sync.Once
	resumeCP   *Checkpoint
	resumeNote string
	resumeErr  error
}

// NewRewriter prepares a rewrite of crd's objects. crd must be fresh from the cluster: its
// storage version, UID and generation are recorded in the checkpoint and guard the trim.
func NewRewriter(c *Clients, crd *apiextensionsv1.CustomResourceDefinition, opts RewriteOptions) (*Rewriter, error) {
	if opts.ChunkSize <= 0 {
		opts.ChunkSize = 500
	}
	if opts.MaxAttempts <= 0 {
		opts.MaxAttempts = 8
	}
	read, err := crdinfo.AccessVersion(crd)
	if err != nil {
		return nil, err
	}
	if crdinfo.StorageVersion(crd) == "" {
		return nil, fmt.Errorf("%s: no version is marked storage: true", crd.Name)
	}
	lim := rate.NewLimiter(rate.Inf, 1)
	if opts.QPS > 0 {
		burst := opts.Concurrency
		if burst < 1 {
			burst = 16
		}
		lim = rate.NewLimiter(rate.Limit(opts.QPS), burst)
	}
	gate := newFixedLimit(opts.Concurrency)
	if opts.Concurrency <= 0 {
		gate = newAdaptiveLimit(adaptiveStart, opts.MaxConcurrency)
	}
	if c.throttled != nil {
		base := c.throttled.Load()
		gate.seen429 = func() int64 { return c.throttled.Load() - base }
	}
	return &Rewriter{c: c, crd: crd, opts: opts, res: c.Dynamic.Resource(crdinfo.GVR(crd, read)), version: read, lim: lim, gate: gate}, nil
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
// but cannot be used, why). The file is read once: Run uses the same answer.
func (r *Rewriter) Resuming() (*Checkpoint, string, error) {
	r.resumeOnce.Do(func() { r.resumeCP, r.resumeNote, r.resumeErr = r.readCheckpoint() })
	return r.resumeCP, r.resumeNote, r.resumeErr
}

// clusterID is the cluster's identity (Clients.ClusterID), read at most once per run and
// bounded in time: the checkpoint is read before the run's context is at hand.
func (r *Rewriter) clusterID() string {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return r.c.ClusterID(ctx)
}

func (r *Rewriter) readCheckpoint() (*Checkpoint, string, error) {
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
	if ok, why := cp.matches(r.c.Server, r.crd.Name, string(r.crd.UID), crdinfo.StorageVersion(r.crd), r.crd.Generation); !ok {
		return nil, fmt.Sprintf("checkpoint %s cannot be used (%s): starting from the beginning", r.opts.Checkpoint, why), nil
	}
	if ok, why := SameCluster(cp.Cluster, r.clusterID()); !ok {
		return nil, fmt.Sprintf("checkpoint %s cannot be used (%s): starting from the beginning", r.opts.Checkpoint, why), nil
	}
	return cp, "", nil
}

// Run lists every object (paged) and writes each back, with the in-flight writes bounded (fixed or adaptive). When ctx is
// cancelled it stops listing, lets the writes in flight finish, saves the checkpoint and
// returns a Result with Interrupted set. Errors that stop the whole run (the list fails for a
// reason other than an expired continue token or a transient error, the checkpoint cannot be
// written: *CheckpointError) are returned.
func (r *Rewriter) Run(ctx context.Context) (*Result, error) {
	start := time.Now()
	res := &Result{CRD: r.crd.Name, StorageVersion: crdinfo.StorageVersion(r.crd), UID: string(r.crd.UID), Generation: r.crd.Generation, Checkpoint: r.opts.Checkpoint}
	cp, err := r.startCheckpoint(res)
	if err != nil {
		return nil, err
	}
	wm := &watermark{cp: cp, path: r.opts.Checkpoint}

	// A page of buffer: the next page is listed while this one is written.
	work := make(chan item, r.opts.ChunkSize)
	listCtx, stopList := context.WithCancel(ctx)
	defer stopList()
	l := &lister{r: r, wm: wm, work: work}
	go l.run(listCtx, cp.Pages, cp.Continue)

	var wg sync.WaitGroup
	for w := 0; w < r.gate.workers(); w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r.worker(listCtx, work, wm)
		}()
	}
	wg.Wait()
	stopList()
	// Drain what the lister may still hold so its goroutine ends (it closes work when done).
	for range work {
	}

	wm.report(res)
	res.ExpiredContinues = r.expired.Load()
	res.ManagedFieldsMoved, res.ManagedFieldsLost = r.mfMoved.Load(), r.mfLost.Load()
	r.mfMu.Lock()
	res.ManagedFieldsLosses = r.mfLosses
	r.mfMu.Unlock()
	res.InFlight = r.gate.snapshot()
	elapsed := time.Since(start)
	res.ElapsedSeconds = elapsed.Seconds()
	if s := elapsed.Seconds(); s > 0 {
		res.ObjectsPerSecond = float64(res.Counts.Total()-r.base.Total()) / s
	}
	if l.err != nil {
		return res, l.err
	}
	if ctx.Err() != nil && !res.Complete {
		res.Interrupted = true
		wm.saveOnInterrupt()
	}
	if wm.saveErr != nil {
		return res, wm.saveErr
	}
	return res, nil
}

// startCheckpoint is the checkpoint the run starts from: the one Resuming found, or a new one,
// saved before any write so that a checkpoint that cannot be written stops the run first. The
// live counters start from its counts.
func (r *Rewriter) startCheckpoint(res *Result) (*Checkpoint, error) {
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
			Server: r.c.Server, Cluster: r.clusterID(), CRD: r.crd.Name, UID: string(r.crd.UID), StorageVersion: res.StorageVersion,
			Generation: r.crd.Generation, State: StateRunning, StartedAt: time.Now().UTC(),
		}
		if r.opts.Checkpoint != "" {
			cp.UpdatedAt = time.Now().UTC()
			if err := cp.Save(r.opts.Checkpoint); err != nil {
				return nil, err
			}
		}
	}
	r.base = cp.Counts
	r.rewritten.Store(cp.Counts.Rewritten)
	r.current.Store(cp.Counts.Current)
	r.deleted.Store(cp.Counts.Deleted)
	r.failed.Store(cp.Counts.Failed)
	return cp, nil
}
