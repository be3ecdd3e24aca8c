package migrate

import (
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/client-go/rest"
)

// faultProxy sits between the client and the real API server and answers the first PUT of
// some objects itself: 503 without Retry-After for names ending in 3, 429 with Retry-After: 1
// for names ending in 5. Everything else goes to the API server.
type faultProxy struct {
	mu       sync.Mutex
	injected map[string]int
}

func startFaultProxy(t *testing.T) (*faultProxy, *rest.Config) {
	t.Helper()
	target, err := url.Parse(env.Config.Host)
	if err != nil {
		t.Fatal(err)
	}
	transport, err := rest.TransportFor(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	fp := &faultProxy{injected: map[string]int{}}
	rp := httputil.NewSingleHostReverseProxy(target)
	rp.Transport = transport
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPut {
			name := r.URL.Path[strings.LastIndex(r.URL.Path, "/")+1:]
			fp.mu.Lock()
			first := fp.injected[name] == 0
			if first && (strings.HasSuffix(name, "3") || strings.HasSuffix(name, "5")) {
				fp.injected[name]++
				fp.mu.Unlock()
				w.Header().Set("Content-Type", "application/json")
				if strings.HasSuffix(name, "5") {
					w.Header().Set("Retry-After", "1")
					w.WriteHeader(http.StatusTooManyRequests)
					_, _ = w.Write([]byte(`{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"TooManyRequests","code":429,"details":{"retryAfterSeconds":1}}`))
					return
				}
				w.WriteHeader(http.StatusServiceUnavailable)
				_, _ = w.Write([]byte(`{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"ServiceUnavailable","code":503}`))
				return
			}
			fp.mu.Unlock()
		}
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return fp, &rest.Config{Host: srv.URL, QPS: -1}
}

func TestRewriteBacksOffOnThrottlingAndServerErrors(t *testing.T) {
	const n = 40
	f := newFixture(t, "faults", n, false)
	fp, cfg := startFaultProxy(t)
	rewriteEvery(t, cfg, f, n, RewriteOptions{Concurrency: 4, ChunkSize: 10})
	// widget-00003, -00005, -00013, … : 8 objects got an error on their first write.
	if len(fp.injected) != 8 {
		t.Errorf("faults injected on %d objects, want 8: %v", len(fp.injected), fp.injected)
	}
	stored, _ := etcdVersions(t, f.group, "widgets")
	if diff := cmp.Diff(map[string]int{f.group + "/v1": n}, stored); diff != "" {
		t.Errorf("etcd (-want +got):\n%s", diff)
	}
}
