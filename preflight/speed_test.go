package preflight

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	crdinfo "github.com/crdver/kubectl-crdver/crd"
	"github.com/crdver/kubectl-crdver/internal/testenv"
	"github.com/crdver/kubectl-crdver/migrate"
)

// dryRunCounter counts the dry-run writes that reach the API server.
type dryRunCounter struct {
	rt http.RoundTripper
	n  *atomic.Int64
}

func (c dryRunCounter) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Method == http.MethodPut && r.URL.Query().Get("dryRun") == "All" {
		c.n.Add(1)
	}
	return c.rt.RoundTrip(r)
}

// countingClient is a dynamic client with no client-side rate limit (as the commands give the
// preflight) whose dry-run writes are counted.
func countingClient(t *testing.T) (dynamic.Interface, *atomic.Int64) {
	t.Helper()
	cfg := rest.CopyConfig(env.Config)
	cfg.QPS, cfg.Burst = -1, 0
	n := &atomic.Int64{}
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { return dryRunCounter{rt: rt, n: n} })
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return dyn, n
}

// guarded installs a ValidatingAdmissionPolicy (unbound: it refuses nothing) that matches
// updates of crd's objects: nothing proves the dry runs needless any more (proof.go), so every
// object is sent as one.
func guarded(t *testing.T, crd *apiextensionsv1.CustomResourceDefinition) {
	t.Helper()
	vap := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
		"metadata": map[string]any{"name": crd.Name},
		"spec": map[string]any{
			"matchConstraints": map[string]any{"resourceRules": []any{map[string]any{
				"apiGroups": []any{crd.Spec.Group}, "apiVersions": []any{"*"}, "resources": []any{crd.Spec.Names.Plural}, "operations": []any{"UPDATE"},
			}}},
			"validations": []any{map[string]any{"expression": "true"}},
		},
	}}
	res := dynamic.NewForConfigOrDie(env.Config).Resource(schema.GroupVersionResource{Group: "admissionregistration.k8s.io", Version: "v1", Resource: "validatingadmissionpolicies"})
	if _, err := res.Create(context.Background(), vap, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = res.Delete(context.Background(), crd.Name, metav1.DeleteOptions{}) })
}

// checkedFixture creates in namespace ns n objects ({size: i}) of a two-version CRD
// (TwoVersionCRD) whose v1 differs from v1beta1 and whose updates an admission policy guards:
// nothing proves the preflight's passes needless, so every check runs.
func checkedFixture(t *testing.T, group, plural, kind, ns string, n int) *apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	crd := differing(testenv.TwoVersionCRD(group, plural, kind, apiextensionsv1.JSONSchemaProps{
		Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{"size": {Type: "integer"}}}))
	setup(t, crd, ns)
	guarded(t, crd)
	if err := env.CreateObjects(context.Background(), crd, []string{ns}, n); err != nil {
		t.Fatal(err)
	}
	return crd
}

// differing gives crd's v1 an optional field v1beta1 lacks: the schemas differ, so the loss
// comparison runs.
func differing(crd *apiextensionsv1.CustomResourceDefinition) *apiextensionsv1.CustomResourceDefinition {
	for i := range crd.Spec.Versions {
		if crd.Spec.Versions[i].Name == "v1" {
			s := crd.Spec.Versions[i].Schema.OpenAPIV3Schema
			spec := s.Properties["spec"]
			props := map[string]apiextensionsv1.JSONSchemaProps{"note": {Type: "string"}}
			for k, v := range spec.Properties {
				props[k] = v
			}
			spec.Properties = props
			s.Properties["spec"] = spec
		}
	}
	return crd
}

// The dry-run pass streams its writes through the rewrite's gate: adaptive by default, fixed
// with Concurrency, one dry run per object, nothing written; Ctrl-C (ctx cancelled) in the
// middle of it ends the check within a second with the context's error.
func TestDryRunPass(t *testing.T) {
	ctx := context.Background()
	const n = 150
	crd := checkedFixture(t, "dryrun.preflight.example.com", "gadgets", "Gadget", "pf-dryrun", n)
	dyn, sent := countingClient(t)
	// What the objects are in etcd, to show afterwards that the dry runs wrote nothing (etcd's
	// revision also moves with the API server's own lease).
	stored := rvs(t, dyn, crd, "v1")

	// Adaptive (the default): every object dry-run once at the target.
	r, err := Check(ctx, dyn, fresh(t, crd.Name), Options{Target: "v1", ChunkSize: 40})
	if err != nil {
		t.Fatal(err)
	}
	if r.Objects != n || !r.Safe() || sent.Load() != n {
		t.Fatalf("objects %d, safe %v, dry runs sent %d; want %d each: %+v", r.Objects, r.Safe(), sent.Load(), n, r)
	}
	if f := r.DryRunInFlight; f == nil || !f.Adaptive || f.Peak < 4 {
		t.Errorf("dry runs in flight = %+v, want an adaptive gate", f)
	}

	// Fixed: --concurrency 3.
	sent.Store(0)
	r, err = Check(ctx, dyn, fresh(t, crd.Name), Options{Target: "v1", ChunkSize: 40, Concurrency: 3})
	if err != nil {
		t.Fatal(err)
	}
	if f := r.DryRunInFlight; r.Objects != n || sent.Load() != n || f == nil || f.Adaptive || f.Final != 3 || f.Peak != 3 {
		t.Errorf("--concurrency 3: objects %d, sent %d, in flight %+v", r.Objects, sent.Load(), f)
	}

	// Ctrl-C after the first page, with --qps 20 holding the pass for seconds.
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var cancelled atomic.Int64
	start := time.Now()
	_, err = Check(cctx, dyn, fresh(t, crd.Name), Options{Target: "v1", ChunkSize: 10, QPS: 20, Progress: func(done, total int64) {
		if cancelled.Load() == 0 {
			cancelled.Store(time.Now().UnixNano())
			cancel()
		}
	}})
	end := time.Now()
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("after Ctrl-C: %v, want context.Canceled", err)
	}
	if cancelled.Load() == 0 {
		t.Fatal("the check never reported progress")
	}
	if took := end.Sub(time.Unix(0, cancelled.Load())); took > time.Second {
		t.Errorf("the check ended %v after Ctrl-C, want within a second", took)
	}
	if whole := end.Sub(start); whole > 5*time.Second {
		t.Errorf("the interrupted check took %v", whole)
	}
	if after := rvs(t, dyn, crd, "v1"); len(after) != n || !maps.Equal(after, stored) {
		t.Errorf("the objects' resourceVersions changed: the dry runs wrote something")
	}
}

// A check at the storage version with nothing pending (status.storedVersions is just that
// version) sends no dry run and says why; with another version still in storedVersions the
// same check sends one per object.
func TestNothingPendingNoDryRuns(t *testing.T) {
	ctx := context.Background()
	crd := checkedFixture(t, "pending.preflight.example.com", "gizmos", "Gizmo", "pf-pending", 5)
	dyn, sent := countingClient(t)
	live := fresh(t, crd.Name)
	r, err := Check(ctx, dyn, live, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if sent.Load() != 0 || len(r.NotNeeded) != 1 || r.DryRunInFlight != nil || !r.Safe() {
		t.Errorf("nothing pending: %d dry runs sent, not needed %q, report %+v", sent.Load(), r.NotNeeded, r)
	}

	// v1 pending as well (as after a storage switch): every object is checked.
	live.Status.StoredVersions = []string{"v1", "v1beta1"}
	r, err = Check(ctx, dyn, live, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if sent.Load() != 5 || r.Objects != 5 || len(r.NotNeeded) != 0 {
		t.Errorf("v1 pending: %d dry runs sent, objects %d, not needed %q", sent.Load(), r.Objects, r.NotNeeded)
	}
}

// Versions with the same schema, conversion None, no admission webhook or policy: the loss
// comparison is not run and only the objects the in-process validation does not accept are
// sent as dry runs (here the ones made invalid by a maximum added after they were written:
// the API server accepts their no-op write by ratcheting, so nothing is rejected). Once a
// ValidatingAdmissionPolicy matches the resource, every object is dry-run again. (With
// schemas that differ the loss comparison runs; the dry runs are spared alike: TestRejections
// and TestNoneLosses, whose invalid objects still get the API server's answer.)
func TestProvenNotNeeded(t *testing.T) {
	ctx := context.Background()
	crd := testenv.TwoVersionCRD("proven.preflight.example.com", "doohickeys", "Doohickey", apiextensionsv1.JSONSchemaProps{
		Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{"size": {Type: "integer"}}})
	setup(t, crd, "pf-proven")
	const n = 12
	if err := env.CreateObjects(ctx, crd, []string{"pf-proven"}, n); err != nil {
		t.Fatal(err)
	}
	// size ≤ 9 from now on, in both versions: objects 10 and 11 are no longer valid.
	live := fresh(t, crd.Name)
	for i := range live.Spec.Versions {
		size := live.Spec.Versions[i].Schema.OpenAPIV3Schema.Properties["spec"].Properties["size"]
		size.Maximum = ptrTo(9.0)
		live.Spec.Versions[i].Schema.OpenAPIV3Schema.Properties["spec"].Properties["size"] = size
	}
	if _, err := apiextensionsclient.NewForConfigOrDie(env.Config).ApiextensionsV1().CustomResourceDefinitions().Update(ctx, live, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	live = fresh(t, crd.Name)
	live.Status.StoredVersions = []string{"v1beta1", "v1"} // as after a switch to v1
	dyn, sent := countingClient(t)
	r, err := Check(ctx, dyn, live, Options{Target: "v1"})
	if err != nil {
		t.Fatal(err)
	}
	if r.Objects != n || r.DryRuns != 2 || sent.Load() != 2 || !r.Safe() || len(r.NotNeeded) != 2 {
		t.Fatalf("proven: objects %d, dry runs %d (sent %d), want %d and 2; safe %v; not needed %q; %+v", r.Objects, r.DryRuns, sent.Load(), n, r.Safe(), r.NotNeeded, r)
	}

	// A policy that may match updates of the resource: nothing is proven any more.
	guarded(t, crd)
	sent.Store(0)
	r, err = Check(ctx, dyn, live, Options{Target: "v1"})
	if err != nil {
		t.Fatal(err)
	}
	if r.Objects != n || r.DryRuns != n || sent.Load() != n || len(r.NotNeeded) != 1 || len(r.Compared) != 1 {
		t.Errorf("with a matching policy: objects %d, dry runs %d (sent %d), want %d; not needed %q, compared %v", r.Objects, r.DryRuns, sent.Load(), n, r.NotNeeded, r.Compared)
	}
}

func ptrTo[T any](v T) *T { return &v }

// rvs are the resourceVersions of crd's objects read at v, by key.
func rvs(t *testing.T, dyn dynamic.Interface, crd *apiextensionsv1.CustomResourceDefinition, v string) map[string]string {
	t.Helper()
	list, err := dyn.Resource(crdinfo.GVR(crd, v)).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, u := range list.Items {
		out[migrate.ObjectKey(u.GetNamespace(), u.GetName())] = u.GetResourceVersion()
	}
	return out
}

// A run resumed after Ctrl-C in the rewrite does not redo the completed preflight: the
// objects up to the checkpoint's Through were written already and are not checked, and of the
// rest only those whose resourceVersion changed since the first preflight (rewritten in the
// unfinished pages, or changed by someone) are dry-run again; the others are vouched for by
// the evidence file. With the CRD's spec changed, the evidence is not used.
func TestResumedPreflight(t *testing.T) {
	ctx := context.Background()
	const n = 300
	crd := checkedFixture(t, "resume.preflight.example.com", "widgets", "Widget", "pf-resume", n)
	dyn, sent := countingClient(t)
	dir := t.TempDir()
	cpPath := filepath.Join(dir, "cp.json")
	evidence := cpPath + ".preflight"

	// The first run's preflight, at v1 before the switch: every object dry-run, all recorded.
	r, err := Check(ctx, dyn, fresh(t, crd.Name), Options{Target: "v1", Evidence: evidence})
	if err != nil {
		t.Fatal(err)
	}
	if sent.Load() != n || r.Objects != n || !r.Safe() {
		t.Fatalf("first preflight: sent %d, objects %d, safe %v", sent.Load(), r.Objects, r.Safe())
	}
	before := rvs(t, dyn, crd, "v1")

	// The switch, then a rewrite interrupted after about 120 objects.
	c, err := migrate.NewClients(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	live, err := migrate.SwitchStorage(ctx, c, crd.Name, "v1")
	if err != nil {
		t.Fatal(err)
	}
	rw, err := migrate.NewRewriter(c, live, migrate.RewriteOptions{Concurrency: 4, ChunkSize: 50, QPS: 150, Checkpoint: cpPath})
	if err != nil {
		t.Fatal(err)
	}
	runCtx, cancel := context.WithCancel(ctx)
	go func() {
		deadline := time.Now().Add(time.Minute)
		for rw.Progress().Total() < 120 && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
		cancel()
	}()
	if res, err := rw.Run(runCtx); err != nil || !res.Interrupted {
		t.Fatalf("rewrite: %+v, %v; want interrupted", res, err)
	}
	cp, err := migrate.LoadCheckpoint(cpPath)
	if err != nil || cp == nil || cp.Through == "" || !cp.ResumableFor(c.Server, live) {
		t.Fatalf("checkpoint %+v (%v): want a resumable run with Through set", cp, err)
	}
	// Someone changes the last object meanwhile.
	last := fmt.Sprintf("widget-%03d", n-1)
	u, err := dyn.Resource(crdinfo.GVR(crd, "v1")).Namespace("pf-resume").Get(ctx, last, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	u.SetLabels(map[string]string{"changed": "yes"})
	if _, err := dyn.Resource(crdinfo.GVR(crd, "v1")).Namespace("pf-resume").Update(ctx, u, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	after := rvs(t, dyn, crd, "v1")
	var want, upTo int64
	for k, rv := range after {
		switch {
		case k <= cp.Through:
			upTo++
		case before[k] != rv:
			want++
		}
	}
	if want < 1 || want > 3*50 {
		t.Fatalf("%d objects after %s changed: the fixture should leave a few", want, cp.Through)
	}

	// The resumed run's preflight.
	sent.Store(0)
	live = fresh(t, crd.Name)
	r, err = Check(ctx, dyn, live, Options{Target: "v1", Evidence: evidence, After: cp.Through})
	if err != nil {
		t.Fatal(err)
	}
	if sent.Load() != want || r.DryRuns != want || r.Objects != n-upTo || !r.Safe() || len(r.NotNeeded) != 2 {
		t.Errorf("resumed preflight: sent %d dry runs (report %d), want %d (the objects after %s that changed); objects %d, want %d; safe %v; not needed %q",
			sent.Load(), r.DryRuns, want, cp.Through, r.Objects, n-upTo, r.Safe(), r.NotNeeded)
	}

	// The CRD's spec changes: the evidence no longer applies.
	live.Spec.Versions[0].Schema.OpenAPIV3Schema.Description = "changed"
	if _, err := c.CRDs.ApiextensionsV1().CustomResourceDefinitions().Update(ctx, live, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	sent.Store(0)
	r, err = Check(ctx, dyn, fresh(t, crd.Name), Options{Target: "v1", Evidence: evidence})
	if err != nil {
		t.Fatal(err)
	}
	if sent.Load() != n || r.Objects != n {
		t.Errorf("after a spec change: sent %d, objects %d; want %d each", sent.Load(), r.Objects, n)
	}
}
