package retire

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/util/retry"

	crdinfo "github.com/crdver/kubectl-crdver/crd"
	"github.com/crdver/kubectl-crdver/internal/testenv"
	"github.com/crdver/kubectl-crdver/internal/testwebhook"
	"github.com/crdver/kubectl-crdver/migrate"
)

var env *testenv.Env

func TestMain(m *testing.M) { testenv.Main(m, &env, testenv.Options{}) }

const ns = "default"

type fx struct {
	t     *testing.T
	crd   *apiextensionsv1.CustomResourceDefinition
	c     *migrate.Clients
	dyn   dynamic.Interface
	group string
	cp    string
}

// newFx creates a two-version CRD (v1beta1 storage, v1; conversion None; the same schema).
func newFx(t *testing.T, name string) *fx {
	t.Helper()
	group := name + ".retire.example.com"
	crd := testenv.TwoVersionCRD(group, "widgets", "Widget", apiextensionsv1.JSONSchemaProps{Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{
		"size": {Type: "integer"}, "color": {Type: "string"}, "mode": {Type: "string"}, "tick": {Type: "integer"},
	}})
	return createFx(t, crd)
}

func createFx(t *testing.T, crd *apiextensionsv1.CustomResourceDefinition) *fx {
	t.Helper()
	env.CreateCRDForTest(t, crd)
	c, err := migrate.NewClients(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	f := &fx{t: t, c: c, dyn: dynamic.NewForConfigOrDie(env.Config), group: crd.Spec.Group, cp: filepath.Join(t.TempDir(), "checkpoint.json")}
	f.crd = f.get()
	return f
}

func (f *fx) get() *apiextensionsv1.CustomResourceDefinition {
	f.t.Helper()
	crd, err := f.c.CRDs.ApiextensionsV1().CustomResourceDefinitions().Get(context.Background(), f.crd0Name(), metav1.GetOptions{})
	if err != nil {
		f.t.Fatal(err)
	}
	return crd
}

func (f *fx) crd0Name() string { return "widgets." + f.group }

func (f *fx) res(v string) dynamic.ResourceInterface {
	return f.dyn.Resource(schema.GroupVersionResource{Group: f.group, Version: v, Resource: "widgets"}).Namespace(ns)
}

// apply server-side applies spec at version v as manager.
func (f *fx) apply(v, manager, name string, spec map[string]any, force bool, dryRun ...string) error {
	obj := map[string]any{"apiVersion": f.group + "/" + v, "kind": f.crd.Spec.Names.Kind, "metadata": map[string]any{"name": name, "namespace": ns}, "spec": spec}
	b, err := json.Marshal(obj)
	if err != nil {
		return err
	}
	_, err = f.res(v).Patch(context.Background(), name, types.ApplyPatchType, b, metav1.PatchOptions{FieldManager: manager, Force: &force, DryRun: dryRun})
	return err
}

// update sets spec[key] = val with a plain update at version v as manager.
func (f *fx) update(v, manager, name, key string, val any) {
	f.t.Helper()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		o, err := f.res(v).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if err := unstructured.SetNestedField(o.Object, val, "spec", key); err != nil {
			return err
		}
		_, err = f.res(v).Update(context.Background(), o, metav1.UpdateOptions{FieldManager: manager})
		return err
	})
	if err != nil {
		f.t.Fatal(err)
	}
}

func (f *fx) spec(v, name string) map[string]any {
	f.t.Helper()
	o, err := f.res(v).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		f.t.Fatal(err)
	}
	s, _, _ := unstructured.NestedMap(o.Object, "spec")
	return s
}

func (f *fx) opts(version string) Options {
	return Options{CRD: f.crd0Name(), Version: version, Rewrite: migrate.RewriteOptions{Checkpoint: f.cp, Concurrency: 4, ChunkSize: 50}}
}

// removeVersion drops v from spec.versions by hand (what a user or a chart upgrade does).
func (f *fx) removeVersion(v string) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		crd := f.get()
		kept := crd.Spec.Versions[:0]
		for _, x := range crd.Spec.Versions {
			if x.Name != v {
				kept = append(kept, x)
			}
		}
		crd.Spec.Versions = kept
		_, err := f.c.CRDs.ApiextensionsV1().CustomResourceDefinitions().Update(context.Background(), crd, metav1.UpdateOptions{})
		return err
	})
}

// waitGone waits (at most 30 s) until the API server no longer serves version v of the
// fixture (a read at v is 404): its handlers then use the CRD without v.
func (f *fx) waitGone(v, name string) {
	f.t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		_, err := f.res(v).Get(ctx, name, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	if err != nil {
		f.t.Fatalf("%s is still served: %v", v, err)
	}
}

// twoManagers writes n objects: "applier" server-side applies size and color at v1beta1,
// "updater" sets mode with a plain update at v1.
func (f *fx) twoManagers(n int) {
	f.t.Helper()
	for i := 0; i < n; i++ {
		name := fmt.Sprintf("w-%02d", i)
		if err := f.apply("v1beta1", "applier", name, map[string]any{"size": int64(i), "color": "red"}, true); err != nil {
			f.t.Fatal(err)
		}
		f.update("v1", "updater", name, "mode", "fast")
	}
}

// storedManagedFieldVersions reads every object of the fixture from etcd and counts the
// apiVersions of their managedFields entries, and the objects' own apiVersions.
func (f *fx) etcdState(names ...string) (entryVersions, objectVersions map[string]int) {
	f.t.Helper()
	entryVersions, objectVersions = map[string]int{}, map[string]int{}
	for _, n := range names {
		o, _, err := env.StoredObject(context.Background(), f.group, "widgets", ns, n)
		if err != nil {
			f.t.Fatal(err)
		}
		objectVersions[o["apiVersion"].(string)]++
		mf, _, _ := unstructured.NestedSlice(o, "metadata", "managedFields")
		for _, e := range mf {
			entryVersions[e.(map[string]any)["apiVersion"].(string)]++
		}
	}
	return entryVersions, objectVersions
}

func stepState(r *Result, name string) string {
	for _, s := range r.Plan.Steps {
		if s.Name == name {
			return s.State
		}
	}
	return "?"
}

// The oracle: two managers (SSA at the old version, update at the new); retire the old
// version and remove it; each manager applies again at the new version: it works, and a
// smaller apply removes exactly the fields the applier owned.
func TestRetireKeepsOwnershipAndPreventsTheConversionError(t *testing.T) {
	ctx := context.Background()
	f := newFx(t, "oracle")
	f.twoManagers(3)

	o := f.opts("v1beta1")
	o.Remove = true
	res, err := Run(ctx, f.c, o)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Problems) > 0 {
		t.Fatalf("problems: %v", res.Problems)
	}
	if res.Plan.Target != "v1" || res.Plan.EntryObjects != 3 || len(res.Plan.Writers) != 1 || res.Plan.Writers[0].Manager != "applier" {
		t.Fatalf("plan %+v", res.Plan)
	}
	for _, s := range []string{StepSwitch, StepRewrite, StepTrim, StepUnserve, StepRemove} {
		if st := stepState(res, s); st != StateDone {
			t.Errorf("step %s: %s", s, st)
		}
	}
	// The rewrite moved the entries within each object's write: the managedFields pass finds
	// nothing left.
	if res.Rewrite == nil || res.Rewrite.ManagedFieldsMoved != 3 || res.Rewrite.ManagedFieldsLost != 0 || res.Fields.Updated != 0 || stepState(res, StepManagedFields) != StateAlready {
		t.Errorf("rewrite %+v, managedFields pass %+v (%s)", res.Rewrite, res.Fields, stepState(res, StepManagedFields))
	}
	crd := f.get()
	if _, ok := lookup(crd, "v1beta1"); ok || strings.Join(crd.Status.StoredVersions, ",") != "v1" {
		t.Fatalf("v1beta1 still in the CRD: versions %v, storedVersions %v", crdinfo.VersionNames(crd), crd.Status.StoredVersions)
	}
	entries, objs := f.etcdState("w-00", "w-01", "w-02")
	if entries[f.group+"/v1beta1"] != 0 || entries[f.group+"/v1"] != 6 || objs[f.group+"/v1"] != 3 {
		t.Fatalf("etcd: managedFields versions %v, object versions %v", entries, objs)
	}

	f.waitGone("v1beta1", "w-00")
	// Each manager applies again at v1. The applier's smaller configuration drops color:
	// the field it owned is removed, the updater's mode stays.
	if err := f.apply("v1", "applier", "w-00", map[string]any{"size": int64(0)}, false); err != nil {
		t.Fatalf("applier's apply at v1 after retire: %v", err)
	}
	if err := f.apply("v1", "updater", "w-01", map[string]any{"mode": "slow"}, true); err != nil {
		t.Fatalf("updater's apply at v1 after retire: %v", err)
	}
	if s := f.spec("v1", "w-00"); s["color"] != nil || s["mode"] != "fast" || s["size"] != int64(0) {
		t.Fatalf("after the applier's smaller apply: spec %v; want color gone, mode and size kept", s)
	}
	// Ownership is real: another manager changing the applier's size without force conflicts.
	err = f.apply("v1", "intruder", "w-02", map[string]any{"size": int64(99)}, false)
	if !apierrors.IsConflict(err) || !strings.Contains(err.Error(), "applier") {
		t.Fatalf("apply of size by another manager: %v; want a conflict with applier", err)
	}
}

// The same sequence without retire (migrate and trim only): the server's error
// ("request to convert CR to an invalid group/version") once the applier's entry names the
// removed version. Its entry is put back at v1beta1 after the rewrite, which moved it.
func TestWithoutRetireApplyFailsAfterRemoval(t *testing.T) {
	ctx := context.Background()
	f := newFx(t, "noretire")
	f.twoManagers(1)
	if _, err := migrate.SwitchStorage(ctx, f.c, f.crd0Name(), "v1"); err != nil {
		t.Fatal(err)
	}
	rw, err := migrate.NewRewriter(f.c, f.get(), migrate.RewriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	r, err := rw.Run(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if tr, err := migrate.Trim(ctx, f.c, migrate.EvidenceOf(r)); err != nil || !tr.Trimmed {
		t.Fatalf("trim: %+v %v", tr, err)
	}
	if r.ManagedFieldsMoved == 0 {
		t.Fatalf("the rewrite moved no managedFields entry: %+v", r)
	}
	// As a manager that wrote v1beta1 after the rewrite leaves it: the applier's entry at v1beta1.
	if err := f.apply("v1beta1", "applier", "w-00", map[string]any{"size": int64(0), "color": "blue"}, true); err != nil {
		t.Fatal(err)
	}
	if err := f.removeVersion("v1beta1"); err != nil {
		t.Fatal(err)
	}
	// A read at v1beta1 can be 404 before the apply path uses the new CRD: wait with dry-run
	// applies (they write nothing) until the API server's apply path has it too.
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		err := f.apply("v1", "applier", "w-00", map[string]any{"size": int64(0)}, false, metav1.DryRunAll)
		return err != nil, nil
	}); err != nil {
		t.Fatalf("a dry-run apply at v1 still succeeds 30s after v1beta1 was removed: %v", err)
	}
	err = f.apply("v1", "applier", "w-00", map[string]any{"size": int64(0)}, false)
	if err == nil || !strings.Contains(err.Error(), "request to convert CR to an invalid group/version") {
		t.Fatalf("apply after removing v1beta1 without retire: %v; want the conversion error", err)
	}
}

// A controller keeps writing v1beta1 during retire: no unserve or remove without --force.
func TestRetireRefusesWhileAControllerWritesTheOldVersion(t *testing.T) {
	ctx := context.Background()
	f := newFx(t, "writer")
	f.twoManagers(2)

	stop := make(chan struct{})
	var wg sync.WaitGroup
	var writes atomic.Int64
	wg.Add(1)
	go func() { // bounded: at most 3000 writes, 20 ms apart, until stopped
		defer wg.Done()
		for i := 0; i < 3000; i++ {
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
			if err := f.apply("v1beta1", "old-controller", "w-00", map[string]any{"tick": int64(i)}, true); err != nil && i < 3 {
				t.Logf("controller write: %v", err)
			}
			writes.Add(1)
		}
	}()
	defer func() { close(stop); wg.Wait() }()
	time.Sleep(200 * time.Millisecond)

	o := f.opts("v1beta1")
	o.Unserve, o.Remove = true, true
	// The controller writes during the run: after the managedFields pass, before the check.
	o.Notify = func(s string) {
		if strings.Contains(s, "checking for writers") {
			n := writes.Load()
			for i := 0; i < 500 && writes.Load() < n+2; i++ { // bounded: 5 s
				time.Sleep(10 * time.Millisecond)
			}
		}
	}
	res, err := Run(ctx, f.c, o)
	if err != nil {
		t.Fatal(err)
	}
	if stepState(res, StepUnserve) != StateRefused || stepState(res, StepRemove) != StateRefused {
		o, _ := f.res("v1").Get(ctx, "w-00", metav1.GetOptions{})
		b, _ := json.MarshalIndent(o.GetManagedFields(), "", " ")
		t.Logf("fields %+v remaining %+v\n%s", res.Fields, res.Fields.Remaining, b)
		t.Fatalf("unserve %s, remove %s; want both refused", stepState(res, StepUnserve), stepState(res, StepRemove))
	}
	found := false
	for _, w := range res.WritersSinceStart {
		found = found || w.Manager == "old-controller"
	}
	if !found || len(res.Problems) == 0 || !strings.Contains(strings.Join(res.Problems, "\n"), "old-controller") {
		t.Fatalf("writers since start %+v, problems %v; want old-controller named", res.WritersSinceStart, res.Problems)
	}
	ver, ok := lookup(f.get(), "v1beta1")
	if !ok || !ver.Served {
		t.Fatalf("v1beta1 was unserved or removed although a controller writes it")
	}

	o.Force, o.Remove = true, false
	res, err = Run(ctx, f.c, o)
	if err != nil {
		t.Fatal(err)
	}
	if ver, ok := lookup(f.get(), "v1beta1"); !ok || ver.Served || stepState(res, StepUnserve) != StateDone {
		t.Fatalf("with --force: unserve %s, v1beta1 served=%v", stepState(res, StepUnserve), ver.Served)
	}
}

// An interrupted retire resumes from the checkpoint; --dry-run moves no etcd revision.
func TestRetireResumesAndDryRunWritesNothing(t *testing.T) {
	ctx := context.Background()
	f := newFx(t, "resume")
	const n = 240
	if err := env.CreateObjects(ctx, f.crd, []string{ns}, n); err != nil {
		t.Fatal(err)
	}

	_, rev0, err := env.StoredAPIVersions(ctx, f.group, "widgets")
	if err != nil {
		t.Fatal(err)
	}
	o := f.opts("v1beta1")
	o.DryRun, o.Remove = true, true
	dry, err := Run(ctx, f.c, o)
	if err != nil {
		t.Fatal(err)
	}
	counts, rev1, err := env.StoredAPIVersions(ctx, f.group, "widgets")
	if err != nil {
		t.Fatal(err)
	}
	if rev1 != rev0 || counts[f.group+"/v1beta1"] != n {
		t.Fatalf("dry run moved etcd from revision %d to %d (stored %v)", rev0, rev1, counts)
	}
	if dry.Plan.Objects != n || stepState(dry, StepSwitch) != StatePending || stepState(dry, StepRemove) != StatePending {
		t.Fatalf("dry-run plan %+v", dry.Plan)
	}

	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	o = f.opts("v1beta1")
	o.Remove = true
	o.Rewrite.Concurrency, o.Rewrite.ChunkSize = 2, 20
	o.OnRewrite = func(r *migrate.Rewriter, total int64) func() {
		done := make(chan struct{})
		go func() {
			for i := 0; i < 6000; i++ { // bounded: 60 s
				if r.Progress().Total() >= 60 {
					cancel()
					return
				}
				select {
				case <-done:
					return
				case <-time.After(10 * time.Millisecond):
				}
			}
		}()
		return func() { close(done) }
	}
	res, err := Run(cctx, f.c, o)
	if !errors.Is(err, ErrInterrupted) {
		t.Fatalf("first run: %v; want interrupted", err)
	}
	if res.Rewrite == nil || res.Rewrite.Total() >= n || stepState(res, StepRemove) != StateUnreachd {
		t.Fatalf("first run: rewrite %+v, remove %s", res.Rewrite, stepState(res, StepRemove))
	}
	if crdinfo.StorageVersion(f.get()) != "v1" {
		t.Fatal("the storage switch of the interrupted run is not in the live state")
	}

	o.OnRewrite = nil
	res, err = Run(ctx, f.c, o)
	if err != nil {
		t.Fatal(err)
	}
	if stepState(res, StepSwitch) != StateAlready || !res.Rewrite.Resumed || !res.Rewrite.Complete || len(res.Problems) > 0 {
		t.Fatalf("second run: switch %s, rewrite %+v, problems %v", stepState(res, StepSwitch), res.Rewrite, res.Problems)
	}
	counts, _, err = env.StoredAPIVersions(ctx, f.group, "widgets")
	if err != nil {
		t.Fatal(err)
	}
	if counts[f.group+"/v1"] != n || len(counts) != 1 {
		t.Fatalf("etcd after the resumed run: %v", counts)
	}
	if _, ok := lookup(f.get(), "v1beta1"); ok {
		t.Fatal("v1beta1 not removed by the resumed run")
	}

	// A third run finds everything done... but v1beta1 is gone: a usage error that says so.
	if _, err := Run(ctx, f.c, o); !errors.Is(err, ErrUsage) || !strings.Contains(err.Error(), "nothing is left to do") {
		t.Fatalf("third run: %v", err)
	}
}

// A Webhook-conversion CRD whose versions rename fields (v1beta1 spec.hostPort "host:port" ↔
// v1 spec.host and spec.port): the applier of hostPort owns host and port after retire.
func TestRetireConvertsRenamedFieldsThroughTheWebhook(t *testing.T) {
	ctx := context.Background()
	wh := testwebhook.StartForTest(t, testwebhook.Options{})
	group := "hook.retire.example.com"
	str := apiextensionsv1.JSONSchemaProps{Type: "string"}
	schemaOf := func(props map[string]apiextensionsv1.JSONSchemaProps) *apiextensionsv1.CustomResourceValidation {
		return &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{
			"spec": {Type: "object", Properties: props},
		}}}
	}
	crd := testenv.TwoVersionCRD(group, "widgets", "Widget", apiextensionsv1.JSONSchemaProps{})
	crd.Spec.Versions[0].Schema = schemaOf(map[string]apiextensionsv1.JSONSchemaProps{"hostPort": str, "color": str})
	crd.Spec.Versions[1].Schema = schemaOf(map[string]apiextensionsv1.JSONSchemaProps{"host": str, "port": str, "color": str})
	crd.Spec.Conversion = wh.WebhookConversion("v1")
	f := createFx(t, crd)

	if err := f.apply("v1beta1", "applier", "w-00", map[string]any{"hostPort": "db:5432"}, true); err != nil {
		t.Fatal(err)
	}
	f.update("v1", "updater", "w-00", "color", "red")

	o := f.opts("v1beta1")
	o.Remove = true
	res, err := Run(ctx, f.c, o)
	if err != nil {
		t.Fatal(err)
	}
	// The rewrite moved the applier's entry within its write, its renamed fields converted
	// through the webhook (the object read at v1beta1 too).
	if len(res.Problems) > 0 || res.Rewrite == nil || res.Rewrite.ManagedFieldsMoved != 1 || res.Fields.Updated != 0 || stepState(res, StepRemove) != StateDone {
		t.Fatalf("problems %v, rewrite %+v, fields %+v, remove %s", res.Problems, res.Rewrite, res.Fields, stepState(res, StepRemove))
	}
	f.waitGone("v1beta1", "w-00")
	// Ownership of the renamed fields: another manager setting port without force conflicts
	// with the applier; the applier applying only host removes port.
	err = f.apply("v1", "intruder", "w-00", map[string]any{"port": "6543"}, false)
	if !apierrors.IsConflict(err) || !strings.Contains(err.Error(), "applier") {
		t.Fatalf("apply of port by another manager: %v; want a conflict with applier", err)
	}
	if err := f.apply("v1", "applier", "w-00", map[string]any{"host": "db"}, false); err != nil {
		t.Fatalf("applier's apply at v1 after retire: %v", err)
	}
	if s := f.spec("v1", "w-00"); s["port"] != nil || s["host"] != "db" || s["color"] != "red" {
		t.Fatalf("spec after the applier's smaller apply: %v; want port gone, host and color kept", s)
	}
}

// Entries of the status subresource move too: a controller that updated status at v1beta1
// keeps its status fields, and applies to /status at v1 work after removal.
func TestRetireMovesStatusEntries(t *testing.T) {
	ctx := context.Background()
	group := "status.retire.example.com"
	crd := testenv.TwoVersionCRD(group, "widgets", "Widget", apiextensionsv1.JSONSchemaProps{Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{"size": {Type: "integer"}}})
	for i := range crd.Spec.Versions {
		v := &crd.Spec.Versions[i]
		v.Schema.OpenAPIV3Schema.Properties["status"] = apiextensionsv1.JSONSchemaProps{Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{"ready": {Type: "boolean"}, "phase": {Type: "string"}}}
		v.Subresources = &apiextensionsv1.CustomResourceSubresources{Status: &apiextensionsv1.CustomResourceSubresourceStatus{}}
	}
	f := createFx(t, crd)
	if err := f.apply("v1beta1", "applier", "w-00", map[string]any{"size": int64(1)}, true); err != nil {
		t.Fatal(err)
	}
	status := []byte(`{"apiVersion":"` + group + `/v1beta1","kind":"Widget","metadata":{"name":"w-00","namespace":"default"},"status":{"ready":true}}`)
	force := true
	if _, err := f.res("v1beta1").Patch(ctx, "w-00", types.ApplyPatchType, status, metav1.PatchOptions{FieldManager: "status-controller", Force: &force}, "status"); err != nil {
		t.Fatal(err)
	}
	o := f.opts("v1beta1")
	o.Remove = true
	res, err := Run(ctx, f.c, o)
	if err != nil || len(res.Problems) > 0 {
		t.Fatalf("%v %v", err, res.Problems)
	}
	f.waitGone("v1beta1", "w-00")
	obj, err := f.res("v1").Get(ctx, "w-00", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, e := range obj.GetManagedFields() {
		if e.APIVersion != group+"/v1" {
			t.Errorf("entry %s %s left at %s", e.Manager, e.Subresource, e.APIVersion)
		}
		found = found || (e.Manager == "status-controller" && e.Subresource == "status")
	}
	if !found {
		t.Fatalf("the status entry was lost: %+v", obj.GetManagedFields())
	}
	// The status controller applies a smaller status at v1: it owned ready, so ready goes.
	status = []byte(`{"apiVersion":"` + group + `/v1","kind":"Widget","metadata":{"name":"w-00","namespace":"default"},"status":{"phase":"Running"}}`)
	if _, err := f.res("v1").Patch(ctx, "w-00", types.ApplyPatchType, status, metav1.PatchOptions{FieldManager: "status-controller"}, "status"); err != nil {
		t.Fatalf("status apply at v1 after retire: %v", err)
	}
	obj, err = f.res("v1").Get(ctx, "w-00", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, has, _ := unstructured.NestedBool(obj.Object, "status", "ready"); has || obj.Object["status"].(map[string]any)["phase"] != "Running" {
		t.Errorf("status.ready still set after the owner's smaller apply: %v", obj.Object["status"])
	}
}

// A completed run recorded in the checkpoint is not trusted once status.storedVersions lists
// the old version again, changed through /status only (the generation stays): retire rewrites
// the objects again instead of trimming on the old record.
func TestRetireDistrustsCheckpointAfterStatusOnlyChange(t *testing.T) {
	ctx := context.Background()
	f := newFx(t, "stalecp")
	const n = 20
	if err := env.CreateObjects(ctx, f.crd, []string{ns}, n); err != nil {
		t.Fatal(err)
	}
	o := f.opts("v1beta1")
	res, err := Run(ctx, f.c, o)
	if err != nil {
		t.Fatal(err)
	}
	if stepState(res, StepRewrite) != StateDone || stepState(res, StepTrim) != StateDone {
		t.Fatalf("first run: rewrite %s, trim %s", stepState(res, StepRewrite), stepState(res, StepTrim))
	}
	gen := f.get().Generation
	// storedVersions back to [v1beta1 v1] through /status, as after restoring objects stored at
	// v1beta1: the spec, and so the generation, do not change.
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		crd := f.get()
		crd.Status.StoredVersions = []string{"v1beta1", "v1"}
		_, err := f.c.CRDs.ApiextensionsV1().CustomResourceDefinitions().UpdateStatus(ctx, crd, metav1.UpdateOptions{})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if crd := f.get(); crd.Generation != gen || strings.Join(crd.Status.StoredVersions, ",") != "v1beta1,v1" {
		t.Fatalf("after the /status update: generation %d (was %d), storedVersions %v", crd.Generation, gen, crd.Status.StoredVersions)
	}
	if ev, err := migrate.CompletedEvidence(f.c.Server, f.get(), f.cp); err != nil || ev != nil {
		t.Fatalf("the checkpoint still counts as evidence: %+v, %v", ev, err)
	}
	res, err = Run(ctx, f.c, o)
	if err != nil {
		t.Fatal(err)
	}
	if stepState(res, StepRewrite) != StateDone || res.Rewrite == nil || !res.Rewrite.Complete || res.Rewrite.Total() != n {
		t.Fatalf("second run trusted the old checkpoint: rewrite step %s, result %+v", stepState(res, StepRewrite), res.Rewrite)
	}
	if sv := f.get().Status.StoredVersions; strings.Join(sv, ",") != "v1" {
		t.Errorf("storedVersions after the second run: %v", sv)
	}
}
