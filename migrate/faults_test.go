package migrate

import (
	"maps"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/client-go/rest"

	"github.com/crdver/kubectl-crdver/internal/testenv"
)

// startFaultProxy starts a proxy between the client and the real API server that answers the
// first PUT of some objects itself: 503 without Retry-After for names ending in 3, 429 with
// Retry-After: 1 for names ending in 5. Everything else goes to the API server. injected
// counts the faults per object name.
func startFaultProxy(t *testing.T) (injected func() map[string]int, cfg *rest.Config) {
	t.Helper()
	proxy, err := testenv.StartProxy(env, testenv.ServerErrors())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(proxy.Close)
	var mu sync.Mutex
	faults := map[string]int{}
	proxy.FailWith(func(r *http.Request) *testenv.Fault {
		if r.Method != http.MethodPut {
			return nil
		}
		name := r.URL.Path[strings.LastIndex(r.URL.Path, "/")+1:]
		mu.Lock()
		defer mu.Unlock()
		if faults[name] > 0 {
			return nil
		}
		switch {
		case strings.HasSuffix(name, "5"):
			faults[name]++
			return &testenv.TooManyRequests
		case strings.HasSuffix(name, "3"):
			faults[name]++
			return &testenv.NoHealthyUpstream
		}
		return nil
	})
	cfg = proxy.Config(env)
	cfg.QPS = -1
	return func() map[string]int {
		mu.Lock()
		defer mu.Unlock()
		return maps.Clone(faults)
	}, cfg
}

func TestRewriteBacksOffOnThrottlingAndServerErrors(t *testing.T) {
	const n = 40
	f := newFixture(t, "faults", n, false)
	injected, cfg := startFaultProxy(t)
	rewriteEvery(t, cfg, f, n, RewriteOptions{Concurrency: 4, ChunkSize: 10})
	// widget-00003, -00005, -00013, … : 8 objects got an error on their first write.
	if got := injected(); len(got) != 8 {
		t.Errorf("faults injected on %d objects, want 8: %v", len(got), got)
	}
	stored, _ := etcdVersions(t, f.group, "widgets")
	if diff := cmp.Diff(map[string]int{f.group + "/v1": n}, stored); diff != "" {
		t.Errorf("etcd (-want +got):\n%s", diff)
	}
}
