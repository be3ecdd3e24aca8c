package plan

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	crdinfo "github.com/crdver/kubectl-crdver/crd"
	"github.com/crdver/kubectl-crdver/internal/testcrd"
	"github.com/crdver/kubectl-crdver/internal/testenv"
	"github.com/crdver/kubectl-crdver/internal/testwebhook"
	"github.com/crdver/kubectl-crdver/kubeversion"
)

// genSource generates n Widgets a page at a time (nothing is held beyond a page): a third
// keep a removed field, some exceed the new maximum, some lack the field a new default fills.
type genSource struct {
	n, pos, page int
	// entries is the version of every object's managedFields entry ("" v1); of every other
	// object it then owns a field the object no longer holds (the rewrite must read the
	// object at that version to move it).
	entries string
}

func (s *genSource) Total() int64 { return int64(s.n) }

func (s *genSource) Next(ctx context.Context) ([]unstructured.Unstructured, error) {
	if s.pos >= s.n {
		return nil, io.EOF
	}
	end := min(s.pos+s.page, s.n)
	out := make([]unstructured.Unstructured, 0, end-s.pos)
	for i := s.pos; i < end; i++ {
		spec := map[string]any{"size": int64(2 * (i % 8)), "tier": "gold", "owner": "team-" + strconv.Itoa(i%5)}
		if i%3 == 0 {
			spec["legacy"] = "value-" + strconv.Itoa(i)
		}
		if i%4 != 0 {
			spec["mode"] = "b"
		}
		out = append(out, unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "plan.example.com/v1", "kind": "Widget",
			"metadata": map[string]any{"name": fmt.Sprintf("w-%06d", i), "namespace": "ns-" + strconv.Itoa(i%10),
				"uid": fmt.Sprintf("00000000-0000-4000-8000-%012d", i), "resourceVersion": strconv.Itoa(1000 + i), "generation": int64(1),
				"labels":        map[string]any{"app": "bench"},
				"managedFields": s.managedFields(i)},
			"spec":   spec,
			"status": map[string]any{"phase": "Ready"},
		}})
	}
	s.pos = end
	return out, nil
}

func (s *genSource) managedFields(i int) []any {
	v, owned := "v1", map[string]any{"f:spec": map[string]any{"f:size": map[string]any{}}}
	if s.entries != "" {
		v = s.entries
		if i%2 == 0 {
			owned = map[string]any{"f:spec": map[string]any{"f:gone": map[string]any{}}}
		}
	}
	return []any{map[string]any{"manager": "widget-controller", "operation": "Update", "apiVersion": "plan.example.com/" + v,
		"fieldsType": "FieldsV1", "fieldsV1": owned}}
}

// BenchmarkEvaluate evaluates the same 2,000 objects with one worker (the single-core preview
// rate) and with one worker per core. Compare the objects/s metrics (docs/benchmarks.md#plan).
func BenchmarkEvaluate(b *testing.B) {
	live := readCRD(b, filepath.Join("testdata", "widgets-old.yaml"))
	next := readCRD(b, filepath.Join("testdata", "widgets-new.yaml"))
	const n = 2000
	run := func(b *testing.B, workers int, kube kubeversion.Version, entries string) {
		var evaluated int64
		cpu0 := cpuTime()
		start := time.Now()
		for i := 0; i < b.N; i++ {
			it, err := Plan(context.Background(), live, next, &genSource{n: n, page: 500, entries: entries}, Options{Workers: workers, KubeVersion: kube})
			if err != nil {
				b.Fatal(err)
			}
			if it.Objects.Evaluated != n || len(it.Objects.Findings) == 0 {
				b.Fatalf("evaluated %d, %d findings", it.Objects.Evaluated, len(it.Objects.Findings))
			}
			evaluated += it.Objects.Evaluated
		}
		b.ReportMetric(float64(evaluated)/time.Since(start).Seconds(), "objects/s")
		// CPU seconds (user+system, this process) per 1,000 objects: equal figures for 1
		// and N workers mean the pool adds no overhead, whatever else runs on the machine.
		b.ReportMetric((cpuTime()-cpu0).Seconds()*1000/float64(evaluated), "cpu-s/1000obj")
	}
	for _, workers := range []int{1, runtime.GOMAXPROCS(0)} {
		b.Run(fmt.Sprintf("workers=%d", workers), func(b *testing.B) { run(b, workers, kubeversion.Version{}, "") })
	}
	// A release that adds v2 as the storage version (a rewrite), every object's managedFields
	// entry at v1beta1 (which the CRD does not have): judged as 1.34 the rewrite's field
	// managers are predicted for each (ownershiploss.go: half are moved, half left and lost);
	// judged as 1.37 none need be. The difference is the prediction's cost.
	v2 := next.DeepCopy()
	nv := *v2.Spec.Versions[0].DeepCopy()
	nv.Name, v2.Spec.Versions[0].Storage = "v2", false
	v2.Spec.Versions = append(v2.Spec.Versions, nv)
	next = v2
	for _, minor := range []int{34, 37} {
		b.Run(fmt.Sprintf("workers=1/storage=v2/kube=1.%d", minor), func(b *testing.B) {
			v := kubeversion.Version{Major: 1, Minor: minor}
			release, err := kubeversion.Use(v)
			if err != nil {
				b.Fatal(err)
			}
			defer release()
			run(b, 1, v, "v1beta1")
		})
	}
}

// BenchmarkPeakRSS plans 100,000 objects (PLAN_BENCH_OBJECTS to change it) and reports the
// process's peak resident set (VmHWM). Run it alone: -run '^$' -bench PeakRSS -benchtime 1x.
func BenchmarkPeakRSS(b *testing.B) {
	live := readCRD(b, filepath.Join("testdata", "widgets-old.yaml"))
	next := readCRD(b, filepath.Join("testdata", "widgets-new.yaml"))
	n := 100000
	if v, err := strconv.Atoi(os.Getenv("PLAN_BENCH_OBJECTS")); err == nil && v > 0 {
		n = v
	}
	start := time.Now()
	for i := 0; i < b.N; i++ {
		it, err := Plan(context.Background(), live, next, &genSource{n: n, page: 500}, Options{})
		if err != nil {
			b.Fatal(err)
		}
		if it.Objects.Evaluated != int64(n) {
			b.Fatalf("evaluated %d", it.Objects.Evaluated)
		}
		b.ReportMetric(float64(len(it.Objects.Findings)), "findings")
	}
	b.ReportMetric(float64(n*b.N)/time.Since(start).Seconds(), "objects/s")
	if hwm, ok := vmHWM(); ok {
		b.ReportMetric(float64(hwm)/1024, "peak-RSS-MB")
	}
}

// cpuTime is the user and system CPU time this process has used.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// vmHWM reads the peak resident set size in kB of this process.
func vmHWM() (int64, bool) {
	v, err := testenv.HWM(0)
	return v, err == nil
}

// BenchmarkPlanCRDs plans each CRD of cert-manager v1.5.5 in testdata/releases (three of
// them, with four versions each) against its v1.6.3, with no objects: the per-CRD work of `plan` and of every `upgrade` run — schema changes
// between every pair of versions, the type checks and the apply verdict.
func BenchmarkPlanCRDs(b *testing.B) {
	dir := filepath.Join("..", "testdata", "releases", "cert-manager")
	live := map[string]*apiextensionsv1.CustomResourceDefinition{}
	old, _ := filepath.Glob(filepath.Join(dir, "v1.5.5", "*.yaml"))
	for _, f := range old {
		for _, c := range testenv.ReadCRDs(b, f) {
			live[c.Name] = c
		}
	}
	var pairs [][2]*apiextensionsv1.CustomResourceDefinition
	next, _ := filepath.Glob(filepath.Join(dir, "v1.6.3", "*.yaml"))
	for _, f := range next {
		for _, c := range testenv.ReadCRDs(b, f) {
			if l := live[c.Name]; l != nil {
				pairs = append(pairs, [2]*apiextensionsv1.CustomResourceDefinition{l, c})
			}
		}
	}
	if len(pairs) < 3 {
		b.Fatalf("cert-manager release CRDs: %d pairs", len(pairs))
	}
	ctx := context.Background()
	b.ResetTimer()
	for b.Loop() {
		for _, p := range pairs {
			if _, err := Plan(ctx, p[0], p[1], nil, Options{}); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.ReportMetric(float64(b.Elapsed().Milliseconds())/float64(b.N), "ms/release")
}

// BenchmarkPlanConversionCheck10k plans a release of one CRD over 10,000 stored CronTabs on the
// test API server (storage v1beta1 → v1 through the release's webhook, the HTTPS test webhook
// on loopback): "checked" is the plan as every release is planned (the objects evaluated, then
// every one round-tripped through the webhook), "off" the same plan without the conversion
// check. The difference is what the check costs (docs/benchmarks.md#the-releases-conversion).
//
//	KUBEBUILDER_ASSETS=$(hack/build-test-binaries.sh kube-apiserver etcd) \
//	  go test ./plan/ -run '^$' -bench PlanConversionCheck10k -benchtime 3x
func BenchmarkPlanConversionCheck10k(b *testing.B) {
	const n = 10000
	rel, err := testwebhook.Start(testwebhook.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer rel.Close()
	old, err := testwebhook.Start(testwebhook.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer old.Close()
	ctx := context.Background()
	live := testcrd.With(readCRD(b, filepath.Join("..", "testdata", "crds", "crontab-webhook.yaml")), testcrd.Group("bench.conv.plan.example.com"))
	live.Spec.Versions = live.Spec.Versions[:2] // v1beta1, v1
	live.Spec.Versions[0].Storage, live.Spec.Versions[1].Storage = true, false
	live.Spec.Conversion = old.WebhookConversion("v1", "v1beta1")
	live.Status = apiextensionsv1.CustomResourceDefinitionStatus{}
	if _, err := env.CreateCRD(ctx, live.DeepCopy()); err != nil {
		b.Fatal(err)
	}
	defer func() { _ = env.DeleteCRD(context.Background(), live.Name) }()
	dyn := dynamic.NewForConfigOrDie(env.Config)
	ri := dyn.Resource(crdinfo.GVR(live, "v1beta1")).Namespace("default")
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := w; i < n; i += 8 {
				u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": live.Spec.Group + "/v1beta1", "kind": "CronTab",
					"metadata": map[string]any{"name": fmt.Sprintf("c%05d", i)},
					"spec":     map[string]any{"cronSpec": "* * * * */5", "image": "img", "hostPort": fmt.Sprintf("db:%d", 1000+i)}}}
				if _, err := ri.Create(ctx, u, metav1.CreateOptions{}); err != nil {
					errs <- err
					return
				}
			}
		}(w)
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		b.Fatal(err)
	}
	next := live.DeepCopy()
	next.Spec.Versions[0].Storage, next.Spec.Versions[1].Storage = false, true
	next.Spec.Conversion = rel.WebhookConversion("v1")
	c := ReleaseClients{CRDs: apiextensionsclient.NewForConfigOrDie(env.Config), Dynamic: dyn, Kube: kubernetes.NewForConfigOrDie(env.Config)}
	for _, off := range []bool{false, true} {
		name := map[bool]string{false: "checked", true: "off"}[off]
		b.Run(name, func(b *testing.B) {
			for b.Loop() {
				rep, err := Release(ctx, c, ReleaseOptions{Next: []*apiextensionsv1.CustomResourceDefinition{next}, Conversion: ConversionOptions{Off: off}})
				if err != nil {
					b.Fatal(err)
				}
				it := rep.Items[0]
				if it.Objects.Evaluated != n || !off && (it.ConversionCheck == nil || it.ConversionCheck.RoundTrip.Objects != n) {
					b.Fatalf("evaluated %d, check %+v", it.Objects.Evaluated, it.ConversionCheck)
				}
			}
			b.ReportMetric(b.Elapsed().Seconds()/float64(b.N), "s/plan")
		})
	}
}
