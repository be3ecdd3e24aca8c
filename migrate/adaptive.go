package migrate

import (
	"context"
	"math"
	"slices"
	"sync"
	"time"
)

// inflightLimit bounds the writes in flight. Fixed, it is a plain semaphore (--concurrency N).
// Adaptive, it looks for the number of writes in flight at which the API server completes the
// most writes per second, and follows it:
//
//   - slow start: from a few writes, the limit doubles after each window (about two rounds of
//     writes) while the completion rate grows by more than 10%: over a slow network many
//     writes must overlap to keep the server busy, on a near one few;
//   - when doubling no longer pays, the limit goes back to the best one seen and holds there,
//     tracking the rate it achieves; every few windows it probes 25% higher and keeps the
//     higher limit only if the rate grows by more than 5% (a server that batches its storage
//     writes, as etcd does, gains from more writes in flight well after the latency has risen,
//     so the rate, not the latency, is what is measured);
//   - a 429 (the server's flow control said no) cuts the limit by 30% at once, as a loss
//     would in TCP, and the search starts again from there.
type inflightLimit struct {
	mu sync.Mutex
	// waiters wait for a slot in the order they came: a freed slot goes to the first (closing
	// its channel). First come, first served keeps the writes in list order (the checkpoint
	// advances over whole pages: a write left waiting while later ones win the race would hold
	// its page, and the checkpoint, back), and wakes one goroutine per slot, not every waiter.
	waiters  []chan struct{}
	inflight int

	adaptive  bool
	limit     float64
	min, max  int
	slowStart bool
	probing   bool
	baseRTT   time.Duration
	now       func() time.Time
	winStart  time.Time
	winCount  int
	holds     int
	bestRate  float64
	bestLimit float64
	peak      int
	throttled int64
	// seen429 reads the clients' count of 429 answers; lastSeen is what release last saw.
	seen429  func() int64
	lastSeen int64
}

const (
	slowStartGain = 1.10 // a doubling must raise the rate by more than this
	probeGain     = 1.05 // a probe 25% higher must raise it by more than this
	probeEvery    = 4    // windows held between probes
)

// DefaultMaxConcurrency caps the adaptive limit.
const DefaultMaxConcurrency = 256

func newFixedLimit(n int) *inflightLimit {
	return &inflightLimit{limit: float64(n), min: n, max: n, peak: n}
}

func newAdaptiveLimit(start, max int) *inflightLimit {
	if max <= 0 {
		max = DefaultMaxConcurrency
	}
	if start > max {
		start = max
	}
	return &inflightLimit{adaptive: true, limit: float64(start), min: 1, max: max, slowStart: true, peak: start, now: time.Now}
}

// workers is how many goroutines may ever hold a slot.
func (l *inflightLimit) workers() int { return l.max }

// acquire waits for a slot, first come first served; it returns ctx's error if ctx ends first.
func (l *inflightLimit) acquire(ctx context.Context) error {
	l.mu.Lock()
	if l.inflight < int(l.limit) && len(l.waiters) == 0 {
		l.inflight++
		l.mu.Unlock()
		return nil
	}
	ch := make(chan struct{})
	l.waiters = append(l.waiters, ch)
	l.mu.Unlock()
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		l.mu.Lock()
		defer l.mu.Unlock()
		select {
		case <-ch:
			// Granted meanwhile: the slot goes to the next waiter.
			l.inflight--
			l.grantLocked()
		default:
			if i := slices.Index(l.waiters, ch); i >= 0 {
				l.waiters = slices.Delete(l.waiters, i, i+1)
			}
		}
		return ctx.Err()
	}
}

// grantLocked gives the free slots to the first waiters.
func (l *inflightLimit) grantLocked() {
	for len(l.waiters) > 0 && l.inflight < int(l.limit) {
		ch := l.waiters[0]
		l.waiters[0] = nil
		l.waiters = l.waiters[1:]
		l.inflight++
		close(ch)
	}
}

// release frees a slot, with the write's latency and whether the server throttled it (429).
func (l *inflightLimit) release(rtt time.Duration, throttled bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.inflight--
	// After the limit is adjusted below (it may let more writes go).
	defer l.grantLocked()
	if l.seen429 != nil {
		if n := l.seen429(); n > l.lastSeen {
			l.throttled += n - l.lastSeen
			l.lastSeen = n
			throttled = true
		}
	} else if throttled {
		l.throttled++
	}
	if !l.adaptive {
		return
	}
	if throttled {
		l.slowStart, l.probing = false, false
		l.set(l.limit * 0.7)
		l.bestRate, l.bestLimit = 0, l.limit
		l.winCount, l.winStart = 0, time.Time{}
		return
	}
	if rtt > 0 && (l.baseRTT == 0 || rtt < l.baseRTT) {
		l.baseRTT = rtt
	}
	now := l.now()
	if l.winStart.IsZero() {
		l.winStart, l.winCount = now, 0
		return
	}
	l.winCount++
	if l.winCount < int(math.Max(16, 2*l.limit)) {
		return
	}
	elapsed := now.Sub(l.winStart).Seconds()
	l.winStart, l.winCount = now, 0
	if elapsed <= 0 {
		return
	}
	rate := float64(int(math.Max(16, 2*l.limit))) / elapsed
	switch {
	case l.slowStart:
		if rate > l.bestRate*slowStartGain {
			l.bestRate, l.bestLimit = rate, l.limit
			l.set(l.limit * 2)
			if l.limit == l.bestLimit { // at the cap
				l.slowStart = false
			}
			return
		}
		l.slowStart = false
		l.set(l.bestLimit)
	case l.probing:
		l.probing = false
		if rate > l.bestRate*probeGain {
			l.bestRate, l.bestLimit = rate, l.limit
			l.probing = true
			l.set(l.limit * 1.25)
			return
		}
		l.set(l.bestLimit)
	default:
		// Holding: follow the rate at this limit (the load on the server changes).
		if l.bestRate == 0 {
			l.bestRate = rate
		} else {
			l.bestRate = 0.7*l.bestRate + 0.3*rate
		}
		l.bestLimit = l.limit
		if l.holds++; l.holds%probeEvery == 0 && l.limit < float64(l.max) {
			l.probing = true
			l.set(l.limit * 1.25)
		}
	}
}

func (l *inflightLimit) set(v float64) {
	v = math.Max(float64(l.min), math.Min(float64(l.max), v))
	l.limit = v
	if int(v) > l.peak {
		l.peak = int(v)
	}
}

// InFlight is how the number of concurrent writes was chosen, for the report.
type InFlight struct {
	Adaptive bool `json:"adaptive"`
	// Final and Peak are the limit at the end and its highest value.
	Final int `json:"final"`
	Peak  int `json:"peak"`
	// BaseRTTMillis is the lowest write latency seen.
	BaseRTTMillis float64 `json:"baseRTTMillis,omitempty"`
	// Throttled counts writes the server answered with 429.
	Throttled int64 `json:"throttled"`
}

func (l *inflightLimit) snapshot() InFlight {
	l.mu.Lock()
	defer l.mu.Unlock()
	return InFlight{Adaptive: l.adaptive, Final: int(l.limit), Peak: l.peak, BaseRTTMillis: float64(l.baseRTT.Microseconds()) / 1000, Throttled: l.throttled}
}

// adaptiveStart is the first limit of an adaptive run: low enough to measure the base RTT on an
// idle server, and doubled each window while the server has room.
const adaptiveStart = 4

// Gate bounds the requests in flight of a bulk pass over a CRD's objects the way the rewrite
// bounds its writes (inflightLimit): a fixed number, or adapted to the rate the API server
// completes them, cut by 30% on each 429. The preflight's dry-run writes use it, so that they
// adapt to the server like the rewrite does.
type Gate struct{ l *inflightLimit }

// NewGate returns a gate of concurrency requests in flight, or an adaptive one when
// concurrency is 0. throttled, when set, reads a count of the API server's 429 answers
// (Clients.Throttled): the ones client-go retried by itself count too.
func NewGate(concurrency int, throttled func() int64) *Gate {
	l := newFixedLimit(concurrency)
	if concurrency <= 0 {
		l = newAdaptiveLimit(adaptiveStart, 0)
	}
	if throttled != nil {
		base := throttled()
		l.seen429 = func() int64 { return throttled() - base }
	}
	return &Gate{l: l}
}

// Workers is how many goroutines may ever hold a slot.
func (g *Gate) Workers() int { return g.l.workers() }

// Acquire waits for a slot; it returns ctx's error if ctx ends first.
func (g *Gate) Acquire(ctx context.Context) error { return g.l.acquire(ctx) }

// Release frees a slot, with the request's latency and whether the server throttled it (429).
func (g *Gate) Release(rtt time.Duration, throttled bool) { g.l.release(rtt, throttled) }

// Snapshot is how many requests were in flight, for a report.
func (g *Gate) Snapshot() InFlight { return g.l.snapshot() }
