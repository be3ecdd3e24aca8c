package clusterengine_test

// BenchmarkRewriteLatency (docs/benchmarks-latency.md): the rewrite over a slower network. A
// proxy on 127.0.0.1 delays every request by the added round-trip time before handing it to the
// local API server; the rewriters talk to the proxy. Methods: this engine with its default 16
// workers, the same engine with more workers (the best of them is the ceiling the server
// allows at that delay), the engine with an adaptive number of writes in flight
// (RewriteOptions.Adaptive), and the sequential list+update loop. Sizes: CRDVER_BENCH_OBJECTS
// objects (default 500), CRDVER_BENCH_DELAYS added round-trip times in ms (default "0,5,20").

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/rest"

	"github.com/crdver/kubectl-crdver/migrate"
)

// startLatencyProxy forwards every request to the test API server after sleeping delay.
func startLatencyProxy(b *testing.B, delay time.Duration) *rest.Config {
	b.Helper()
	target, err := url.Parse(env.Config.Host)
	if err != nil {
		b.Fatal(err)
	}
	transport, err := rest.TransportFor(env.Config)
	if err != nil {
		b.Fatal(err)
	}
	rp := httputil.NewSingleHostReverseProxy(target)
	rp.Transport = transport
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if delay > 0 {
			t := time.NewTimer(delay)
			select {
			case <-t.C:
			case <-r.Context().Done():
				t.Stop()
				return
			}
		}
		rp.ServeHTTP(w, r)
	}))
	b.Cleanup(srv.Close)
	return &rest.Config{Host: srv.URL, QPS: -1}
}

func benchDelays() []time.Duration {
	spec := os.Getenv("CRDVER_BENCH_DELAYS")
	if spec == "" {
		spec = "0,5,20"
	}
	var out []time.Duration
	for _, s := range strings.Split(spec, ",") {
		if ms, err := strconv.Atoi(strings.TrimSpace(s)); err == nil && ms >= 0 {
			out = append(out, time.Duration(ms)*time.Millisecond)
		}
	}
	return out
}

func BenchmarkRewriteLatency(b *testing.B) {
	f := newBenchFixture(b, "latency", envInt("CRDVER_BENCH_OBJECTS", 500))
	for _, delay := range benchDelays() {
		cfg := startLatencyProxy(b, delay)
		c, err := migrate.NewClients(cfg)
		if err != nil {
			b.Fatal(err)
		}
		for _, workers := range []int{16, 32, 64, 128} {
			b.Run(fmt.Sprintf("delay=%s/engine-%d", delay, workers), func(b *testing.B) {
				f.run(b, func(b *testing.B) {
					r, err := migrate.NewRewriter(c, f.crd, migrate.RewriteOptions{Concurrency: workers, ChunkSize: 500})
					if err != nil {
						b.Fatal(err)
					}
					res, err := r.Run(context.Background())
					if err != nil || !res.Complete || res.Rewritten != int64(f.n) {
						b.Fatalf("rewrite: %+v, %v", res, err)
					}
				})
			})
		}
		b.Run(fmt.Sprintf("delay=%s/engine-adaptive", delay), func(b *testing.B) {
			peak := 0
			f.run(b, func(b *testing.B) {
				r, err := migrate.NewRewriter(c, f.crd, migrate.RewriteOptions{Adaptive: true, Concurrency: 16, ChunkSize: 500})
				if err != nil {
					b.Fatal(err)
				}
				res, err := r.Run(context.Background())
				if err != nil || !res.Complete || res.Rewritten != int64(f.n) {
					b.Fatalf("rewrite: %+v, %v", res, err)
				}
				peak = max(peak, res.PeakInFlight)
			})
			b.ReportMetric(float64(peak), "peak-in-flight")
		})
		b.Run(fmt.Sprintf("delay=%s/sequential", delay), func(b *testing.B) {
			f.run(b, func(b *testing.B) { sequentialRewrite(b, c, f.crd) })
		})
	}
}
