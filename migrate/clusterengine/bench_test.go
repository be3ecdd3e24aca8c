package clusterengine_test

// Benchmarks behind docs/benchmarks.md (section "migrate"): objects/s of this engine side by
// side with the ways people migrate today, on the same local API server, and the peak RSS of
// the built command. Sizes come from the environment so that `make bench` stays short:
//
//	CRDVER_BENCH_OBJECTS      objects per rewrite benchmark (default 500; the recorded figures use 10000)
//	CRDVER_BENCH_RSS_OBJECTS  objects for BenchmarkMigrateCommandRSS (default 2000; recorded: 100000)
//	CRDVER_BENCH_RSS_CHECKED  set: BenchmarkMigrateCommandRSS with every safety check on (see
//	                          BenchmarkSafeMigrate's "checked")
//
// Each iteration switches the storage version (v1beta1 <-> v1, timer stopped), so every object
// really is stored at the old version, then times one full rewrite and checks etcd afterwards.

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	crdinfo "github.com/crdver/kubectl-crdver/crd"
	"github.com/crdver/kubectl-crdver/internal/testenv"
	"github.com/crdver/kubectl-crdver/migrate"
)

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

// benchFixture is a CRD with n objects (3 namespaces), created once per benchmark.
type benchFixture struct {
	c     *migrate.Clients
	crd   *apiextensionsv1.CustomResourceDefinition
	group string
	n     int
}

func newBenchFixture(b *testing.B, name string, n int) *benchFixture {
	b.Helper()
	ctx := context.Background()
	group := name + ".bench.example.com"
	crd := testenv.TwoVersionCRD(group, "items", "Item", apiextensionsv1.JSONSchemaProps{Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{
		"size": {Type: "integer"}, "color": {Type: "string"}, "labels": {Type: "array", Items: &apiextensionsv1.JSONSchemaPropsOrArray{Schema: &apiextensionsv1.JSONSchemaProps{Type: "string"}}},
	}})
	if _, err := env.CreateCRD(ctx, crd); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = env.DeleteCRD(context.Background(), crd.Name) })
	c, err := migrate.NewClients(env.Config)
	if err != nil {
		b.Fatal(err)
	}
	nss := []string{"default", "kube-public", "kube-system"}
	gvr := schema.GroupVersionResource{Group: group, Version: "v1beta1", Resource: "items"}
	var wg sync.WaitGroup
	next := make(chan int)
	var firstErr error
	var mu sync.Mutex
	for w := 0; w < 16; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				ns := nss[i%len(nss)]
				obj := &unstructured.Unstructured{Object: map[string]any{
					"apiVersion": group + "/v1beta1", "kind": "Item",
					"metadata": map[string]any{"name": fmt.Sprintf("item-%06d", i), "namespace": ns, "labels": map[string]any{"app": "bench"}},
					"spec":     map[string]any{"size": int64(i), "color": "blue", "labels": []any{"a", "b", "c"}},
				}}
				if _, err := c.Dynamic.Resource(gvr).Namespace(ns).Create(ctx, obj, metav1.CreateOptions{}); err != nil {
					mu.Lock()
					if firstErr == nil {
						firstErr = err
					}
					mu.Unlock()
				}
			}
		}()
	}
	for i := 0; i < n; i++ {
		next <- i
	}
	close(next)
	wg.Wait()
	if firstErr != nil {
		b.Fatal(firstErr)
	}
	return &benchFixture{c: c, crd: crd, group: group, n: n}
}

// flip makes the other version the storage version; every object is then stored at the old one.
func (f *benchFixture) flip(b *testing.B) string {
	b.Helper()
	ctx := context.Background()
	cur, err := f.c.CRDs.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, f.crd.Name, metav1.GetOptions{})
	if err != nil {
		b.Fatal(err)
	}
	to := "v1"
	if crdinfo.StorageVersion(cur) == "v1" {
		to = "v1beta1"
	}
	if f.crd, err = migrate.SwitchStorage(ctx, f.c, f.crd.Name, to); err != nil {
		b.Fatal(err)
	}
	return to
}

// check asserts that etcd holds every object at version v.
func (f *benchFixture) check(b *testing.B, v string) {
	b.Helper()
	got := storedOn(b, env, f.group, "items")
	if len(got) != 1 || got[f.group+"/"+v] != f.n {
		b.Fatalf("after the rewrite etcd holds %v, want all %d at %s", got, f.n, v)
	}
}

// run times one rewrite per iteration with method and reports objects/s.
func (f *benchFixture) run(b *testing.B, method func(b *testing.B)) {
	b.ResetTimer()
	var total time.Duration
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		to := f.flip(b)
		b.StartTimer()
		start := time.Now()
		method(b)
		total += time.Since(start)
		b.StopTimer()
		f.check(b, to)
	}
	b.ReportMetric(float64(f.n*b.N)/total.Seconds(), "objects/s")
}

// BenchmarkRewriteEngine is this package's engine: 16 workers, no client-side limit, pages of 500.
func BenchmarkRewriteEngine(b *testing.B) {
	f := newBenchFixture(b, "engine", envInt("CRDVER_BENCH_OBJECTS", 500))
	f.run(b, func(b *testing.B) {
		r, err := migrate.NewRewriter(f.c, f.crd, migrate.RewriteOptions{Concurrency: 16, ChunkSize: 500})
		if err != nil {
			b.Fatal(err)
		}
		res, err := r.Run(context.Background())
		if err != nil || !res.Complete || res.Rewritten != int64(f.n) {
			b.Fatalf("rewrite: %+v, %v", res, err)
		}
	})
}

// BenchmarkRunbookKubectl is the loop users write today:
// kubectl get <plural> -A -o json | kubectl replace -f -
func BenchmarkRunbookKubectl(b *testing.B) {
	kubectl, err := exec.LookPath("kubectl")
	if err != nil {
		b.Skip("kubectl is not on PATH")
	}
	f := newBenchFixture(b, "kubectl", envInt("CRDVER_BENCH_OBJECTS", 500))
	f.run(b, func(b *testing.B) {
		script := fmt.Sprintf("set -o pipefail; %[1]s --kubeconfig %[2]s get items.%[3]s -A -o json | %[1]s --kubeconfig %[2]s replace -f - >/dev/null", kubectl, env.Kubeconfig, f.group)
		if out, err := exec.Command("bash", "-c", script).CombinedOutput(); err != nil {
			b.Fatalf("%v: %s", err, out)
		}
	})
}

// BenchmarkSequentialLoop is one worker listing pages of 500 and updating each object in
// turn, as kube-storage-version-migrator's migrator does (no client-side rate limit).
func BenchmarkSequentialLoop(b *testing.B) {
	f := newBenchFixture(b, "sequential", envInt("CRDVER_BENCH_OBJECTS", 500))
	f.run(b, func(b *testing.B) { sequentialLoop(b, f.c, f.crd) })
}

// sequentialLoop lists a page of 500, updates each of its objects in turn, then lists the next.
func sequentialLoop(b *testing.B, c *migrate.Clients, crd *apiextensionsv1.CustomResourceDefinition) {
	ctx := context.Background()
	ri := c.Dynamic.Resource(crdinfo.GVR(crd, "v1"))
	cont := ""
	for {
		list, err := ri.List(ctx, metav1.ListOptions{Limit: 500, Continue: cont})
		if err != nil {
			b.Fatal(err)
		}
		for i := range list.Items {
			o := &list.Items[i]
			if _, err := ri.Namespace(o.GetNamespace()).Update(ctx, o, metav1.UpdateOptions{}); err != nil {
				b.Fatal(err)
			}
		}
		if cont = list.GetContinue(); cont == "" {
			return
		}
	}
}

// BenchmarkClusterController is the in-tree StorageVersionMigration controller of
// kube-controller-manager, with its defaults (client QPS 20).
func BenchmarkClusterController(b *testing.B) {
	cm, err := env.StartStorageVersionMigrator()
	if err != nil {
		b.Fatal(err)
	}
	defer cm.Stop()
	f := newBenchFixture(b, "controller", envInt("CRDVER_BENCH_OBJECTS", 500))
	version, err := migrate.ServedClusterMigrationVersion(f.c)
	if err != nil {
		b.Fatal(err)
	}
	f.run(b, func(b *testing.B) {
		res, err := migrate.RunCluster(context.Background(), f.c, f.crd, version, 2*time.Minute, nil)
		if err != nil || !res.Succeeded {
			b.Fatalf("%+v, %v\n%s", res, err, tail(cm.Logs(), 3000))
		}
	})
}

// BenchmarkMigrateCommandRSS builds kubectl-crdver, runs `migrate` on
// CRDVER_BENCH_RSS_OBJECTS objects and reports the child's peak RSS (testenv.PeakRSS) and rate.
func BenchmarkMigrateCommandRSS(b *testing.B) {
	bin := testenv.MustBuildPlugin(b, b.TempDir(), testenv.BuildOptions{}) // and crdver-engine beside it
	f := newBenchFixture(b, "rss", envInt("CRDVER_BENCH_RSS_OBJECTS", 2000))
	if os.Getenv("CRDVER_BENCH_RSS_CHECKED") != "" {
		// Every safety check on (BenchmarkSafeMigrate's "checked"): the loss comparison and a
		// dry run per object.
		f.differ(b)
		f.guard(b)
	}
	var maxRSS int64
	f.run(b, func(b *testing.B) {
		cmd := exec.Command(bin, "migrate", f.crd.Name, "--quiet", "--no-trim", "--kubeconfig", env.Kubeconfig,
			"--checkpoint", filepath.Join(b.TempDir(), "cp.json"))
		var out strings.Builder
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Start(); err != nil {
			b.Fatal(err)
		}
		peak := testenv.PeakRSS(cmd) // not the rusage's Maxrss: see PeakRSS
		err := cmd.Wait()
		maxRSS = max(maxRSS, peak())
		if err != nil {
			b.Fatalf("%v\n%s", err, out.String())
		}
	})
	b.ReportMetric(float64(maxRSS)/1024, "peak-RSS-MiB")
}
