package migrate

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/client-go/rest"

	"github.com/crdver/kubectl-crdver/internal/testenv"
)

// TestAdaptiveRewriteOverALatentPath: with no --concurrency the engine adapts its in-flight
// writes over a path with 20 ms of added round-trip time: every object ends at the storage
// version in etcd, and the limit grew past its start (the base RTT alone leaves the server
// idle at 4 in flight).
func TestAdaptiveRewriteOverALatentPath(t *testing.T) {
	const n = 300
	f := newFixture(t, "adaptive", n, false)
	proxy, err := testenv.StartProxy(env, testenv.Latency(20*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer proxy.Close()
	res := rewriteEvery(t, proxy.Config(env), f, n, RewriteOptions{ChunkSize: 100})
	if !res.InFlight.Adaptive || res.InFlight.Peak <= adaptiveStart {
		t.Errorf("in flight %+v: want an adaptive limit that grew past %d", res.InFlight, adaptiveStart)
	}
	if res.InFlight.BaseRTTMillis < 20 {
		t.Errorf("base RTT %.1f ms through a 20 ms proxy", res.InFlight.BaseRTTMillis)
	}
	stored, _ := etcdVersions(t, f.group, "widgets")
	if diff := cmp.Diff(map[string]int{f.group + "/v1": n}, stored); diff != "" {
		t.Errorf("etcd (-want +got):\n%s", diff)
	}
}

// TestAdaptiveRewriteCountsThrottling: 429s from the fault proxy are retried and counted, and
// each one reaches the adaptive limit (client-go retries them itself, so they are counted on
// the wire).
func TestAdaptiveRewriteCountsThrottling(t *testing.T) {
	const n = 40
	f := newFixture(t, "adaptive429", n, false)
	_, cfg := startFaultProxy(t)
	res := rewriteEvery(t, cfg, f, n, RewriteOptions{ChunkSize: 10})
	// widget-00005, -00015, -00025, -00035 answer 429 on their first write.
	if res.InFlight.Throttled != 4 {
		t.Errorf("throttled %d, want 4", res.InFlight.Throttled)
	}
}

// rewriteEvery rewrites f's objects through cfg with opts and fails unless all n were rewritten.
func rewriteEvery(t *testing.T, cfg *rest.Config, f *fixture, n int64, opts RewriteOptions) *Result {
	t.Helper()
	c, err := NewClients(cfg)
	if err != nil {
		t.Fatal(err)
	}
	r, err := NewRewriter(c, f.get(t), opts)
	if err != nil {
		t.Fatal(err)
	}
	res, err := r.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(Counts{Rewritten: n}, res.Counts); diff != "" {
		t.Fatalf("counts (-want +got):\n%s\nfailures: %v", diff, res.Failures)
	}
	return res
}
