package clusterengine_test

// BenchmarkNetwork: the storage migration over a network path. A TCP proxy (testenv's
// Proxy with Latency) adds 0, 5 or 20 ms of round-trip time between the client and the local API
// server, and every way of migrating is timed through it:
//
//	engine        kubectl crdver migrate's engine with its defaults (adaptive in-flight writes)
//	engine-16     the engine with --concurrency 16 (the fixed default before it adapted)
//	sequential    one worker: list pages of 500, update each object (kube-storage-version-migrator)
//	kubectl       kubectl get -A -o json | kubectl replace -f -   (the runbook)
//	command       the whole `kubectl crdver migrate --to V --yes` (built binary: plan, preflight
//	              with every check on — the fixture's versions differ and an unbound admission
//	              policy matches it, so every object is dry-run —, switch, rewrite, trim)
//	ceiling-N     N workers doing nothing but PUT the listed objects; the best N is the
//	              server's ceiling for that delay
//
// The in-tree StorageVersionMigration controller runs beside the server (no delay):
// BenchmarkClusterController.
//
//	CRDVER_BENCH_OBJECTS       objects for engine and ceiling runs (default 500; recorded: 10000)
//	CRDVER_BENCH_SLOW_OBJECTS  objects for sequential and kubectl (default 200; recorded: 2000)
//	CRDVER_BENCH_RTTS          added round-trip times, comma-separated (default 0ms,5ms,20ms)

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	crdinfo "github.com/crdver/kubectl-crdver/crd"
	"github.com/crdver/kubectl-crdver/internal/testenv"
	"github.com/crdver/kubectl-crdver/migrate"
)

func benchRTTs(b *testing.B) []time.Duration {
	spec := os.Getenv("CRDVER_BENCH_RTTS")
	if spec == "" {
		spec = "0ms,5ms,20ms"
	}
	var out []time.Duration
	for _, s := range strings.Split(spec, ",") {
		d, err := time.ParseDuration(strings.TrimSpace(s))
		if err != nil {
			b.Fatalf("CRDVER_BENCH_RTTS: %v", err)
		}
		out = append(out, d)
	}
	return out
}

func BenchmarkNetwork(b *testing.B) {
	big := newBenchFixture(b, "net", envInt("CRDVER_BENCH_OBJECTS", 500))
	small := newBenchFixture(b, "netslow", envInt("CRDVER_BENCH_SLOW_OBJECTS", 200))
	kubectl, kubectlErr := exec.LookPath("kubectl")
	whole := newBenchFixture(b, "netcmd", envInt("CRDVER_BENCH_OBJECTS", 500))
	whole.differ(b)
	whole.guard(b)
	bin := buildCommand(b)
	cache := b.TempDir()
	for _, rtt := range benchRTTs(b) {
		proxy, err := testenv.StartProxy(env, testenv.Latency(rtt))
		if err != nil {
			b.Fatal(err)
		}
		kubeconfig, err := proxy.Kubeconfig(env, b.TempDir())
		if err != nil {
			b.Fatal(err)
		}
		c, err := migrate.NewClients(proxy.Config(env))
		if err != nil {
			b.Fatal(err)
		}
		name := func(m string) string { return fmt.Sprintf("rtt=%v/%s", rtt, m) }

		engine := func(concurrency int) func(b *testing.B) {
			return func(b *testing.B) {
				var last migrate.InFlight
				big.run(b, func(b *testing.B) {
					crd := big.fresh(b)
					r, err := migrate.NewRewriter(c, crd, migrate.RewriteOptions{Concurrency: concurrency})
					if err != nil {
						b.Fatal(err)
					}
					res, err := r.Run(context.Background())
					if err != nil || !res.Complete || res.Rewritten != int64(big.n) {
						b.Fatalf("rewrite: %+v, %v", res, err)
					}
					last = res.InFlight
				})
				b.ReportMetric(float64(last.Final), "final-inflight")
				b.ReportMetric(float64(last.Peak), "peak-inflight")
			}
		}
		b.Run(name("engine"), engine(0))
		b.Run(name("engine-16"), engine(16))
		for _, n := range []int{16, 32, 64, 128} {
			b.Run(name(fmt.Sprintf("ceiling-%d", n)), func(b *testing.B) {
				big.run(b, func(b *testing.B) { putAll(b, c, big.fresh(b), n) })
			})
		}
		b.Run(name("command"), func(b *testing.B) {
			var total time.Duration
			for i := 0; i < b.N; i++ {
				to := "v1"
				if crdinfo.StorageVersion(whole.fresh(b)) == "v1" {
					to = "v1beta1"
				}
				d, _ := runMigrate(b, bin, kubeconfig, cache, whole, to)
				total += d
				whole.check(b, to)
			}
			b.ReportMetric(float64(whole.n*b.N)/total.Seconds(), "objects/s")
		})
		b.Run(name("sequential"), func(b *testing.B) {
			small.run(b, func(b *testing.B) { sequentialLoop(b, c, small.fresh(b)) })
		})
		b.Run(name("kubectl"), func(b *testing.B) {
			if kubectlErr != nil {
				b.Skip("kubectl is not on PATH")
			}
			small.run(b, func(b *testing.B) {
				script := fmt.Sprintf("set -o pipefail; %[1]s --kubeconfig %[2]s get items.%[3]s -A -o json | %[1]s --kubeconfig %[2]s replace -f - >/dev/null", kubectl, kubeconfig, small.group)
				if out, err := exec.Command("bash", "-c", script).CombinedOutput(); err != nil {
					b.Fatalf("%v: %s", err, out)
				}
			})
		})
		proxy.Close()
	}
}

// fresh is the CRD as it is now (after flip switched its storage version).
func (f *benchFixture) fresh(b *testing.B) *apiextensionsv1.CustomResourceDefinition {
	b.Helper()
	crd, err := f.c.CRDs.ApiextensionsV1().CustomResourceDefinitions().Get(context.Background(), f.crd.Name, metav1.GetOptions{})
	if err != nil {
		b.Fatal(err)
	}
	return crd
}

// putAll lists pages of 500 and PUTs every object back with n workers, nothing else: no
// retries, no checkpoint. The next page is listed while this one is written.
func putAll(b *testing.B, c *migrate.Clients, crd *apiextensionsv1.CustomResourceDefinition, n int) {
	ctx := context.Background()
	ri := c.Dynamic.Resource(crdinfo.GVR(crd, crdinfo.StorageVersion(crd)))
	work := make(chan *unstructured.Unstructured, 500)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var firstErr error
	for w := 0; w < n; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for o := range work {
				if _, err := ri.Namespace(o.GetNamespace()).Update(ctx, o, metav1.UpdateOptions{}); err != nil {
					mu.Lock()
					if firstErr == nil {
						firstErr = err
					}
					mu.Unlock()
				}
			}
		}()
	}
	cont := ""
	for {
		list, err := ri.List(ctx, metav1.ListOptions{Limit: 500, Continue: cont})
		if err != nil {
			close(work)
			wg.Wait()
			b.Fatal(err)
		}
		for i := range list.Items {
			work <- &list.Items[i]
		}
		if cont = list.GetContinue(); cont == "" {
			break
		}
	}
	close(work)
	wg.Wait()
	if firstErr != nil {
		b.Fatal(firstErr)
	}
}
