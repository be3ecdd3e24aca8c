package migrate

import (
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// page is one list page in flight.
type page struct {
	index     int64
	next      string // the continue token after this page ("" = last page)
	last      string // the key (namespace/name) of its last object ("" for an empty page)
	remaining atomic.Int64
	mu        sync.Mutex
	counts    Counts
	failures  []Failure
	done      bool // guarded by the watermark's mu
}

type item struct {
	obj  *unstructured.Unstructured
	page *page
}

// watermark folds pages into the checkpoint in list order. Pages complete out of order (their
// objects are written concurrently); the checkpoint only advances over a prefix of done pages,
// so that a resumed run starts after the last page whose every object is done. It saves the
// checkpoint (when path is set) each time it advances.
type watermark struct {
	mu       sync.Mutex
	cp       *Checkpoint
	path     string
	pending  []*page // listed pages not yet folded into cp, in order
	saveErr  error
	complete bool
}

// add registers a listed page; an empty page is done at once.
func (w *watermark) add(p *page) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.pending = append(w.pending, p)
	if p.remaining.Load() == 0 {
		p.done = true
		w.advanceLocked()
	}
}

// finishItem marks one object of p done; the last one makes the page done.
func (w *watermark) finishItem(p *page) {
	if p.remaining.Add(-1) != 0 {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	p.done = true
	w.advanceLocked()
}

func (w *watermark) advanceLocked() {
	moved := false
	for len(w.pending) > 0 && w.pending[0].done {
		p := w.pending[0]
		w.pending = w.pending[1:]
		p.mu.Lock()
		w.cp.Counts.add(p.counts)
		w.cp.Failures = appendListed(w.cp.Failures, p.failures)
		p.mu.Unlock()
		w.cp.Continue = p.next
		if p.last != "" {
			w.cp.Through = p.last
		}
		w.cp.Pages++
		moved = true
		if p.next == "" {
			w.complete = true
		}
	}
	if moved && w.path != "" {
		w.cp.UpdatedAt = time.Now().UTC()
		if w.complete {
			w.cp.State = StateComplete
			w.cp.Continue = ""
		}
		if err := w.cp.Save(w.path); err != nil && w.saveErr == nil {
			w.saveErr = err
		}
	}
}

// report fills res with what the run accounted for: the checkpoint's counts plus the pages
// finished out of order after the watermark (they count for this run's report, and a resumed
// run redoes them).
func (w *watermark) report(res *Result) {
	w.mu.Lock()
	defer w.mu.Unlock()
	res.Counts = w.cp.Counts
	res.Failures = append([]Failure{}, w.cp.Failures...)
	res.Complete = w.complete
	for _, p := range w.pending {
		p.mu.Lock()
		res.Counts.add(p.counts)
		res.Failures = appendListed(res.Failures, p.failures)
		p.mu.Unlock()
	}
}

// appendListed appends to a list of failures at most MaxListed in all (Counts.Failed counts
// every one): a checkpoint saved after every page stays small when every object fails.
func appendListed(list, more []Failure) []Failure {
	if n := MaxListed - len(list); n < len(more) {
		more = more[:max(n, 0)]
	}
	return append(list, more...)
}

// saveOnInterrupt saves the checkpoint once more after an interruption (unless a save already
// failed).
func (w *watermark) saveOnInterrupt() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.path != "" && w.saveErr == nil {
		w.cp.UpdatedAt = time.Now().UTC()
		w.saveErr = w.cp.Save(w.path)
	}
}
