package migrate

import (
	"context"
	"fmt"
	"math"
	"testing"
	"time"
)

// serverModel is a saturating server: it completes at most capacity writes/s, and a write
// takes at least base (network plus an idle server). With n writes in flight the latency is
// base while n ≤ capacity×base, and n/capacity beyond (Little's law: the rest queue).
type serverModel struct {
	capacity float64 // writes per second
	base     time.Duration
	// batching: the server completes capacity × min(1, log2(n)/7) writes/s with n in flight
	// (etcd commits concurrent writes in one batch), reaching capacity only at 128.
	batching bool
}

func (s serverModel) rate(n int) float64 {
	if !s.batching {
		return s.capacity
	}
	return s.capacity * math.Min(1, math.Max(0.05, math.Log2(float64(n))/7))
}

func (s serverModel) rtt(n int) time.Duration {
	q := time.Duration(float64(n) / s.rate(n) * float64(time.Second))
	if q < s.base {
		return s.base
	}
	return q
}

func (s serverModel) throughput(n int) float64 {
	return float64(n) / s.rtt(n).Seconds()
}

// drive runs releases against the model with the limit's current in-flight count, on a clock
// of its own: with n writes in flight taking rtt each, one completes every rtt/n.
func drive(l *inflightLimit, s serverModel, releases int) {
	clock := time.Unix(0, 0)
	l.now = func() time.Time { return clock }
	for i := 0; i < releases; i++ {
		n := int(l.limit)
		l.mu.Lock()
		l.inflight = n
		l.mu.Unlock()
		clock = clock.Add(s.rtt(n) / time.Duration(n))
		l.release(s.rtt(n), false)
	}
}

func TestAdaptiveLimitReachesTheServersCeilingAtEveryLatency(t *testing.T) {
	for _, base := range []time.Duration{2 * time.Millisecond, 7 * time.Millisecond, 22 * time.Millisecond, 52 * time.Millisecond, 200 * time.Millisecond} {
		for _, capacity := range []float64{100, 400, 2000} {
			t.Run(fmt.Sprintf("%v/%v", base, capacity), func(t *testing.T) {
				s := serverModel{capacity: capacity, base: base}
				l := newAdaptiveLimit(8, DefaultMaxConcurrency)
				drive(l, s, 20000)
				n := int(l.limit)
				bdp := capacity * base.Seconds()
				if want := 2*bdp + 16; want < DefaultMaxConcurrency && float64(n) > want {
					t.Errorf("limit %d, want at most %.0f (twice the bandwidth-delay product %.1f, and a few): writes queue at the server for nothing", n, want, bdp)
				}
				ceiling := capacity
				if maxT := s.throughput(DefaultMaxConcurrency); maxT < ceiling {
					ceiling = maxT // the cap itself bounds it (200 ms × 2000/s needs 400 in flight)
				}
				if got := s.throughput(n); got < 0.9*ceiling {
					t.Errorf("limit %d gives %.0f writes/s, want ≥ 90%% of %.0f", n, got, ceiling)
				}
			})
		}
	}
}

// TestAdaptiveLimitFollowsABatchingServer: when more writes in flight raise the server's rate
// long after its latency has risen (storage batching), the limit keeps growing with the rate:
// a latency-based limit (Vegas) would stop at a few dozen, at under 80% of what the server does.
func TestAdaptiveLimitFollowsABatchingServer(t *testing.T) {
	for _, base := range []time.Duration{2 * time.Millisecond, 22 * time.Millisecond} {
		s := serverModel{capacity: 400, base: base, batching: true}
		l := newAdaptiveLimit(adaptiveStart, DefaultMaxConcurrency)
		drive(l, s, 20000)
		if got := s.throughput(int(l.limit)); got < 0.9*400 {
			t.Errorf("%v: limit %.0f gives %.0f writes/s, want ≥ 90%% of 400", base, l.limit, got)
		}
	}
}

func TestAdaptiveLimitBacksOffOnThrottling(t *testing.T) {
	l := newAdaptiveLimit(8, DefaultMaxConcurrency)
	drive(l, serverModel{capacity: 400, base: 22 * time.Millisecond}, 5000)
	before := l.limit
	l.mu.Lock()
	l.inflight = 1
	l.mu.Unlock()
	l.release(time.Millisecond, true)
	if want := before * 0.7; l.limit > want+0.001 {
		t.Fatalf("after a 429 the limit is %.1f, want ≤ %.1f (from %.1f)", l.limit, want, before)
	}
	for i := 0; i < 50; i++ {
		l.mu.Lock()
		l.inflight = 1
		l.mu.Unlock()
		l.release(time.Millisecond, true)
	}
	if l.limit != 1 {
		t.Errorf("after repeated 429s the limit is %.1f, want the floor 1", l.limit)
	}
	if got := l.snapshot().Throttled; got != 51 {
		t.Errorf("throttled %d, want 51", got)
	}
}

func TestFixedLimitIsASemaphore(t *testing.T) {
	l := newFixedLimit(2)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for i := 0; i < 2; i++ {
		if err := l.acquire(ctx); err != nil {
			t.Fatal(err)
		}
	}
	got := make(chan error, 1)
	go func() { got <- l.acquire(ctx) }()
	select {
	case err := <-got:
		t.Fatalf("a third acquire returned (%v) while two slots are held", err)
	case <-time.After(50 * time.Millisecond):
	}
	l.release(time.Millisecond, false)
	if err := <-got; err != nil {
		t.Fatalf("acquire after a release: %v", err)
	}
	if l.limit != 2 {
		t.Errorf("a fixed limit changed to %v", l.limit)
	}
	blocked := make(chan error, 1)
	go func() { blocked <- l.acquire(ctx) }()
	cancel()
	if err := <-blocked; err == nil {
		t.Error("acquire did not return the context's error when cancelled")
	}
}

// Slots go to waiters in the order they came (the rewrite's writes then complete in list
// order and its checkpoint advances page by page); a waiter that gives up leaves the queue,
// and a slot granted to it as it gives up goes to the next one.
func TestLimitServesInArrivalOrder(t *testing.T) {
	l := newFixedLimit(1)
	bg := context.Background()
	if err := l.acquire(bg); err != nil {
		t.Fatal(err)
	}
	waiting := func() int {
		l.mu.Lock()
		defer l.mu.Unlock()
		return len(l.waiters)
	}
	enqueued := func(n int) {
		t.Helper()
		for deadline := time.Now().Add(5 * time.Second); waiting() != n; {
			if time.Now().After(deadline) {
				t.Fatalf("%d waiters, want %d", waiting(), n)
			}
			time.Sleep(time.Millisecond)
		}
	}
	const n = 20
	order := make(chan int, n)
	giveUp, cancel := context.WithCancel(bg)
	gaveUp := make(chan error, 1)
	for i := 0; i < n; i++ {
		if i == 5 {
			go func() { gaveUp <- l.acquire(giveUp) }()
			enqueued(i + 1)
		}
		go func(i int) {
			if err := l.acquire(bg); err != nil {
				t.Error(err)
				return
			}
			order <- i
			l.release(time.Millisecond, false)
		}(i)
		if i >= 5 {
			enqueued(i + 2)
		} else {
			enqueued(i + 1)
		}
	}
	cancel()
	if err := <-gaveUp; err == nil {
		t.Fatal("the waiter that gave up got a slot")
	}
	enqueued(n)
	l.release(time.Millisecond, false)
	for want := 0; want < n; want++ {
		if got := <-order; got != want {
			t.Fatalf("waiter %d got the slot before waiter %d", got, want)
		}
	}
	// The last waiter's release runs after it sent its number.
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(time.Millisecond) {
		l.mu.Lock()
		inflight, w := l.inflight, len(l.waiters)
		l.mu.Unlock()
		if inflight == 0 && w == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("in flight %d, waiting %d after every waiter released", inflight, w)
		}
	}
}
