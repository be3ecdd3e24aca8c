package clusterengine_test

// Cluster-scale benchmarks behind docs/benchmarks.md ("At cluster scale"): every command that
// reads or rewrites all the objects of one CRD, run as users run it (the built plugin, a child
// process whose peak RSS is its rusage), on 10,000, 100,000 and 1,000,000 objects written
// straight into etcd (testenv.PutObjects: the API server's create path would take hours), beside
// the API server's own LIST of the same objects (the floor no command that reads every object
// can beat).
//
// Each benchmark starts its own control plane (its flags differ from the package's): etcd
// with a 16 GiB quota, kube-apiserver with the StorageVersionMigrator (for --engine cluster),
// kube-controller-manager running its storage-version-migrator controller.
//
//	CRDVER_SCALE_OBJECTS   objects per CRD (required: without it the benchmarks are skipped)
//	CRDVER_SCALE_WATCH_CACHE  "off": kube-apiserver --watch-cache=false (every list is read from
//	                       etcd; the cache would hold a million objects in tens of GB)
//	CRDVER_SCALE_RECORD    append one markdown table row per command to this file
//	CRDVER_SCALE_STEPS     comma-separated subset of the steps (default: all of the benchmark)
//	CRDVER_SCALE_PROFILE   a folder: the API server's CPU profiles (pprof, 30 s slices) during
//	                       each step; with CRDVER_SCALE_INPROC also the command's
//	CRDVER_SCALE_INPROC    set: run the commands in this process (plugin.NewRootCmd) instead of
//	                       the built plugin, with a CPU profile of the whole step and a heap
//	                       profile every 20 s (no RSS: the process is the benchmark's)
//	CRDVER_SCALE_GOGC      GOGC of the commands run (not of the API server)
//	CRDVER_SCALE_GODEBUG   GODEBUG of the commands run (gctrace=1: their live heap after each
//	                       collection, in their stderr and so in CRDVER_SCALE_LOGS)
//	CRDVER_SCALE_LOGS      a folder: each command's stderr (its progress lines), time-stamped,
//	                       and kube-controller-manager's log of the migrate-cluster-engine step
//	CRDVER_SCALE_CONTROLLER_V  kube-controller-manager's --v (4: each retry of the
//	                       StorageVersionMigration controller and each object it migrated)
//	CRDVER_SCALE_CLUSTER_ARGS  more arguments of the migrate-cluster-engine step's command
//	CRDVER_SCALE_RESTORE_ARGS  more arguments of the restore and restore-dry-run steps'
//	                       commands (e.g. --concurrency 8)
//	CRDVER_SCALE_AUDIT     a folder: the API server's audit log of the requests on the objects
//	                       (lists and gets, with their limit, resourceVersion, continue token and
//	                       answer) and on the CRDs (when the API server's cache was rebuilt)
//	CRDVER_SCALE_CEILING   BenchmarkScaleMigrate's write-ceiling steps' concurrencies
//	                       (default "1,8,32")
//	CRDVER_BENCH_BIN       the kubectl-crdver binary to time (default: built from this tree)
//
// BenchmarkScaleRelease: one CRD whose release (testdata written here) makes v1 the storage
// version, removes v1beta1 and drops spec.legacy, which every object holds (issue 38's
// fixture): list floors, plan, convert --from-cluster, upgrade --dry-run, upgrade
// --yes --allow-data-loss (preflight, backup, rewrite, verify), restore --dry-run of that
// backup, then the way back restore's docs give: rewrite-under-release (every object written
// once under the release's CRD, which drops spec.legacy from etcd), upgrade-back (upgrade -f
// of the old release, the CRD as it was) and restore (of the first backup, with writes; every
// object must hold its spec.legacy again). BenchmarkScaleRestore: that restore alone, the
// cluster and the backup as the way back leaves them written through etcd (restore-dry-run,
// restore). BenchmarkScaleMigrate: a CRD of two versions with one schema whose storage version
// is switched to v1 (untimed) before the steps, so that a migration is pending: doctor,
// migrate --dry-run, migrate (client engine), retire --dry-run, retire (back to v1beta1),
// migrate --engine cluster (the in-tree StorageVersionMigration). Before migrate, the
// write-ceiling-C steps: the API server's own rewrite of the same objects (plain client-go
// PUTs of each object unchanged at the storage version, C in flight: the request crdver's
// rewrite sends, without crdver), the ceiling beside migrate's rate.
//
// Every step's row carries the API server's counters (per object: the objects listed from its
// watch cache and from etcd, the requests by verb; counts: LIST requests, etcd lists, watch
// cache initializations) and the CPU time kube-apiserver and etcd used during it.

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"

	"github.com/crdver/kubectl-crdver/internal/pager"
	"github.com/crdver/kubectl-crdver/internal/proc"
	"github.com/crdver/kubectl-crdver/internal/testenv"
	"github.com/crdver/kubectl-crdver/migrate"
	"github.com/crdver/kubectl-crdver/plugin"
	"github.com/crdver/kubectl-crdver/restore"
)

const scaleGroup = "scale.bench.example.com"

// scaleEnv starts the scale benchmarks' control plane (stopped when b ends) and, when
// withController, kube-controller-manager's storage-version-migrator controller.
func scaleEnv(b *testing.B, extraAPIServerArgs ...string) *testenv.Env {
	b.Helper()
	if os.Getenv("CRDVER_SCALE_WATCH_CACHE") == "off" {
		// A million objects in the watch cache take tens of GB of the API server's memory.
		extraAPIServerArgs = append(extraAPIServerArgs, "--watch-cache=false")
	}
	if dir := os.Getenv("CRDVER_SCALE_AUDIT"); dir != "" {
		extraAPIServerArgs = append(extraAPIServerArgs, auditArgs(b, dir)...)
	}
	e, err := testenv.Start(testenv.Options{
		APIServerArgs: append([]string{"--feature-gates=StorageVersionMigrator=true", "--runtime-config=storagemigration.k8s.io/v1beta1=true"}, extraAPIServerArgs...),
		EtcdArgs:      []string{"--quota-backend-bytes=17179869184"},
		ExtraBinaries: []string{"kube-controller-manager"},
	})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(e.Stop)
	return e
}

// auditPolicy logs (metadata only) the reads of the objects and the writes of the CRDs.
const auditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
- level: Metadata
  verbs: ["list", "get", "watch"]
  resources: [{group: "` + scaleGroup + `"}]
- level: Metadata
  verbs: ["create", "update", "patch"]
  resources: [{group: "apiextensions.k8s.io", resources: ["customresourcedefinitions"]}]
- level: None
`

// auditArgs are kube-apiserver's flags for an audit log in dir (CRDVER_SCALE_AUDIT), one file
// per control plane, named by when it started.
func auditArgs(b *testing.B, dir string) []string {
	b.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		b.Fatal(err)
	}
	stamp := time.Now().UTC().Format("150405")
	policy := filepath.Join(dir, "policy-"+stamp+".yaml")
	if err := os.WriteFile(policy, []byte(auditPolicy), 0o644); err != nil {
		b.Fatal(err)
	}
	b.Logf("audit log: %s", filepath.Join(dir, "audit-"+stamp+".log"))
	return []string{"--audit-policy-file=" + policy, "--audit-log-path=" + filepath.Join(dir, "audit-"+stamp+".log"),
		"--audit-log-maxsize=0", "--audit-log-mode=batch"}
}

// scaleSchema is the objects' schema; withLegacy keeps spec.legacy (the field the release drops).
func scaleSchema(withLegacy bool) *apiextensionsv1.CustomResourceValidation {
	spec := apiextensionsv1.JSONSchemaProps{Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{
		"size":        {Type: "integer"},
		"color":       {Type: "string"},
		"tags":        {Type: "array", Items: &apiextensionsv1.JSONSchemaPropsOrArray{Schema: &apiextensionsv1.JSONSchemaProps{Type: "string"}}},
		"description": {Type: "string"},
	}}
	if withLegacy {
		spec.Properties["legacy"] = apiextensionsv1.JSONSchemaProps{Type: "string"}
	}
	return &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
		Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{"spec": spec}}}
}

// scaleCRD is the CRD as it is live: v1beta1 the storage version, v1 served, one schema
// (with spec.legacy).
func scaleCRD(plural, kind string) *apiextensionsv1.CustomResourceDefinition {
	return testenv.TwoVersionCRD(scaleGroup, plural, kind, scaleSchema(true).OpenAPIV3Schema.Properties["spec"])
}

// scaleRelease writes the release of crd into a new folder: v1 the storage version and only
// version, without spec.legacy.
func scaleRelease(b *testing.B, crd *apiextensionsv1.CustomResourceDefinition) string {
	b.Helper()
	rel := crd.DeepCopy()
	rel.Spec.Versions = []apiextensionsv1.CustomResourceDefinitionVersion{{Name: "v1", Served: true, Storage: true, Schema: scaleSchema(false)}}
	return writeRelease(b, rel)
}

const scaleNamespaces = 10

// scaleObject is the i-th object of the CRD (plural, kind) as the API server stores it at
// v1beta1: about 1 KB, with a managedFields entry of its writer at v1beta1.
func scaleObject(plural, kind string, i int) (ns, name string, value []byte) {
	ns = fmt.Sprintf("scale-%02d", i%scaleNamespaces)
	name = fmt.Sprintf("%s-%07d", strings.ToLower(kind), i)
	const ts = "2026-01-01T00:00:00Z"
	obj := map[string]any{
		"apiVersion": scaleGroup + "/v1beta1", "kind": kind,
		"metadata": map[string]any{
			"name": name, "namespace": ns, "uid": fmt.Sprintf("00000000-0000-4000-8000-%012d", i),
			"generation": 1, "creationTimestamp": ts,
			"labels": map[string]any{"app": "scale", "shard": fmt.Sprint(i % 16)},
			"managedFields": []any{map[string]any{
				"manager": "scale-writer", "operation": "Update", "apiVersion": scaleGroup + "/v1beta1", "time": ts, "fieldsType": "FieldsV1",
				"fieldsV1": map[string]any{
					"f:metadata": map[string]any{"f:labels": map[string]any{".": map[string]any{}, "f:app": map[string]any{}, "f:shard": map[string]any{}}},
					"f:spec": map[string]any{".": map[string]any{}, "f:color": map[string]any{}, "f:description": map[string]any{},
						"f:legacy": map[string]any{}, "f:size": map[string]any{}, "f:tags": map[string]any{}},
				},
			}},
		},
		"spec": map[string]any{
			"size": i, "color": []string{"red", "green", "blue"}[i%3], "tags": []any{"alpha", "beta", fmt.Sprintf("t%d", i%100)},
			"description": strings.Repeat(fmt.Sprintf("object %d of the scale benchmark. ", i), 12)[:360],
			"legacy":      fmt.Sprintf("legacy-value-%d", i),
		},
	}
	value, err := json.Marshal(obj)
	if err != nil {
		panic(err)
	}
	return ns, name, value
}

// scaleFixture writes n objects of crd straight into etcd at v1beta1, then creates crd, and
// waits until the API server's watch cache holds all of them. The objects go in first: the
// cache then loads them with its initial list, and is complete when it is ready (written
// after, they would stream in as watch events for minutes while every list with a limit is
// served by etcd instead, which is slower and would distort the first measurements).
func scaleFixture(b *testing.B, e *testenv.Env, crd *apiextensionsv1.CustomResourceDefinition, n int) {
	b.Helper()
	plural, kind := crd.Spec.Names.Plural, crd.Spec.Names.Kind
	scaleFixtureOf(b, e, crd, n, func(i int) (string, string, []byte) { return scaleObject(plural, kind, i) })
}

// scaleFixtureOf is scaleFixture with the objects object gives (scaleObject's namespaces).
func scaleFixtureOf(b *testing.B, e *testenv.Env, crd *apiextensionsv1.CustomResourceDefinition, n int, object func(i int) (ns, name string, value []byte)) {
	b.Helper()
	ctx := context.Background()
	kube := kubernetes.NewForConfigOrDie(e.Config)
	for i := 0; i < scaleNamespaces; i++ {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("scale-%02d", i)}}
		if _, err := kube.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil && !strings.Contains(err.Error(), "already exists") {
			b.Fatal(err)
		}
	}
	start := time.Now()
	plural := crd.Spec.Names.Plural
	if err := e.PutObjects(ctx, scaleGroup, plural, n, object, nil); err != nil {
		b.Fatal(err)
	}
	b.Logf("%s: %d objects written to etcd in %s", crd.Name, n, time.Since(start).Round(time.Second))
	if _, err := e.CreateCRD(ctx, crd); err != nil {
		b.Fatal(err)
	}
	waitCache(b, e, plural, "v1beta1", n)
	size, inUse, _ := e.EtcdSize(ctx)
	b.Logf("%s: in the API server's watch cache %s after the start; etcd db %d MiB (%d MiB in use)", crd.Name, time.Since(start).Round(time.Second), size>>20, inUse>>20)
}

// waitCache waits until the API server's watch cache of plural at version is ready and holds
// n objects (a watch cache is rebuilt, by a list of every object from etcd, on the first
// request after each change of the CRD's spec).
func waitCache(b *testing.B, e *testenv.Env, plural, version string, n int) {
	b.Helper()
	ctx := context.Background()
	// A list with a label selector is never handed to etcd while the watch cache is not
	// ready: its first answer means the cache is; then a list with a limit counts what the
	// cache holds.
	dyn := dynamic.NewForConfigOrDie(e.Config)
	gvr := schema.GroupVersionResource{Group: scaleGroup, Version: version, Resource: plural}
	deadline := time.Now().Add(60 * time.Minute)
	var got int64
	for {
		_, err := dyn.Resource(gvr).List(ctx, metav1.ListOptions{Limit: 1, LabelSelector: "app=scale"})
		if err == nil {
			l, err2 := dyn.Resource(gvr).List(ctx, metav1.ListOptions{Limit: 1})
			if err = err2; err == nil {
				got = int64(len(l.Items))
				if r := l.GetRemainingItemCount(); r != nil {
					got += *r
				}
				if got == int64(n) {
					break
				}
			}
		}
		if time.Now().After(deadline) {
			b.Fatalf("the API server's watch cache does not hold the %d objects of %s.%s after an hour (%d; last error: %v)", n, plural, scaleGroup, got, err)
		}
		time.Sleep(time.Second)
	}
}

// scaleRun is one measured step.
type scaleRun struct {
	b     *testing.B
	e     *testenv.Env
	bin   string
	n     int
	cache string
	steps map[string]bool // nil: all
}

func newScaleRun(b *testing.B, e *testenv.Env, n int) *scaleRun {
	r := &scaleRun{b: b, e: e, bin: buildCommand(b), n: n, cache: b.TempDir()}
	if s := os.Getenv("CRDVER_SCALE_STEPS"); s != "" {
		r.steps = map[string]bool{}
		for _, x := range strings.Split(s, ",") {
			r.steps[strings.TrimSpace(x)] = true
		}
	}
	return r
}

// on reports whether step is to run.
func (r *scaleRun) on(step string) bool { return r.steps == nil || r.steps[step] }

// result of one step.
type scaleResult struct {
	wall, cpu time.Duration
	rssKiB    int64
	exit      int
	stdout    []byte
}

// command runs the built plugin with args as a sub-benchmark named step, accepting the exit
// codes given (0 always), and records its wall time, objects per second (r.n over the wall
// time), CPU time and peak RSS.
func (r *scaleRun) command(step string, exits []int, args ...string) *scaleResult {
	if !r.on(step) {
		return nil
	}
	var res *scaleResult
	r.b.Run(step, func(b *testing.B) {
		if os.Getenv("CRDVER_SCALE_INPROC") != "" {
			res = r.inProcess(b, step, exits, args)
			return
		}
		env := append(os.Environ(), "XDG_CACHE_HOME="+r.cache, "HOME="+r.cache)
		if g := os.Getenv("CRDVER_SCALE_GOGC"); g != "" {
			env = append(env, "GOGC="+g) // the command's only (not the API server's)
		}
		if g := os.Getenv("CRDVER_SCALE_GODEBUG"); g != "" {
			env = append(env, "GODEBUG="+g) // e.g. gctrace=1: the live heap after each collection, in the command's stderr
		}
		before := r.requests()
		stopProfile := r.serverProfile(step)
		load0 := loadAvg()
		cmd := exec.Command(r.bin, append(args, "--kubeconfig", r.e.Kubeconfig)...)
		cmd.Env = env
		var stdout, stderr strings.Builder
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if dir := os.Getenv("CRDVER_SCALE_LOGS"); dir != "" {
			// The command's progress lines, each with the time it was written.
			f, err := os.Create(filepath.Join(dir, fmt.Sprintf("%s-%d.stderr", step, r.n)))
			if err != nil {
				b.Fatal(err)
			}
			defer f.Close()
			cmd.Stderr = io.MultiWriter(&stderr, &stampWriter{w: f})
		}
		start := time.Now()
		if err := cmd.Start(); err != nil {
			b.Fatal(err)
		}
		peak := testenv.PeakRSS(cmd)
		err := cmd.Wait()
		wall := time.Since(start)
		rss := peak()
		stopProfile()
		exit := 0
		if err != nil {
			ee, ok := err.(*exec.ExitError)
			if !ok {
				b.Fatal(err)
			}
			exit = ee.ExitCode()
		}
		if exit != 0 && !slices.Contains(exits, exit) {
			b.Fatalf("%s: exit %d\nstderr:\n%s\nstdout:\n%s", strings.Join(args, " "), exit, tail(stderr.String(), 4000), tail(stdout.String(), 4000))
		}
		res = &scaleResult{wall: wall, cpu: cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime(), exit: exit, stdout: []byte(stdout.String()), rssKiB: rss}
		r.report(b, step, res.wall, res.cpu, res.rssKiB, fmt.Sprintf("exit %d; %s; load %s → %s%s", exit, r.perObject(before, r.requests()), load0, loadAvg(), scaleSetting()))
	})
	return res
}

// stampWriter writes each line with the time it came.
type stampWriter struct {
	w   io.Writer
	mid bool
}

func (s *stampWriter) Write(p []byte) (int, error) {
	for _, line := range strings.SplitAfter(string(p), "\n") {
		if line == "" {
			continue
		}
		if !s.mid {
			fmt.Fprintf(s.w, "%s ", time.Now().UTC().Format("15:04:05"))
		}
		io.WriteString(s.w, line)
		s.mid = !strings.HasSuffix(line, "\n")
	}
	return len(p), nil
}

// inProcess runs the command in this process with CPU and heap profiles (see the top).
func (r *scaleRun) inProcess(b *testing.B, step string, exits []int, args []string) *scaleResult {
	dir := os.Getenv("CRDVER_SCALE_PROFILE")
	if dir == "" {
		dir = b.TempDir()
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		b.Fatal(err)
	}
	b.Setenv("XDG_CACHE_HOME", r.cache) // checkpoints and leases' files: never the user's
	b.Setenv("HOME", r.cache)
	name := func(kind string) string { return filepath.Join(dir, fmt.Sprintf("%s-%d-%s.pprof", step, r.n, kind)) }
	cpuFile, err := os.Create(name("cpu"))
	if err != nil {
		b.Fatal(err)
	}
	defer cpuFile.Close()
	stopServer := r.serverProfile(step)
	before := r.requests()
	stopHeap := make(chan struct{})
	heapDone := make(chan struct{})
	go func() {
		defer close(heapDone)
		t := time.NewTicker(20 * time.Second)
		defer t.Stop()
		for i := 0; ; i++ {
			select {
			case <-stopHeap:
				return
			case <-t.C:
			}
			if f, err := os.Create(name(fmt.Sprintf("heap-%03d", i))); err == nil {
				runtime.GC()
				_ = pprof.WriteHeapProfile(f)
				f.Close()
			}
		}
	}()
	var ru0, ru1 syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru0)
	if err := pprof.StartCPUProfile(cpuFile); err != nil {
		b.Fatal(err)
	}
	streams, _, out, errOut := genericiooptions.NewTestIOStreams()
	root := plugin.NewRootCmd(streams)
	root.SetArgs(append(args, "--kubeconfig", r.e.Kubeconfig))
	start := time.Now()
	err = root.ExecuteContext(context.Background())
	wall := time.Since(start)
	pprof.StopCPUProfile()
	close(stopHeap)
	<-heapDone
	stopServer()
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru1)
	exit := plugin.ExitCode(err)
	if exit != 0 && !slices.Contains(exits, exit) {
		b.Fatalf("%s: exit %d (%v)\nstderr:\n%s", strings.Join(args, " "), exit, err, tail(errOut.String(), 4000))
	}
	cpu := time.Duration(ru1.Utime.Nano()+ru1.Stime.Nano()-ru0.Utime.Nano()-ru0.Stime.Nano()) * time.Nanosecond
	r.report(b, step, wall, cpu, 0, fmt.Sprintf("exit %d, in-process, profiles in %s; %s", exit, dir, r.perObject(before, r.requests())))
	return &scaleResult{wall: wall, cpu: cpu, exit: exit, stdout: out.Bytes()}
}

// requests scrapes the API server's counters of the requests on the CRD's objects (every
// resource of scaleGroup) and of the objects its lists returned: "LIST", "GET", "PUT",
// "PUT dry-run", "PATCH", "APPLY", "listed" (from the watch cache and from etcd: "listed
// cache", "listed etcd": before 1.37 in two counters, from 1.37 in one by its label storage,
// beside the older one counting the cache's again), "cache lists" and "etcd lists" (the API
// server's list calls to its watch cache and to etcd, a page each), "cache inits" (its watch
// cache of a resource (re)built), "cache init errors" (a (re)build that failed and started
// again), "consistency checks" (its watch cache compared with etcd, a list of every object
// from each: 1.37); and the CPU time kube-apiserver and etcd used so far: "apiserver cpu-s", "etcd cpu-s".
func (r *scaleRun) requests() map[string]float64 {
	out := r.counters()
	api, etcd, err := r.e.ServerPIDs()
	if err != nil {
		r.b.Fatal(err)
	}
	for k, pid := range map[string]int{"apiserver cpu-s": api, "etcd cpu-s": etcd} {
		st, err := proc.ReadStat(pid)
		if err != nil {
			r.b.Fatal(err)
		}
		out[k] = float64(st.CPUTicks) / clockTicks
	}
	return out
}

// clockTicks is the kernel's USER_HZ, the unit of /proc/PID/stat's CPU times (100 on Linux).
const clockTicks = 100

// counters scrapes the API server's metrics for requests.
func (r *scaleRun) counters() map[string]float64 {
	hc, err := rest.HTTPClientFor(r.e.Config)
	if err != nil {
		r.b.Fatal(err)
	}
	resp, err := hc.Get(strings.TrimSuffix(r.e.Config.Host, "/") + "/metrics")
	if err != nil {
		r.b.Fatal(err)
	}
	defer resp.Body.Close()
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, 1<<16), 1<<22)
	for sc.Scan() {
		line := sc.Text()
		name, rest, ok := strings.Cut(line, "{")
		if !ok || !strings.Contains(rest, scaleGroup) {
			continue
		}
		i := strings.LastIndexByte(rest, ' ')
		var v float64
		if _, err := fmt.Sscan(rest[i+1:], &v); err != nil {
			continue
		}
		switch name {
		case "apiserver_request_total":
			verb := labelOf(rest, "verb")
			if labelOf(rest, "dry_run") != "" {
				verb += " dry-run"
			}
			if labelOf(rest, "subresource") == "" {
				out[verb] += v
				if strings.HasPrefix(labelOf(rest, "code"), "2") {
					out[verb+" ok"] += v
				}
			}
		case "apiserver_cache_list_returned_objects_total":
			// The watch cache's own counter; from 1.37 (where it is deprecated) the one below
			// counts the same objects again under storage="watchcache".
			out["listed cache (old)"] += v
		case "apiserver_storage_list_returned_objects_total":
			if labelOf(rest, "storage") == "watchcache" {
				out["listed cache"] += v
			} else {
				out["listed etcd"] += v
			}
		case "apiserver_storage_list_total":
			if labelOf(rest, "storage") == "watchcache" {
				out["cache lists"] += v
			} else {
				out["etcd lists"] += v
			}
		case "apiserver_watch_cache_initializations_total":
			out["cache inits"] += v
		case "apiserver_watch_cache_initialization_errors_total":
			out["cache init errors"] += v
		case "apiserver_storage_consistency_checks_total":
			// 1.37: every 5–7.5 minutes per watch cache, a list of every object from the
			// cache and then from etcd (pages of 10,000) to compare their digests.
			out["consistency checks"] += v
		}
	}
	if out["listed cache"] == 0 {
		out["listed cache"] = out["listed cache (old)"]
	}
	out["listed"] = out["listed cache"] + out["listed etcd"]
	return out
}

func labelOf(labels, name string) string {
	_, v, ok := strings.Cut(labels, name+`="`)
	if !ok {
		return ""
	}
	v, _, _ = strings.Cut(v, `"`)
	return v
}

// perObject words the requests between two scrapes per object: "listed 3.00/object, LIST 60
// requests, GET 0.00/object, PUT 1.00/object, …".
func (r *scaleRun) perObject(before, after map[string]float64) string {
	var parts []string
	for _, k := range []string{"listed", "listed cache", "listed etcd", "LIST", "cache lists", "etcd lists", "cache inits", "cache init errors", "consistency checks", "GET", "PUT", "PUT dry-run", "PATCH", "PATCH dry-run", "APPLY", "APPLY dry-run"} {
		d := (after[k] - before[k]) / float64(r.n)
		switch k {
		case "LIST":
			parts = append(parts, fmt.Sprintf("%s %.0f requests", k, after[k]-before[k]))
		case "cache lists", "etcd lists", "cache inits", "cache init errors", "consistency checks":
			parts = append(parts, fmt.Sprintf("%s %.0f", k, after[k]-before[k]))
		default:
			parts = append(parts, fmt.Sprintf("%s %.2f/object", k, d))
		}
	}
	parts = append(parts, fmt.Sprintf("server CPU: kube-apiserver %.1f s, etcd %.1f s",
		after["apiserver cpu-s"]-before["apiserver cpu-s"], after["etcd cpu-s"]-before["etcd cpu-s"]))
	return strings.Join(parts, ", ")
}

// report records one step's figures as metrics and, with CRDVER_SCALE_RECORD, as a table row.
func (r *scaleRun) report(b *testing.B, step string, wall, cpu time.Duration, rssKiB int64, note string) {
	rate := float64(r.n) / wall.Seconds()
	b.ReportMetric(rate, "objects/s")
	b.ReportMetric(wall.Seconds(), "wall-s")
	b.ReportMetric(cpu.Seconds(), "cpu-s")
	if rssKiB > 0 {
		b.ReportMetric(float64(rssKiB)/1024, "peak-RSS-MiB")
	}
	b.ReportMetric(float64(wall.Microseconds())/float64(r.n), "µs/object")
	rss := "—"
	if rssKiB > 0 {
		rss = fmt.Sprintf("%.0f", float64(rssKiB)/1024)
	}
	b.Logf("%s, %d objects: %.1f s, %.0f objects/s, %.1f cpu-s, peak RSS %s MiB (%s)", step, r.n, wall.Seconds(), rate, cpu.Seconds(), rss, note)
	if path := os.Getenv("CRDVER_SCALE_RECORD"); path != "" {
		f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
		if err != nil {
			b.Fatal(err)
		}
		defer f.Close()
		fmt.Fprintf(f, "| %s | %s | %d | %.1f | %.0f | %.1f | %s | %s |\n", time.Now().UTC().Format("2006-01-02 15:04"), step, r.n, wall.Seconds(), rate, cpu.Seconds(), rss, note)
	}
}

// serverProfile starts a CPU profile of the API server for step when CRDVER_SCALE_PROFILE is
// set (the profile runs until the returned function is called, at most 10 minutes).
func (r *scaleRun) serverProfile(step string) func() {
	dir := os.Getenv("CRDVER_SCALE_PROFILE")
	if dir == "" {
		return func() {}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		r.b.Fatal(err)
	}
	hc, err := rest.HTTPClientFor(r.e.Config)
	if err != nil {
		r.b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		// pprof writes a profile only at the end of its seconds: take 30 s slices until the
		// step ends (the slice cut short by the end is lost).
		for i := 0; ctx.Err() == nil; i++ {
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(r.e.Config.Host, "/")+"/debug/pprof/profile?seconds=30", nil)
			if err != nil {
				return
			}
			resp, err := hc.Do(req)
			if err != nil {
				return
			}
			body, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil || resp.StatusCode != http.StatusOK {
				return
			}
			_ = os.WriteFile(filepath.Join(dir, fmt.Sprintf("apiserver-%s-%d-%02d.pprof", step, r.n, i)), body, 0o644)
		}
	}()
	return func() { cancel(); <-done }
}

// listFloor times a paged LIST (pages of limit) of every object at version, as the API server
// answers it: the raw bytes are read and only the continue token is decoded (raw), or every
// page is decoded by the dynamic client as the commands do (decoded).
func (r *scaleRun) listFloor(step, plural, version string, decoded bool, limit int64) {
	r.timed(step, func(b *testing.B) string {
		ctx := context.Background()
		n := 0
		gvr := schema.GroupVersionResource{Group: scaleGroup, Version: version, Resource: plural}
		if decoded {
			dyn := dynamic.NewForConfigOrDie(unlimited(r.e.Config))
			err := pager.Each(ctx, pager.Dynamic(dyn.Resource(gvr), pager.Options{Limit: limit}), func(l *unstructured.UnstructuredList) error {
				n += len(l.Items)
				return nil
			})
			if err != nil {
				b.Fatal(err)
			}
		} else {
			hc, err := rest.HTTPClientFor(r.e.Config)
			if err != nil {
				b.Fatal(err)
			}
			cont := ""
			for attempt := 1; ; {
				url := fmt.Sprintf("%s/apis/%s/%s/%s?limit=%d", strings.TrimSuffix(r.e.Config.Host, "/"), scaleGroup, version, plural, limit)
				if cont != "" {
					url += "&continue=" + cont
				}
				resp, err := hc.Get(url)
				if err != nil {
					b.Fatal(err)
				}
				var page struct {
					Metadata struct {
						Continue string `json:"continue"`
					} `json:"metadata"`
					Items []struct{} `json:"items"`
				}
				// 410 Gone: etcd compacted past the token (a list of a million objects outlasts
				// the API server's 5-minute compaction); the Status carries the token to
				// resume from, as the pager takes it.
				err = json.NewDecoder(bufio.NewReaderSize(resp.Body, 1<<20)).Decode(&page)
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode == http.StatusGone && page.Metadata.Continue != "" && cont != "" {
					cont = page.Metadata.Continue
					continue
				}
				if (resp.StatusCode >= 500 || resp.StatusCode == http.StatusTooManyRequests) && attempt < pager.DefaultMaxAttempts {
					// As the commands do (pager.Retryable): e.g. 504 while the watch cache
					// catches up with objects written straight into etcd.
					time.Sleep(pager.Backoff(nil, attempt))
					attempt++
					continue
				}
				if err != nil || resp.StatusCode != http.StatusOK {
					b.Fatalf("listing: %d %v", resp.StatusCode, err)
				}
				attempt = 1
				n += len(page.Items)
				if cont = page.Metadata.Continue; cont == "" {
					break
				}
			}
		}
		if n != r.n {
			b.Fatalf("listed %d objects, want %d", n, r.n)
		}
		return "in-process client"
	})
}

// timed runs body as the sub-benchmark step, in this process (the benchmark's own client: the
// list floors, the write ceiling), and reports its wall and CPU time, the API server's
// counters and CPU time during it, and the load; body returns what the row says of the client.
func (r *scaleRun) timed(step string, body func(b *testing.B) string) bool {
	if !r.on(step) {
		return false
	}
	return r.b.Run(step, func(b *testing.B) {
		stopProfile := r.serverProfile(step)
		defer stopProfile()
		load0 := loadAvg()
		before := r.requests()
		var ru0, ru1 syscall.Rusage
		_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru0)
		start := time.Now()
		client := body(b)
		wall := time.Since(start)
		_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru1)
		cpu := time.Duration(ru1.Utime.Nano()+ru1.Stime.Nano()-ru0.Utime.Nano()-ru0.Stime.Nano()) * time.Nanosecond
		r.report(b, step, wall, cpu, 0, fmt.Sprintf("%s; %s; load %s → %s%s", client, r.perObject(before, r.requests()), load0, loadAvg(), scaleSetting()))
	})
}

// writeCeiling is step "write-ceiling-C": every object of plural, stored at another version
// than version (the storage version), written back unchanged at version by plain client-go
// PUTs, C in flight, as the pages of one paged list of them come (the request crdver's
// rewrite sends, with none of its checks, its adaptive limit or its checkpoint): the rate the
// API server and etcd write these objects at, the ceiling of migrate's. It reports whether
// it ran; the caller checks what etcd then holds.
func (r *scaleRun) writeCeiling(c int, plural, version string) bool {
	return r.timed(fmt.Sprintf("write-ceiling-%d", c), func(b *testing.B) string {
		ctx := context.Background()
		res := dynamic.NewForConfigOrDie(unlimited(r.e.Config)).Resource(schema.GroupVersionResource{Group: scaleGroup, Version: version, Resource: plural})
		objects := make(chan *unstructured.Unstructured, 2*c)
		var written, failed atomic.Int64
		var firstErr atomic.Value
		var wg sync.WaitGroup
		for i := 0; i < c; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for u := range objects {
					// Its managedFields entries relabelled to version, as crdver's rewrite
					// sends them (ownership.ToVersion; one schema: a relabel): left at
					// v1beta1, the API server's field manager converts them on every write
					// (measured: 3.3 against 2.4 CPU-ms per write, docs/benchmarks.md).
					mf := u.GetManagedFields()
					for i := range mf {
						if gv, err := schema.ParseGroupVersion(mf[i].APIVersion); err == nil && gv.Group == scaleGroup {
							mf[i].APIVersion = scaleGroup + "/" + version
						}
					}
					u.SetManagedFields(mf)
					if _, err := res.Namespace(u.GetNamespace()).Update(ctx, u, metav1.UpdateOptions{}); err != nil {
						failed.Add(1)
						firstErr.CompareAndSwap(nil, err.Error())
						continue
					}
					written.Add(1)
				}
			}()
		}
		err := pager.Each(ctx, pager.Dynamic(res, pager.Options{}), func(l *unstructured.UnstructuredList) error {
			for i := range l.Items {
				objects <- &l.Items[i]
			}
			return nil
		})
		close(objects)
		wg.Wait()
		if err != nil {
			b.Fatal(err)
		}
		if written.Load() != int64(r.n) {
			b.Fatalf("%d objects written, %d failed (first: %v), want %d written", written.Load(), failed.Load(), firstErr.Load(), r.n)
		}
		return fmt.Sprintf("in-process client, %d in flight", c)
	})
}

// unlimited is c without client-side rate limit (the commands' clients have none either).
func unlimited(c *rest.Config) *rest.Config {
	cfg := rest.CopyConfig(c)
	cfg.QPS, cfg.Burst = -1, 0
	return cfg
}

// scaleSetting words the control plane's settings that change the figures, for each row:
// "; watch cache off" (nothing with the watch cache on). Without the watch cache a
// StorageVersionMigration can wait many minutes before its first write (docs/benchmarks.md).
func scaleSetting() string {
	if os.Getenv("CRDVER_SCALE_WATCH_CACHE") == "off" {
		return "; watch cache off"
	}
	return ""
}

func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	if len(f) < 1 {
		return "?"
	}
	return f[0]
}

// scaleObjects is CRDVER_SCALE_OBJECTS; without it the scale benchmarks are skipped (each
// takes from minutes to hours, and runs each step once: -benchtime 1x).
func scaleObjects(b *testing.B) int {
	n := envInt("CRDVER_SCALE_OBJECTS", 0)
	if n == 0 {
		b.Skip("set CRDVER_SCALE_OBJECTS (10000, 100000, 1000000) to run the scale benchmarks, with -benchtime 1x")
	}
	return n
}

// BenchmarkScaleRelease: see the top of this file.
func BenchmarkScaleRelease(b *testing.B) {
	n := scaleObjects(b)
	e := scaleEnv(b)
	crd := scaleCRD("items", "Item")
	scaleFixture(b, e, crd, n)
	rel := scaleRelease(b, crd)
	r := newScaleRun(b, e, n)
	work := b.TempDir()
	backup := filepath.Join(work, "backup.yaml")

	r.listFloor("list-raw", "items", "v1beta1", false, 500)
	r.listFloor("list-raw-2000", "items", "v1beta1", false, 2000)
	r.listFloor("list-raw-5000", "items", "v1beta1", false, 5000)
	r.listFloor("list-decoded", "items", "v1beta1", true, 500)
	r.command("plan", []int{1}, "plan", "-f", rel, "-o", "json", "--progress-interval", "1m")
	r.command("convert", []int{1}, "convert", crd.Name, "--to", "v1", "--from-cluster", "-A", "-o", "json")
	r.command("upgrade-dry-run", []int{1}, "upgrade", "-f", rel, "--dry-run", "-o", "json")
	if r.command("upgrade", nil, "upgrade", "-f", rel, "--yes", "--allow-data-loss", "--backup", backup,
		"--checkpoint", filepath.Join(work, "cp"), "-o", "json", "--progress-interval", "1m") != nil {
		got, _, err := e.StoredAPIVersions(context.Background(), scaleGroup, "items")
		if err != nil || len(got) != 1 || got[scaleGroup+"/v1"] != n {
			b.Fatalf("after the upgrade etcd holds %v, want all %d at v1", got, n)
		}
		if st, err := os.Stat(backup); err == nil {
			b.Logf("backup: %d MiB", st.Size()>>20)
		}
	}
	if _, err := os.Stat(backup); err != nil {
		return
	}
	restoreArgs := strings.Fields(os.Getenv("CRDVER_SCALE_RESTORE_ARGS"))
	r.command("restore-dry-run", []int{1}, append([]string{"restore", "-f", backup, "--dry-run", "-o", "json"}, restoreArgs...)...)
	// The backup restored with writes, the way back restore's docs and its advice give
	// (docs/commands/restore.md: the release's CRD holds no spec.legacy, so first `upgrade -f
	// OLD-RELEASE`, then `restore -f BACKUP`): every object must hold its spec.legacy again.
	// The upgrade rewrote the objects while the live v1 still had spec.legacy, so etcd still
	// holds it until each object is next written; rewrite-under-release is that write (every
	// object once under the release's CRD, as the objects' controllers would in time), without
	// which the old release would show the field again and restore would have nothing to write.
	r.command("rewrite-under-release", nil, "migrate", crd.Name, "--to", "v1", "--yes", "--quiet", "-o", "json",
		"--checkpoint", filepath.Join(work, "cp-rewrite"))
	old := writeRelease(b, crd)
	r.command("upgrade-back", nil, "upgrade", "-f", old, "--yes", "--backup", filepath.Join(work, "backup-back.yaml"),
		"--checkpoint", filepath.Join(work, "cp-back"), "-o", "json", "--progress-interval", "1m")
	if r.command("restore", nil, append([]string{"restore", "-f", backup, "--yes", "-o", "json", "--quiet"}, restoreArgs...)...) != nil {
		r.checkLegacy("items", "v1beta1")
	}
}

// BenchmarkScaleRestore: restore with writes at any size, set up through etcd as
// BenchmarkScaleRelease's way back leaves the cluster (upgrade --allow-data-loss, every object
// written under the release, upgrade -f OLD-RELEASE: three commands over every object first,
// about two hours at a million here): the old release's CRD live, every object stored at
// v1beta1 without its spec.legacy, and the backup that upgrade writes (each object at v1beta1
// with its spec.legacy and its metadata as the API server answered it, the header naming this
// cluster, the closing line counting the documents). Steps restore-dry-run and restore; then
// every object must hold its spec.legacy again.
func BenchmarkScaleRestore(b *testing.B) {
	n := scaleObjects(b)
	e := scaleEnv(b)
	crd := scaleCRD("items", "Item")
	plural, kind := crd.Spec.Names.Plural, crd.Spec.Names.Kind
	scaleFixtureOf(b, e, crd, n, func(i int) (string, string, []byte) {
		ns, name, value := scaleObject(plural, kind, i)
		var obj map[string]any
		if err := json.Unmarshal(value, &obj); err != nil {
			panic(err)
		}
		unstructured.RemoveNestedField(obj, "spec", "legacy")
		mf, _, _ := unstructured.NestedSlice(obj, "metadata", "managedFields")
		unstructured.RemoveNestedField(mf[0].(map[string]any), "fieldsV1", "f:spec", "f:legacy")
		_ = unstructured.SetNestedSlice(obj, mf, "metadata", "managedFields")
		value, err := json.Marshal(obj)
		if err != nil {
			panic(err)
		}
		return ns, name, value
	})
	backup := filepath.Join(b.TempDir(), "backup.yaml")
	start := time.Now()
	writeScaleBackup(b, e, backup, plural, kind, n)
	if st, err := os.Stat(backup); err == nil {
		b.Logf("backup of %d objects written in %s: %d MiB", n, time.Since(start).Round(time.Second), st.Size()>>20)
	}
	r := newScaleRun(b, e, n)
	restoreArgs := strings.Fields(os.Getenv("CRDVER_SCALE_RESTORE_ARGS"))
	r.command("restore-dry-run", nil, append([]string{"restore", "-f", backup, "--dry-run", "-o", "json", "--progress-interval", "1m"}, restoreArgs...)...)
	if r.command("restore", nil, append([]string{"restore", "-f", backup, "--yes", "-o", "json", "--progress-interval", "1m"}, restoreArgs...)...) != nil {
		r.checkLegacy(plural, "v1beta1")
	}
}

// writeScaleBackup writes the backup an upgrade of the n objects of BenchmarkScaleRestore's CRD
// would have written (upgrade's backup step: header, "# plural.version.group", one YAML
// document per object as the API server answers it, closing line).
func writeScaleBackup(b *testing.B, e *testenv.Env, file, plural, kind string, n int) {
	b.Helper()
	ks, err := kubernetes.NewForConfigOrDie(e.Config).CoreV1().Namespaces().Get(context.Background(), "kube-system", metav1.GetOptions{})
	if err != nil {
		b.Fatal(err)
	}
	f, err := os.Create(file)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	w := bufio.NewWriterSize(f, 1<<20)
	fmt.Fprint(w, restore.BackupHeader(string(ks.UID), e.Config.Host, "scale-restore-bench"))
	fmt.Fprintf(w, "# %s.v1beta1.%s\n", plural, scaleGroup)
	for i := 0; i < n; i++ {
		_, _, value := scaleObject(plural, kind, i)
		var obj map[string]any
		if err := json.Unmarshal(value, &obj); err != nil {
			b.Fatal(err)
		}
		_ = unstructured.SetNestedField(obj, strconv.Itoa(1000+i), "metadata", "resourceVersion")
		y, err := yaml.Marshal(obj)
		if err != nil {
			b.Fatal(err)
		}
		fmt.Fprintf(w, "---\n%s", y)
	}
	fmt.Fprint(w, restore.BackupTrailer(int64(n)))
	if err := w.Flush(); err != nil {
		b.Fatal(err)
	}
	if err := f.Close(); err != nil {
		b.Fatal(err)
	}
}

// checkLegacy fails b unless every object of plural, read at version, holds the spec.legacy
// the fixture wrote (scaleObject).
func (r *scaleRun) checkLegacy(plural, version string) {
	ctx := context.Background()
	res := dynamic.NewForConfigOrDie(unlimited(r.e.Config)).Resource(schema.GroupVersionResource{Group: scaleGroup, Version: version, Resource: plural})
	held, seen := 0, 0
	var wrong []string
	err := pager.Each(ctx, pager.Dynamic(res, pager.Options{}), func(l *unstructured.UnstructuredList) error {
		for i := range l.Items {
			seen++
			name := l.Items[i].GetName()
			k := -1
			if j := strings.LastIndexByte(name, '-'); j >= 0 {
				if v, err := strconv.Atoi(name[j+1:]); err == nil { // decimal: the names' zeros are padding
					k = v
				}
			}
			if v, _, _ := unstructured.NestedString(l.Items[i].Object, "spec", "legacy"); v == fmt.Sprintf("legacy-value-%d", k) {
				held++
			} else if len(wrong) < 5 {
				wrong = append(wrong, fmt.Sprintf("%s/%s: %q", l.Items[i].GetNamespace(), name, v))
			}
		}
		return nil
	})
	if err != nil {
		r.b.Fatal(err)
	}
	if held != r.n || seen != r.n {
		r.b.Fatalf("after the restore %d of %d objects (%d listed) hold their spec.legacy; first others: %s", held, r.n, seen, strings.Join(wrong, ", "))
	}
	r.b.Logf("after the restore all %d objects hold their spec.legacy", held)
}

// BenchmarkScaleMigrate: see the top of this file.
func BenchmarkScaleMigrate(b *testing.B) {
	n := scaleObjects(b)
	e := scaleEnv(b)
	crd := scaleCRD("gadgets", "Gadget")
	scaleFixture(b, e, crd, n)
	r := newScaleRun(b, e, n)
	work := b.TempDir()
	check := func(v string) {
		got, _, err := e.StoredAPIVersions(context.Background(), scaleGroup, "gadgets")
		if err != nil || len(got) != 1 || got[scaleGroup+"/"+v] != n {
			b.Fatalf("etcd holds %v, want all %d at %s", got, n, v)
		}
	}
	r.listFloor("list-raw", "gadgets", "v1beta1", false, 500)
	// v1 the storage version, every object still stored at v1beta1 (a pending migration):
	// doctor's storage and data-loss checks then read every object.
	c, err := migrate.NewClients(e.Config)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := migrate.SwitchStorage(context.Background(), c, crd.Name, "v1"); err != nil {
		b.Fatal(err)
	}
	r.command("doctor", []int{1}, "doctor", crd.Name, "-o", "json")
	r.command("migrate-dry-run", nil, "migrate", crd.Name, "--to", "v1", "--dry-run", "-o", "json")
	// The write ceiling beside migrate: each pass writes every object from v1beta1 to v1, after
	// they are put back at v1beta1 in etcd as the fixture wrote them (untimed; so is the same
	// reset before migrate, after the last pass), so that every pass and migrate start alike.
	reset := func() {
		if err := e.PutObjects(context.Background(), scaleGroup, "gadgets", n, func(i int) (string, string, []byte) { return scaleObject("gadgets", "Gadget", i) }, nil); err != nil {
			b.Fatal(err)
		}
		check("v1beta1")
		// The watch caches rebuilt after the storage switch, before the pass, not during it.
		waitCache(b, e, "gadgets", "v1beta1", n)
		waitCache(b, e, "gadgets", "v1", n)
	}
	// retire-old, only when CRDVER_SCALE_STEPS names it: v1beta1 retired as a user retires it
	// with the migration pending — every object rewritten at v1, storedVersions trimmed, the
	// managedFields entries moved — rather than migrate, then retire back (the steps below; after
	// it, migrate has nothing to write).
	if r.steps["retire-old"] {
		if r.command("retire-old", nil, "retire", crd.Name, "v1beta1", "--to", "v1", "--yes", "-o", "json", "--progress-interval", "1m") != nil {
			check("v1")
		}
	}
	ceilings := 0
	for _, f := range strings.Split(envString("CRDVER_SCALE_CEILING", "1,8,32"), ",") {
		var c int
		if _, err := fmt.Sscan(strings.TrimSpace(f), &c); err != nil || c < 1 {
			b.Fatalf("CRDVER_SCALE_CEILING: %q is not a concurrency", f)
		}
		if !r.on(fmt.Sprintf("write-ceiling-%d", c)) {
			continue
		}
		reset()
		ceilings++
		if r.writeCeiling(c, "gadgets", "v1") {
			check("v1")
		}
	}
	if ceilings > 0 {
		reset()
	}
	if r.command("migrate", nil, "migrate", crd.Name, "--to", "v1", "--yes", "--progress-interval", "1m", "-o", "json",
		"--checkpoint", filepath.Join(work, "cp-migrate")) != nil {
		check("v1")
	}
	r.command("retire-dry-run", nil, "retire", crd.Name, "v1", "--to", "v1beta1", "--dry-run", "-o", "json")
	if r.command("retire", nil, "retire", crd.Name, "v1", "--to", "v1beta1", "--yes", "--quiet", "-o", "json") != nil {
		check("v1beta1")
	}
	if r.on("migrate-cluster-engine") {
		var cmArgs []string
		if v := os.Getenv("CRDVER_SCALE_CONTROLLER_V"); v != "" {
			cmArgs = append(cmArgs, "--v="+v)
		}
		cm, err := e.StartStorageVersionMigrator(cmArgs...)
		if err != nil {
			b.Fatal(err)
		}
		defer cm.Stop()
		if dir := os.Getenv("CRDVER_SCALE_LOGS"); dir != "" {
			// kube-controller-manager's log: when the StorageVersionMigration controller
			// started, retried (and why) and finished.
			defer func() {
				_ = os.WriteFile(filepath.Join(dir, fmt.Sprintf("kube-controller-manager-%d.log", n)), []byte(cm.Logs()), 0o644)
			}()
		}
		args := append([]string{"migrate", crd.Name, "--to", "v1", "--engine", "cluster", "--yes", "-o", "json", "--progress-interval", "10s"}, strings.Fields(os.Getenv("CRDVER_SCALE_CLUSTER_ARGS"))...)
		if r.command("migrate-cluster-engine", nil, args...) != nil {
			check("v1")
		}
	}
}

// BenchmarkScaleCompaction: plan, upgrade and migrate over CRDVER_SCALE_OBJECTS objects (the
// recorded run: 100,000) while etcd is compacted every CRDVER_SCALE_COMPACT_EVERY (default
// 5s), on an API server whose continued lists are read from etcd (ListFromCacheSnapshot off:
// a compacted continue token then expires at once, as it does on any cluster minutes into a
// list). Each command must complete; etcd must hold every object at v1; the API server must
// have seen exactly one write per object (its PUT counter), and the commands' reports count
// the expired continue tokens they followed.
func BenchmarkScaleCompaction(b *testing.B) {
	n := scaleObjects(b)
	every, err := time.ParseDuration(envString("CRDVER_SCALE_COMPACT_EVERY", "5s"))
	if err != nil {
		b.Fatal(err)
	}
	e := scaleEnv(b, "--feature-gates=ListFromCacheSnapshot=false")
	release := scaleCRD("items", "Item")
	scaleFixture(b, e, release, n)
	rel := scaleRelease(b, release)
	plain := scaleCRD("gadgets", "Gadget")
	scaleFixture(b, e, plain, n)
	r := newScaleRun(b, e, n)
	work := b.TempDir()
	stop := e.CompactEvery(every)
	defer func() {
		if k, err := stop(); err != nil || k == 0 {
			b.Errorf("%d compactions, %v", k, err)
		} else {
			b.Logf("etcd compacted %d times", k)
		}
	}()
	writes := func(before, after map[string]float64) float64 { return after["PUT ok"] - before["PUT ok"] }
	check := func(plural string) {
		got, _, err := e.StoredAPIVersions(context.Background(), scaleGroup, plural)
		if err != nil || len(got) != 1 || got[scaleGroup+"/v1"] != n {
			b.Fatalf("etcd holds %v (%v), want all %d at v1", got, err, n)
		}
	}
	r.command("plan", []int{1}, "plan", "-f", rel, "-o", "json")
	before := r.requests()
	if res := r.command("upgrade", nil, "upgrade", "-f", rel, "--yes", "--allow-data-loss", "--backup", filepath.Join(work, "backup.yaml"),
		"--checkpoint", filepath.Join(work, "cp"), "-o", "json", "--quiet"); res != nil {
		check("items")
		if w := writes(before, r.requests()); w != float64(n) {
			b.Errorf("upgrade: the API server saw %.0f writes of the objects, want one each (%d)", w, n)
		}
	}
	before = r.requests()
	if res := r.command("migrate", nil, "migrate", plain.Name, "--to", "v1", "--yes", "--quiet", "-o", "json", "--checkpoint", filepath.Join(work, "cp-migrate")); res != nil {
		check("gadgets")
		if w := writes(before, r.requests()); w != float64(n) {
			b.Errorf("migrate: the API server saw %.0f writes of the objects, want one each (%d)", w, n)
		}
		var rep struct {
			Result struct {
				ExpiredContinues int64 `json:"expiredContinues"`
				Rewritten        int64 `json:"rewritten"`
			} `json:"result"`
		}
		if err := json.Unmarshal(res.stdout, &rep); err != nil || rep.Result.Rewritten != int64(n) {
			b.Errorf("migrate's report: %+v, %v", rep, err)
		}
		b.Logf("migrate followed %d expired continue tokens", rep.Result.ExpiredContinues)
	}
}
