package migrate

import (
	"context"
	"errors"
	"testing"
	"time"
)

// simulate runs the window against a model server: capacity c writes/s, service time s0, added
// network round trip d. With L writes in flight the latency is d + s0 plus the queue the
// server holds beyond what the pipe keeps busy. It returns the throughput and latency the
// window settles at.
func simulate(w *window, c float64, s0, d time.Duration, steps int) (throughput float64, latency time.Duration) {
	now := time.Unix(0, 0)
	for i := 0; i < steps; i++ {
		l := w.limit
		base := (d + s0).Seconds()
		queue := l - c*base
		if queue < 0 {
			queue = 0
		}
		latency = time.Duration((base + queue/c) * float64(time.Second))
		now = now.Add(latency / time.Duration(int(l)+1))
		w.observe(now, latency, false)
	}
	l := w.limit
	throughput = l / latency.Seconds()
	if throughput > c {
		throughput = c
	}
	return throughput, latency
}

func TestWindowReachesTheServersCeilingAtEveryDelay(t *testing.T) {
	// The local API server: about 400 writes/s at best, and 110/s for one writer at a time
	// (so a write costs about 9 ms with no network in between).
	const c = 400.0
	s0 := 9 * time.Millisecond
	for _, d := range []time.Duration{0, 5 * time.Millisecond, 20 * time.Millisecond, 50 * time.Millisecond} {
		w := newWindow(startWindow(16), 256)
		tp, lat := simulate(w, c, s0, d, 5000)
		if tp < 0.9*c {
			t.Errorf("added RTT %v: settled at limit %.1f, %.0f writes/s; want within 10%% of %.0f", d, w.limit, tp, c)
		}
		if floor := d + s0; lat > 3*floor {
			t.Errorf("added RTT %v: latency %v, more than three times the floor %v (the server queue keeps growing)", d, lat, floor)
		}
		// A fixed 16 in flight falls short once 16 round trips cannot keep the server busy.
		if fixed := 16 / (d + s0).Seconds(); d == 50*time.Millisecond && fixed >= 0.9*c {
			t.Errorf("model check: 16 fixed writers would reach %.0f/s at 50 ms", fixed)
		}
		t.Logf("added RTT %v: limit %.1f, %.0f writes/s, latency %v", d, w.limit, tp, lat)
	}
}

func TestWindowHalvesOnThrottlingOncePerRoundTrip(t *testing.T) {
	w := newWindow(64, 256)
	now := time.Unix(100, 0)
	w.observe(now, 10*time.Millisecond, false)
	before := w.limit
	w.observe(now.Add(20*time.Millisecond), 0, true)
	if w.limit != before/2 {
		t.Fatalf("after a 429: limit %.1f, want %.1f", w.limit, before/2)
	}
	w.observe(now.Add(25*time.Millisecond), 0, true) // same round trip: no second cut
	if w.limit != before/2 {
		t.Fatalf("second 429 within a round trip cut again: %.1f", w.limit)
	}
	for i := 0; i < 20; i++ {
		w.observe(now.Add(time.Duration(i+1)*time.Second), 0, true)
	}
	if w.limit != 1 {
		t.Fatalf("limit %.1f after many 429s, want the minimum 1", w.limit)
	}
}

func TestWindowAcquireWaitsAndHonoursCancel(t *testing.T) {
	w := newWindow(1, 1)
	if err := w.acquire(context.Background()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.acquire(ctx) }()
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("acquire on a full window after cancel: %v", err)
	}
	go func() { done <- w.acquire(context.Background()) }()
	w.release(time.Millisecond, false)
	if err := <-done; err != nil {
		t.Fatalf("acquire after a release: %v", err)
	}
}

// An adaptive rewrite against the real API server, through the fault proxy (429 and 503 on
// first writes): every object rewritten, etcd at v1, and the window moved.
func TestAdaptiveRewriteThroughFaults(t *testing.T) {
	ctx := context.Background()
	const n = 120
	f := newFixture(t, "adaptive", n, false)
	fp, cfg := startFaultProxy(t)
	c, err := NewClients(cfg)
	if err != nil {
		t.Fatal(err)
	}
	r, err := NewRewriter(c, f.get(t), RewriteOptions{Adaptive: true, Concurrency: 16, ChunkSize: 25})
	if err != nil {
		t.Fatal(err)
	}
	res, err := r.Run(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if res.Rewritten != n || res.Failed != 0 || !res.Complete {
		t.Fatalf("result %+v", res)
	}
	if len(fp.injected) == 0 || res.PeakInFlight < startWindow(16) {
		t.Errorf("faults injected %d, peak in flight %d", len(fp.injected), res.PeakInFlight)
	}
	stored, _ := etcdVersions(t, f.group, "widgets")
	if stored[f.group+"/v1"] != n || len(stored) != 1 {
		t.Errorf("etcd: %v", stored)
	}
}
