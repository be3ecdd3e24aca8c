package migrate

import (
	"context"
	"math"
	"sync"
	"time"
)

// inflightLimit bounds the writes in flight. Fixed, it is a plain semaphore (--concurrency N).
// Adaptive, it finds the number of in-flight writes that keeps the API server busy over the
// observed round-trip time, the way TCP Vegas sizes a congestion window:
//
//   - baseRTT is the lowest write latency seen (the network and an idle server);
//   - after each window (as many completions as the limit), the writes queued at the server
//     are estimated as queued = limit × (1 − baseRTT/avgRTT) (Little's law: what is in flight
//     beyond the bandwidth-delay product waits in the server's queue);
//   - fewer than alpha queued: the server has idle capacity, so the limit grows (doubling
//     while in slow start, then by one); more than beta: it shrinks by one;
//   - a 429 (the server's flow control said no) cuts it by 30% at once, as a loss would.
//
// So the limit follows the latency: ~alpha+X·baseRTT for a server that completes X writes/s,
// a few writes on a local server and several dozen 50 ms away, without the user tuning it.
type inflightLimit struct {
	mu       sync.Mutex
	wake     chan struct{} // closed and replaced whenever a slot frees
	inflight int

	adaptive  bool
	limit     float64
	min, max  int
	slowStart bool
	baseRTT   time.Duration
	winCount  int
	winSum    time.Duration
	peak      int
	throttled int64
	// seen429 reads the clients' count of 429 answers; lastSeen is what release last saw.
	seen429  func() int64
	lastSeen int64
}

const (
	vegasAlpha = 8  // queued writes below which the limit grows
	vegasBeta  = 16 // queued writes above which it shrinks
)

// DefaultMaxConcurrency caps the adaptive limit.
const DefaultMaxConcurrency = 256

func newFixedLimit(n int) *inflightLimit {
	return &inflightLimit{wake: make(chan struct{}), limit: float64(n), min: n, max: n, peak: n}
}

func newAdaptiveLimit(start, max int) *inflightLimit {
	if max <= 0 {
		max = DefaultMaxConcurrency
	}
	if start > max {
		start = max
	}
	return &inflightLimit{wake: make(chan struct{}), adaptive: true, limit: float64(start), min: 1, max: max, slowStart: true, peak: start}
}

// workers is how many goroutines may ever hold a slot.
func (l *inflightLimit) workers() int { return l.max }

// acquire waits for a slot; it returns ctx's error if ctx ends first.
func (l *inflightLimit) acquire(ctx context.Context) error {
	for {
		l.mu.Lock()
		if l.inflight < int(l.limit) {
			l.inflight++
			l.mu.Unlock()
			return nil
		}
		wake := l.wake
		l.mu.Unlock()
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-wake:
		}
	}
}

// release frees a slot, with the write's latency and whether the server throttled it (429).
func (l *inflightLimit) release(rtt time.Duration, throttled bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.inflight--
	close(l.wake)
	l.wake = make(chan struct{})
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
		l.slowStart = false
		l.set(l.limit * 0.7)
		l.winCount, l.winSum = 0, 0
		return
	}
	if rtt <= 0 {
		return
	}
	if l.baseRTT == 0 || rtt < l.baseRTT {
		l.baseRTT = rtt
	}
	l.winCount++
	l.winSum += rtt
	if l.winCount < int(math.Max(8, l.limit)) {
		return
	}
	avg := l.winSum / time.Duration(l.winCount)
	l.winCount, l.winSum = 0, 0
	queued := l.limit * (1 - float64(l.baseRTT)/float64(avg))
	switch {
	case queued < vegasAlpha:
		if l.slowStart {
			l.set(l.limit * 2)
		} else {
			l.set(l.limit + 1)
		}
	case queued > vegasBeta:
		l.slowStart = false
		l.set(l.limit - 1)
	default:
		l.slowStart = false
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
