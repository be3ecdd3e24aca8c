package plan

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"

	crdinfo "github.com/crdver/kubectl-crdver/crd"
	"github.com/crdver/kubectl-crdver/internal/testcrd"
	"github.com/crdver/kubectl-crdver/internal/testenv"
	"github.com/crdver/kubectl-crdver/preview"
)

// env is the package's real kube-apiserver + etcd.
var env *testenv.Env

func TestMain(m *testing.M) { testenv.Main(m, &env, testenv.Options{}) }

// scenario is one CRD change checked against the API server: objects are created under old,
// plan runs, then next is applied for real and every object is compared with what the plan
// said.
type scenario struct {
	name      string
	old, next *apiextensionsv1.CustomResourceDefinition
	// objects are created at their apiVersion, by manager; status (by name) through /status.
	objects []unstructured.Unstructured
	status  map[string]map[string]any
	manager string
	check   func(t *testing.T, it *Item)
	// setup runs after the objects are created, before the plan.
	setup func(t *testing.T, ctx context.Context, dyn dynamic.Interface)
}

// regroupObjects moves objects to group (one group per scenario: no CRD deletions between them).
func regroupObjects(objs []unstructured.Unstructured, group string) []unstructured.Unstructured {
	out := make([]unstructured.Unstructured, len(objs))
	for i, o := range objs {
		c := o.DeepCopy()
		gv, _ := schema.ParseGroupVersion(c.GetAPIVersion())
		c.SetAPIVersion(group + "/" + gv.Version)
		out[i] = *c
	}
	return out
}

// withCanary adds spec.canary to every version of the new CRD, so the test can tell when the
// API server serves the new schema.
func withCanary(crd *apiextensionsv1.CustomResourceDefinition) *apiextensionsv1.CustomResourceDefinition {
	c := crd.DeepCopy()
	for i := range c.Spec.Versions {
		s := c.Spec.Versions[i].Schema.OpenAPIV3Schema
		spec := s.Properties["spec"]
		spec.Properties["canary"] = apiextensionsv1.JSONSchemaProps{Type: "string"}
		s.Properties["spec"] = spec
	}
	return c
}

func resource(crd *apiextensionsv1.CustomResourceDefinition, version string, dyn dynamic.Interface, ns string) dynamic.ResourceInterface {
	r := dyn.Resource(schema.GroupVersionResource{Group: crd.Spec.Group, Version: version, Resource: crd.Spec.Names.Plural})
	if crd.Spec.Scope == apiextensionsv1.NamespaceScoped {
		return r.Namespace(ns)
	}
	return r
}

// serverErrors renders an API error the way plan renders preview errors.
func serverErrors(err error) []string {
	var se apierrors.APIStatus
	if !errors.As(err, &se) {
		return []string{err.Error()}
	}
	st := se.Status()
	var pe []preview.PreviewError
	if st.Details != nil && len(st.Details.Causes) > 0 {
		for _, c := range st.Details.Causes {
			pe = append(pe, preview.PreviewError{Field: c.Field, Type: string(c.Type), Message: c.Message})
		}
	} else {
		pe = append(pe, preview.PreviewError{Type: string(st.Reason), Message: st.Message})
	}
	out := errorTexts(pe)
	sort.Strings(out)
	return out
}

func sorted(s []string) []string {
	out := append([]string{}, s...)
	sort.Strings(out)
	return out
}

// changedPaths lists the outermost paths present in a and not in b (metadata, apiVersion and
// kind aside), in preview's notation.
func changedPaths(a, b map[string]any, prefix string) []string {
	var out []string
	for k, va := range a {
		if prefix == "" && (k == "metadata" || k == "apiVersion" || k == "kind") {
			continue
		}
		p := k
		if prefix != "" {
			p = prefix + "." + k
		}
		vb, ok := b[k]
		if !ok {
			out = append(out, p)
			continue
		}
		ma, okA := va.(map[string]any)
		mb, okB := vb.(map[string]any)
		if okA && okB {
			out = append(out, changedPaths(ma, mb, p)...)
		}
	}
	sort.Strings(out)
	return out
}

func runScenario(t *testing.T, sc scenario) *Item {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	crdClient, err := apiextensionsclient.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	dyn, err := dynamic.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	var live *apiextensionsv1.CustomResourceDefinition
	if sc.old != nil {
		if _, err := env.CreateCRD(ctx, sc.old.DeepCopy()); err != nil {
			t.Fatalf("creating the old CRD: %v", err)
		}
		for _, o := range sc.objects {
			gv, _ := schema.ParseGroupVersion(o.GetAPIVersion())
			r := resource(sc.old, gv.Version, dyn, o.GetNamespace())
			created, err := r.Create(ctx, o.DeepCopy(), metav1.CreateOptions{FieldManager: sc.manager})
			if err != nil {
				t.Fatalf("creating %s: %v", o.GetName(), err)
			}
			if st, ok := sc.status[o.GetName()]; ok {
				created.Object["status"] = st
				if _, err := r.UpdateStatus(ctx, created, metav1.UpdateOptions{FieldManager: sc.manager}); err != nil {
					t.Fatalf("status of %s: %v", o.GetName(), err)
				}
			}
		}
		if sc.setup != nil {
			sc.setup(t, ctx, dyn)
		}
		if live, err = crdClient.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, sc.old.Name, metav1.GetOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	next := sc.next
	if sc.old != nil {
		next = withCanary(next)
	}

	var src ObjectSource
	listVersion := ""
	if live != nil {
		listVersion = ListVersion(live)
		src = NewClusterSource(dyn, schema.GroupVersionResource{Group: live.Spec.Group, Version: listVersion, Resource: live.Spec.Names.Plural}, 2)
	}
	it, err := Plan(ctx, live, next, src, Options{Workers: 2})
	if err != nil {
		t.Fatalf("plan: %v", err)
	}

	// The CRD: a server-side dry-run create or update.
	var applyErr error
	if live == nil {
		_, applyErr = crdClient.ApiextensionsV1().CustomResourceDefinitions().Create(ctx, next.DeepCopy(), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
	} else {
		upd := next.DeepCopy()
		upd.ResourceVersion = live.ResourceVersion
		_, applyErr = crdClient.ApiextensionsV1().CustomResourceDefinitions().Update(ctx, upd, metav1.UpdateOptions{DryRun: []string{metav1.DryRunAll}})
	}
	if (applyErr == nil) != it.Apply.Allowed {
		t.Fatalf("apply: plan says allowed=%v %v, the API server says %v", it.Apply.Allowed, it.Apply.Errors, applyErr)
	}
	if applyErr != nil {
		var se apierrors.APIStatus
		if !errors.As(applyErr, &se) || !slices.Equal(it.Apply.Errors, []string{se.Status().Message}) {
			t.Errorf("apply errors: plan %q, API server %q", it.Apply.Errors, applyErr)
		}
		return it
	}
	if live == nil {
		return it
	}

	// Before: every object as listed; then apply for real.
	before := map[string]unstructured.Unstructured{}
	list, err := resource(live, listVersion, dyn, metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range list.Items {
		before[o.GetNamespace()+"/"+o.GetName()] = o
	}
	upd := next.DeepCopy()
	upd.ResourceVersion = live.ResourceVersion
	if _, err := crdClient.ApiextensionsV1().CustomResourceDefinitions().Update(ctx, upd, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("applying the new CRD: %v", err)
	}
	waitNewSchema(t, ctx, next, it.Objects.ReadVersion, dyn)

	if it.Objects.Evaluated != int64(len(before)) {
		t.Errorf("plan evaluated %d objects, the cluster has %d", it.Objects.Evaluated, len(before))
	}
	for key, b := range before {
		var f Finding
		for _, x := range it.Objects.Findings {
			if x.Namespace+"/"+x.Name == key {
				f = x
			}
		}
		r := resource(next, it.Objects.ReadVersion, dyn, b.GetNamespace())
		after, err := r.Get(ctx, b.GetName(), metav1.GetOptions{})
		if err != nil {
			t.Fatalf("GET %s: %v", key, err)
		}
		if d := cmp.Diff(changedPaths(b.Object, after.Object, ""), sorted(f.PrunedOnRead), cmpEmpty); d != "" {
			t.Errorf("%s: pruned on read (-API server +plan):\n%s", key, d)
		}
		if d := cmp.Diff(changedPaths(after.Object, b.Object, ""), sorted(f.DefaultedOnRead), cmpEmpty); d != "" {
			t.Errorf("%s: defaulted on read (-API server +plan):\n%s", key, d)
		}
		// A no-op update of what the GET returned.
		_, err = r.Update(ctx, after.DeepCopy(), metav1.UpdateOptions{DryRun: []string{metav1.DryRunAll}})
		compareVerdict(t, key, "no-op update", err, f.UpdateErrors)
		// A strict re-create of the object as listed before (under another name: it exists).
		c := b.DeepCopy()
		for _, k := range serverMetadata {
			unstructured.RemoveNestedField(c.Object, "metadata", k)
		}
		createVersion := listVersion
		if v, err := crdinfo.Lookup(next, listVersion); err != nil || !v.Served {
			createVersion = it.Objects.ReadVersion
		}
		c.SetAPIVersion(next.Spec.Group + "/" + createVersion)
		c.SetName(c.GetName() + "-re")
		_, err = resource(next, createVersion, dyn, b.GetNamespace()).Create(ctx, c, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}, FieldValidation: "Strict"})
		compareVerdict(t, key, "strict re-create", err, f.CreateErrors)
	}
	return it
}

var cmpEmpty = cmp.Comparer(func(a, b []string) bool { return len(a) == 0 && len(b) == 0 || slices.Equal(a, b) })

func compareVerdict(t *testing.T, key, what string, serverErr error, planned []string) {
	t.Helper()
	if (serverErr == nil) != (len(planned) == 0) {
		t.Errorf("%s: %s: plan says %q, the API server says %v", key, what, planned, serverErr)
		return
	}
	if serverErr != nil {
		if d := cmp.Diff(serverErrors(serverErr), sorted(planned)); d != "" {
			t.Errorf("%s: %s errors (-API server +plan):\n%s", key, what, d)
		}
	}
}

// waitNewSchema waits (at most 20 s) until the API server knows spec.canary, the field only
// the new CRD has.
func waitNewSchema(t *testing.T, ctx context.Context, crd *apiextensionsv1.CustomResourceDefinition, version string, dyn dynamic.Interface) {
	t.Helper()
	probe := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": crd.Spec.Group + "/" + version, "kind": crd.Spec.Names.Kind,
		"metadata": map[string]any{"name": "canary-probe", "namespace": "default"},
		"spec":     map[string]any{"canary": "x"},
	}}
	if crd.Spec.Scope != apiextensionsv1.NamespaceScoped {
		unstructured.RemoveNestedField(probe.Object, "metadata", "namespace")
	}
	err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 20*time.Second, true, func(ctx context.Context) (bool, error) {
		_, err := resource(crd, version, dyn, "default").Create(ctx, probe.DeepCopy(), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}, FieldValidation: "Strict"})
		// A 404: the version is new and not served yet.
		return err == nil || !apierrors.IsNotFound(err) && !strings.Contains(err.Error(), `unknown field "spec.canary"`), nil
	})
	if err != nil {
		t.Fatalf("the API server did not pick up the new CRD: %v", err)
	}
}

func loadScenarioFiles(t *testing.T, group string) (old, next *apiextensionsv1.CustomResourceDefinition, objs []unstructured.Unstructured) {
	old = testcrd.With(readCRD(t, filepath.Join("testdata", "widgets-old.yaml")), testcrd.Group(group))
	next = testcrd.With(readCRD(t, filepath.Join("testdata", "widgets-new.yaml")), testcrd.Group(group))
	objs = regroupObjects(readObjects(t, filepath.Join("testdata", "widgets-objects.yaml")), group)
	return
}

// TestPlanMatchesServerFields: a removed field, a new required field, a tightened enum and
// maximum, a new CEL rule and a transition rule, a new default, a removed status field under
// the status subresource.
func TestPlanMatchesServerFields(t *testing.T) {
	old, next, objs := loadScenarioFiles(t, "fields.plan.example.com")
	it := runScenario(t, scenario{old: old, next: next, objects: objs, manager: "widget-controller",
		status: map[string]map[string]any{"fine": {"phase": "Ready", "oldNote": "kept until now"}}})
	f := findingOf(it, "fine")
	if f == nil || !slices.Equal(f.PrunedOnRead, []string{"status.oldNote"}) {
		t.Errorf("fine: status.oldNote should be pruned on read: %+v", f)
	}
	for _, name := range []string{"legacy", "too-big", "mode-c", "no-mode", "odd", "no-tier"} {
		if findingOf(it, name) == nil {
			t.Errorf("%s: no finding", name)
		}
	}
	if len(it.ManagedFields) != 1 || it.ManagedFields[0].Version != "v1" || !slices.Contains(it.ManagedFields[0].Managers, "widget-controller") || it.ManagedFields[0].Objects != int64(len(objs)) {
		t.Errorf("managedFields: %+v", it.ManagedFields)
	}
}

func TestPlanMatchesServerClusterScoped(t *testing.T) {
	old, next, objs := loadScenarioFiles(t, "cluster.plan.example.com")
	old.Spec.Scope, next.Spec.Scope = apiextensionsv1.ClusterScoped, apiextensionsv1.ClusterScoped
	for i := range objs {
		objs[i].SetNamespace("")
	}
	it := runScenario(t, scenario{old: old, next: next, objects: objs})
	if f := findingOf(it, "legacy"); f == nil || f.Namespace != "" || !slices.Equal(f.PrunedOnRead, []string{"spec.legacy"}) {
		t.Errorf("legacy: %+v", f)
	}
}

func betaAndV1(t *testing.T, group string, storage string) (*apiextensionsv1.CustomResourceDefinition, []unstructured.Unstructured) {
	crd := testcrd.With(readCRD(t, filepath.Join("testdata", "widgets-old.yaml")), testcrd.Group(group))
	beta := *crd.Spec.Versions[0].DeepCopy()
	beta.Name = "v1beta1"
	crd.Spec.Versions = append([]apiextensionsv1.CustomResourceDefinitionVersion{beta}, crd.Spec.Versions...)
	for i := range crd.Spec.Versions {
		crd.Spec.Versions[i].Storage = crd.Spec.Versions[i].Name == storage
	}
	// DecodeCRD defaulted storedVersions from the file's storage version.
	crd.Status.StoredVersions = []string{storage}
	var objs []unstructured.Unstructured
	for i, o := range regroupObjects(readObjects(t, filepath.Join("testdata", "widgets-objects.yaml")), group)[:3] {
		o.SetAPIVersion(group + "/v1beta1")
		if i == 2 {
			o.SetAPIVersion(group + "/v1")
		}
		objs = append(objs, o)
	}
	return crd, objs
}

func TestPlanMatchesServerRemovedStoredVersion(t *testing.T) {
	old, objs := betaAndV1(t, "removed.plan.example.com", "v1beta1")
	next := old.DeepCopy()
	next.Spec.Versions = next.Spec.Versions[1:]
	next.Spec.Versions[0].Storage = true
	it := runScenario(t, scenario{old: old, next: next, objects: objs})
	if it.Apply.Allowed || !it.Breaking {
		t.Errorf("apply %+v", it.Apply)
	}
	if !slices.ContainsFunc(it.Steps, func(s string) bool { return strings.Contains(s, "crdver retire "+old.Name+" v1beta1 --to v1") }) {
		t.Errorf("steps: %q", it.Steps)
	}
}

func TestPlanMatchesServerStorageSwitch(t *testing.T) {
	old, objs := betaAndV1(t, "switch.plan.example.com", "v1beta1")
	next := old.DeepCopy()
	next.Spec.Versions[0].Storage, next.Spec.Versions[1].Storage = false, true
	// v1 drops legacy and gains a default for mode.
	v1 := next.Spec.Versions[1].Schema.OpenAPIV3Schema
	spec := v1.Properties["spec"]
	delete(spec.Properties, "legacy")
	mode := spec.Properties["mode"]
	mode.Default = &apiextensionsv1.JSON{Raw: []byte(`"b"`)}
	spec.Properties["mode"] = mode
	v1.Properties["spec"] = spec
	objs[1].Object["spec"].(map[string]any)["legacy"] = "old-value"
	unstructured.RemoveNestedField(objs[1].Object, "spec", "mode")
	it := runScenario(t, scenario{old: old, next: next, objects: objs})
	if !it.MigrationPending || !slices.Equal(it.StoredVersionsAfterApply, []string{"v1beta1", "v1"}) || it.MigrationObjects != 3 {
		t.Errorf("storedVersions after %v, pending %v (%d objects)", it.StoredVersionsAfterApply, it.MigrationPending, it.MigrationObjects)
	}
	if f := findingOf(it, objs[1].GetName()); f == nil || !slices.Equal(f.PrunedOnRead, []string{"spec.legacy"}) || len(f.DefaultedOnRead) != 0 {
		// v1's new default is not applied on read: objects are encoded at v1beta1, and the
		// read path defaults in the encoded version only.
		t.Errorf("%s: read at v1 after the switch should prune spec.legacy and default nothing: %+v", objs[1].GetName(), f)
	}
	if it.Objects.ReadVersion != "v1" {
		t.Errorf("read version %q", it.Objects.ReadVersion)
	}
	if !slices.ContainsFunc(it.Steps, func(s string) bool { return strings.HasPrefix(s, "kubectl crdver migrate "+old.Name) }) {
		t.Errorf("steps: %q", it.Steps)
	}
}

func TestPlanMatchesServerManagers(t *testing.T) {
	for _, remove := range []bool{false, true} {
		t.Run(fmt.Sprintf("remove=%v", remove), func(t *testing.T) {
			group := "unserved.plan.example.com"
			if remove {
				group = "gone.plan.example.com"
			}
			old, objs := betaAndV1(t, group, "v1")
			old.Status.StoredVersions = nil
			next := old.DeepCopy()
			if remove {
				next.Spec.Versions = next.Spec.Versions[1:]
			} else {
				next.Spec.Versions[0].Served = false
			}
			it := runScenario(t, scenario{old: old, next: next, objects: objs, manager: "old-controller"})
			var beta *ManagedFieldsVersion
			for i := range it.ManagedFields {
				if it.ManagedFields[i].Version == "v1beta1" {
					beta = &it.ManagedFields[i]
				}
			}
			if beta == nil || !slices.Equal(beta.Managers, []string{"old-controller"}) || beta.Objects != 2 || beta.RemovedByThisChange != remove || beta.UnservedByThisChange == remove {
				t.Fatalf("managedFields: %+v", it.ManagedFields)
			}
			// old-controller created the objects at v1beta1 (Update): whether it still writes
			// v1beta1 cannot be told; with v1beta1 removed, server-side apply breaks for sure.
			reasons := strings.Join(append(append([]string{}, it.BreakingReasons...), it.UnknownReasons...), "\n")
			wantVerdict, wantReason := VerdictUnknown, "old-controller last wrote v1beta1 (Update, 2 objects), which the new CRD no longer serves: if it still does, its writes fail"
			if remove {
				wantVerdict, wantReason = VerdictBreaking, "server-side apply fails on 2 objects whose managedFields name v1beta1"
			}
			if it.Verdict != wantVerdict || !strings.Contains(reasons, wantReason) {
				t.Errorf("verdict %q (want %q), reasons:\n%s\nwant %q", it.Verdict, wantVerdict, reasons, wantReason)
			}
			wantStep := "# old-controller wrote " + group + "/v1beta1"
			if remove {
				wantStep = "kubectl crdver retire " + old.Name + " v1beta1"
			}
			if !slices.ContainsFunc(it.Steps, func(s string) bool { return strings.HasPrefix(s, wantStep) }) {
				t.Errorf("steps %q lack %q", it.Steps, wantStep)
			}
		})
	}
}

func TestPlanMatchesServerCreate(t *testing.T) {
	next := testcrd.With(readCRD(t, filepath.Join("testdata", "widgets-new.yaml")), testcrd.Group("fresh.plan.example.com"))
	it := runScenario(t, scenario{next: next})
	if it.Operation != OperationCreate || !it.Apply.Allowed {
		t.Errorf("%+v", it)
	}
	bad := next.DeepCopy()
	bad.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"] = apiextensionsv1.JSONSchemaProps{Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{"x": {}}}
	it = runScenario(t, scenario{next: bad})
	if it.Apply.Allowed {
		t.Errorf("a non-structural CRD is allowed")
	}
}

// TestPlanMatchesServerSSAOnRemovedVersion is cert-manager 1.6 → 1.7: objects whose
// managedFields name a version the release removes (a kubectl create and a GitOps apply at
// v1beta1). The plan is breaking (server-side apply fails; the applier still writes v1beta1),
// the one-time create is not called a writer, and after the apply a real server-side apply of
// such an object fails as the plan said.
func TestPlanMatchesServerSSAOnRemovedVersion(t *testing.T) {
	group := "ssa.plan.example.com"
	old, objs := betaAndV1(t, group, "v1")
	for i := range objs {
		unstructured.RemoveNestedField(objs[i].Object, "spec", "tier")
	}
	next := old.DeepCopy()
	next.Spec.Versions = next.Spec.Versions[1:]
	applied := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": group + "/v1beta1", "kind": "Widget",
		"metadata": map[string]any{"name": "applied", "namespace": "default"},
		"spec":     map[string]any{"size": int64(2), "mode": "a"},
	}}
	it := runScenario(t, scenario{old: old, next: next, objects: objs, manager: "kubectl-create",
		setup: func(t *testing.T, ctx context.Context, dyn dynamic.Interface) {
			if _, err := resource(old, "v1beta1", dyn, "default").Apply(ctx, "applied", applied, metav1.ApplyOptions{FieldManager: "kustomize-controller", Force: true}); err != nil {
				t.Fatalf("server-side apply at v1beta1: %v", err)
			}
		}})
	if it.Verdict != VerdictBreaking || !it.Breaking {
		t.Errorf("verdict %q, reasons %q", it.Verdict, it.BreakingReasons)
	}
	reasons := strings.Join(it.BreakingReasons, "\n")
	for _, want := range []string{
		"server-side apply fails on 3 objects whose managedFields name v1beta1, which the new CRD removes",
		"kustomize-controller still writes v1beta1 (Apply, 1 object), which the new CRD removes: its next apply fails; change the manifests of kustomize-controller to apiVersion " + group + "/v1",
	} {
		if !strings.Contains(reasons, want) {
			t.Errorf("reasons lack %q:\n%s", want, reasons)
		}
	}
	if strings.Contains(reasons, "kubectl-create") {
		t.Errorf("a one-time create is called a writer:\n%s", reasons)
	}
	var created *ManagerWriter
	for _, mv := range it.ManagedFields {
		for i := range mv.Writers {
			if mv.Version == "v1beta1" && mv.Writers[i].Manager == "kubectl-create" {
				created = &mv.Writers[i]
			}
		}
	}
	if created == nil || created.Role != "one-time" || !strings.HasPrefix(created.Summary, "created at v1beta1 by kubectl-create on ") || created.Objects != 2 {
		t.Errorf("kubectl-create's entries: %+v", created)
	}

	// The API server agrees: once v1beta1 is gone from the apply path (it drops it a moment
	// after the CRD update), a server-side apply of an object created at v1beta1 fails.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dyn, err := dynamic.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	patch := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": group + "/v1", "kind": "Widget",
		"metadata": map[string]any{"name": objs[0].GetName(), "namespace": "default", "labels": map[string]any{"checked": "yes"}},
	}}
	r := resource(next, "v1", dyn, "default")
	var applyErr error
	_ = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 20*time.Second, true, func(ctx context.Context) (bool, error) {
		_, applyErr = r.Apply(ctx, objs[0].GetName(), patch, metav1.ApplyOptions{FieldManager: "labeller", DryRun: []string{metav1.DryRunAll}})
		return applyErr != nil, nil
	})
	_, applyErr = r.Apply(ctx, objs[0].GetName(), patch, metav1.ApplyOptions{FieldManager: "labeller"})
	if applyErr == nil || !strings.Contains(applyErr.Error(), "invalid group/version") {
		t.Errorf("server-side apply after the CRD removed v1beta1: %v; the plan said it fails", applyErr)
	}
}

// TestPlanMatchesServerStricterNotBreaking: an added CEL rule and a tighter maxLength that no
// live object violates: the API server accepts every object's update and re-create (checked by
// runScenario), so the plan says stricter, not breaking; a new object that breaks the rule is
// rejected, so the rule is indeed stricter.
func TestPlanMatchesServerStricterNotBreaking(t *testing.T) {
	group := "stricter.plan.example.com"
	old := testcrd.With(readCRD(t, filepath.Join("testdata", "widgets-old.yaml")), testcrd.Group(group))
	next := testcrd.With(readCRD(t, filepath.Join("testdata", "widgets-stricter.yaml")), testcrd.Group(group))
	objs := regroupObjects(readObjects(t, filepath.Join("testdata", "widgets-objects.yaml")), group)
	for i := range objs {
		unstructured.RemoveNestedField(objs[i].Object, "spec", "tier")
	}
	it := runScenario(t, scenario{old: old, next: next, objects: objs, manager: "widget-controller"})
	if it.Verdict != VerdictStricter || it.Breaking || len(it.Objects.Findings) != 0 || len(it.BreakingReasons)+len(it.UnknownReasons) != 0 {
		t.Errorf("verdict %q, findings %+v, reasons %q %q", it.Verdict, it.Objects.Findings, it.BreakingReasons, it.UnknownReasons)
	}
	if !slices.ContainsFunc(it.Stricter, func(c SchemaChange) bool { return c.Path == "spec" && strings.HasPrefix(c.Change, "CEL rule added") }) {
		t.Errorf("stricter: %+v", it.Stricter)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dyn, err := dynamic.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	root := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": group + "/v1", "kind": "Widget",
		"metadata": map[string]any{"name": "root-owned", "namespace": "default"},
		"spec":     map[string]any{"owner": "root"},
	}}
	_, err = resource(next, "v1", dyn, "default").Create(ctx, root, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
	if err == nil || !strings.Contains(err.Error(), "owner must not be root") {
		t.Errorf("a new object that breaks the added rule: %v", err)
	}
}

// TestPlanMatchesServerInvalidOnRecreate: an owner of 70 characters, valid under the live
// maxLength and over the new one. The API server accepts the object's no-op update (it ratchets
// the unchanged field) and rejects its strict re-create with the errors plan predicts (checked
// by runScenario). The plan's verdict is invalid-on-recreate, not breaking; its runbook has a
// step for a person naming the object with the server's errors and how to look at and edit it.
func TestPlanMatchesServerInvalidOnRecreate(t *testing.T) {
	group := "recreate.plan.example.com"
	old := testcrd.With(readCRD(t, filepath.Join("testdata", "widgets-old.yaml")), testcrd.Group(group))
	next := testcrd.With(readCRD(t, filepath.Join("testdata", "widgets-stricter.yaml")), testcrd.Group(group))
	objs := regroupObjects(readObjects(t, filepath.Join("testdata", "widgets-objects.yaml")), group)[:2]
	for i := range objs {
		unstructured.RemoveNestedField(objs[i].Object, "spec", "tier")
	}
	long := objs[0].DeepCopy()
	long.SetName("long-owner")
	unstructured.SetNestedField(long.Object, strings.Repeat("o", 70), "spec", "owner")
	it := runScenario(t, scenario{old: old, next: next, objects: append(objs, *long), manager: "widget-controller"})
	f := findingOf(it, "long-owner")
	if f == nil || len(f.UpdateErrors) != 0 || len(f.CreateErrors) == 0 || !slices.Equal(f.Kinds, []Kind{KindInvalidOnRecreate}) {
		t.Fatalf("long-owner: %+v", f)
	}
	if it.Verdict != VerdictInvalidOnRecreate || it.Breaking || len(it.BreakingReasons)+len(it.UnknownReasons) != 0 || len(it.InvalidOnRecreateReasons) != 1 || ExitCode(it.Verdict, false) != 1 {
		t.Errorf("verdict %q breaking %v, reasons %q %q %q", it.Verdict, it.Breaking, it.BreakingReasons, it.UnknownReasons, it.InvalidOnRecreateReasons)
	}
	steps := Runbook([]Item{*it}, RunbookOptions{ApplyFile: "release.yaml"})
	i := slices.IndexFunc(steps, func(s RunbookStep) bool { return s.Action == ActionFixRecreate })
	if i < 0 {
		t.Fatalf("no %s step: %+v", ActionFixRecreate, steps)
	}
	st := steps[i]
	resource := "widgets.v1." + group
	want := []string{"kubectl get " + resource + " long-owner -n default -o yaml", "kubectl edit " + resource + " long-owner -n default"}
	if !st.Manual || st.Target != "v1" || !slices.Equal(st.Commands, want) || len(st.Objects) != 1 || st.Objects[0] != "default/long-owner: "+strings.Join(f.CreateErrors, "; ") {
		t.Errorf("fix step: %+v", st)
	}
	if last := steps[len(steps)-1]; last.Action != ActionVerify || !slices.Contains(last.Commands, "kubectl crdver plan -f release.yaml") {
		t.Errorf("last step: %+v", last)
	}
}

// TestPlanMatchesServerStorageVersusStorage is Strimzi's KafkaUser: the new storage version v1
// lacks a field the old storage version v1beta1 holds, and v1 itself is unchanged. The plan
// lists the field as a change from v1beta1 to v1 and the object that holds it as losing it on
// read, which the API server confirms after the apply.
func TestPlanMatchesServerStorageVersusStorage(t *testing.T) {
	group := "kafka.plan.example.com"
	old := kafkaLike(t, group)
	next := old.DeepCopy()
	next.Spec.Versions[0].Storage, next.Spec.Versions[0].Served = false, false
	next.Spec.Versions[1].Storage = true
	var objs []unstructured.Unstructured
	for _, o := range regroupObjects(readObjects(t, filepath.Join("testdata", "widgets-objects.yaml")), group)[:2] {
		o.SetAPIVersion(group + "/v1beta1")
		unstructured.RemoveNestedField(o.Object, "spec", "tier")
		objs = append(objs, o)
	}
	it := runScenario(t, scenario{old: old, next: next, objects: objs})
	if !slices.ContainsFunc(it.SchemaChanges, func(c SchemaChange) bool {
		return c.From == "v1beta1" && c.Version == "v1" && c.Path == "spec.legacy" && c.Effect == EffectLossy
	}) {
		t.Errorf("no change v1beta1 → v1 spec.legacy: %+v", it.SchemaChanges)
	}
	if f := findingOf(it, "legacy"); f == nil || !slices.Equal(f.PrunedOnRead, []string{"spec.legacy"}) || it.Verdict != VerdictBreaking {
		t.Errorf("legacy: %+v; verdict %q", f, it.Verdict)
	}
}

var _ = os.Getenv
