package migrate

import (
	"context"
	"math"
	"sync"
	"time"
)

// window limits the writes in flight and adapts the limit to what the API server and the
// network allow, the way TCP's congestion control adapts its window (RewriteOptions.Adaptive):
//
//   - The floor is the lowest write latency seen recently: the round trip with no queue at
//     the server. While latencies stay within 1.5× the floor, the server is not queueing and
//     the limit grows (by √limit per write, smoothed), so more round trips overlap: over a
//     slow network, many writes must be in flight to keep the server busy.
//   - When latencies rise above that, writes queue at the server: the limit shrinks in
//     proportion (floor×1.5 / latency), down to where the queue stays short.
//   - A 429 or 5xx halves the limit, at most once per round trip (the server asked us to
//     slow down).
//
// The floor is the lowest latency of the whole run: a floor re-measured while writes queue
// would creep up with the queue and let the limit grow without end. A run lasts minutes, over
// which the network's round trip does not change much; a run over a network that became much
// slower settles at a small limit (the safe side) and the next run measures again.
type window struct {
	mu       sync.Mutex
	limit    float64
	min, max float64
	inflight int
	wake     chan struct{} // closed and replaced when a slot may have become free

	floor   time.Duration
	lastCut time.Time
	peak    float64
}

const (
	tolerance = 1.5
	smoothing = 0.1
)

// startWindow is where an adaptive run starts: small, so that the first latencies show the
// floor rather than a queue the window itself made; it grows within a few dozen writes.
func startWindow(concurrency int) int {
	return min(concurrency, 4)
}

func newWindow(start, maxLimit int) *window {
	if start < 1 {
		start = 1
	}
	if maxLimit < start {
		maxLimit = start
	}
	return &window{limit: float64(start), min: 1, max: float64(maxLimit), wake: make(chan struct{}), peak: float64(start)}
}

// acquire waits for a free slot (or ctx).
func (w *window) acquire(ctx context.Context) error {
	for {
		w.mu.Lock()
		if w.inflight < int(w.limit) {
			w.inflight++
			w.mu.Unlock()
			return nil
		}
		wake := w.wake
		w.mu.Unlock()
		select {
		case <-wake:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// release frees a slot and feeds the write's latency (and whether the server pushed back) to
// the limit.
func (w *window) release(latency time.Duration, throttled bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.inflight--
	w.observe(time.Now(), latency, throttled)
	close(w.wake)
	w.wake = make(chan struct{})
}

func (w *window) observe(now time.Time, latency time.Duration, throttled bool) {
	if throttled {
		if now.Sub(w.lastCut) > w.floor {
			w.limit = math.Max(w.min, w.limit/2)
			w.lastCut = now
		}
		return
	}
	if latency <= 0 {
		return
	}
	if w.floor == 0 || latency < w.floor {
		w.floor = latency
	}
	gradient := math.Min(1, math.Max(0.5, tolerance*float64(w.floor)/float64(latency)))
	target := w.limit*gradient + math.Sqrt(w.limit)
	w.limit = math.Min(w.max, math.Max(w.min, (1-smoothing)*w.limit+smoothing*target))
	if w.limit > w.peak {
		w.peak = w.limit
	}
}

// stats are the current and the highest limit.
func (w *window) stats() (current, peak int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return int(w.limit), int(w.peak)
}
