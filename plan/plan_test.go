package plan

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	crdinfo "github.com/crdver/kubectl-crdver/crd"
	"github.com/crdver/kubectl-crdver/preview"
)

func readCRD(t testing.TB, path string) *apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	crd, err := crdinfo.Decode(b)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return crd
}

func readObjects(t testing.TB, path string) []unstructured.Unstructured {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []unstructured.Unstructured
	for _, doc := range strings.Split(string(b), "\n---\n") {
		js, err := yaml.YAMLToJSON([]byte(doc))
		if err != nil {
			t.Fatal(err)
		}
		u := unstructured.Unstructured{}
		if err := u.UnmarshalJSON(js); err != nil {
			t.Fatal(err)
		}
		out = append(out, u)
	}
	return out
}

var _ = utilyaml.NewYAMLReader

func findingOf(it *Item, name string) *Finding {
	for i := range it.Objects.Findings {
		if it.Objects.Findings[i].Name == name {
			return &it.Objects.Findings[i]
		}
	}
	return nil
}

func hasChange(it *Item, path, prefix string, breaking bool) bool {
	for _, c := range it.SchemaChanges {
		if c.Path == path && strings.HasPrefix(c.Change, prefix) && c.Breaking == breaking {
			return true
		}
	}
	return false
}

func TestPlanWidgetsOffline(t *testing.T) {
	live := readCRD(t, filepath.Join("testdata", "widgets-old.yaml"))
	next := readCRD(t, filepath.Join("testdata", "widgets-new.yaml"))
	objs := readObjects(t, filepath.Join("testdata", "widgets-objects.yaml"))
	it, err := Plan(context.Background(), live, next, &SliceSource{Objects: objs, PageSize: 2}, Options{Workers: 2})
	if err != nil {
		t.Fatal(err)
	}
	if !it.Apply.Allowed || it.Operation != OperationUpdate || !it.Breaking {
		t.Errorf("apply %+v, operation %s, breaking %v", it.Apply, it.Operation, it.Breaking)
	}
	for _, c := range []struct {
		path, prefix string
		breaking     bool
	}{
		{"spec.legacy", "removed", true},
		{"status.oldNote", "removed", true},
		{"spec.tier", "added, required", true},
		{"spec.size", "maximum 100 → 10", true},
		{"spec.mode", "enum \"a\"|\"b\"|\"c\" → \"a\"|\"b\"", true},
		{"spec.mode", "default added", false},
		{"spec", "CEL rule added", true},
		{"spec.owner", "CEL transition rule added", true},
	} {
		if !hasChange(it, c.path, c.prefix, c.breaking) {
			t.Errorf("no schema change %s %q (breaking %v) in %+v", c.path, c.prefix, c.breaking, it.SchemaChanges)
		}
	}
	if it.Objects.Evaluated != 7 || it.Objects.Total != 7 {
		t.Errorf("evaluated %d of %d", it.Objects.Evaluated, it.Objects.Total)
	}
	if f := findingOf(it, "fine"); f != nil {
		t.Errorf("fine has a finding: %+v", f)
	}
	if f := findingOf(it, "legacy"); f == nil || !slices.Equal(f.PrunedOnRead, []string{"spec.legacy"}) || len(f.CreateErrors) == 0 || !strings.Contains(f.CreateErrors[0], `unknown field "spec.legacy"`) {
		t.Errorf("legacy: %+v", f)
	}
	if f := findingOf(it, "no-mode"); f == nil || !slices.Equal(f.DefaultedOnRead, []string{"spec.mode"}) {
		t.Errorf("no-mode: %+v", f)
	}
	// Ratcheting: a no-op update of an object over the new maximum passes.
	if f := findingOf(it, "too-big"); f == nil || len(f.UpdateErrors) != 0 || len(f.CreateErrors) == 0 {
		t.Errorf("too-big: %+v", f)
	}
	// Order is the list order.
	var names []string
	for _, f := range it.Objects.Findings {
		names = append(names, f.Name)
	}
	if !slices.IsSorted(indexes(names, objs)) {
		t.Errorf("findings out of order: %v", names)
	}
	if !slices.Contains(it.Steps, "kubectl apply --server-side --force-conflicts -f NEW-CRDS.yaml") {
		t.Errorf("steps: %v", it.Steps)
	}
}

func indexes(names []string, objs []unstructured.Unstructured) []int {
	var out []int
	for _, n := range names {
		out = append(out, slices.IndexFunc(objs, func(u unstructured.Unstructured) bool { return u.GetName() == n }))
	}
	return out
}

// planRemovingFirst plans, without objects, the release that removes live's first version
// (twoVersions' v1beta1) and makes the next one the storage version.
func planRemovingFirst(t *testing.T, live *apiextensionsv1.CustomResourceDefinition) *Item {
	t.Helper()
	next := live.DeepCopy()
	next.Spec.Versions = next.Spec.Versions[1:]
	next.Spec.Versions[0].Storage = true
	it, err := Plan(context.Background(), live, next, nil, Options{})
	if err != nil {
		t.Fatal(err)
	}
	return it
}

func TestPlanRemovedStoredVersion(t *testing.T) {
	live := twoVersions(t, true)
	it := planRemovingFirst(t, live) // v1 only
	if it.Apply.Allowed || len(it.Apply.Errors) != 1 || !strings.Contains(it.Apply.Errors[0], "missing from spec.versions") {
		t.Fatalf("apply: %+v", it.Apply)
	}
	if !slices.Equal(it.Versions.Removed, []string{"v1beta1"}) || it.StorageVersion != (StorageChange{"v1beta1", "v1"}) {
		t.Errorf("versions %+v storage %+v", it.Versions, it.StorageVersion)
	}
	if !it.Breaking || !slices.ContainsFunc(it.Steps, func(s string) bool {
		return strings.HasPrefix(s, "kubectl crdver retire widgets.plan.example.com v1beta1 --to v1")
	}) {
		t.Errorf("breaking %v steps %v", it.Breaking, it.Steps)
	}
}

// twoVersions is widgets-old with v1beta1 (storage) and v1 served.
func twoVersions(t *testing.T, pending bool) *apiextensionsv1.CustomResourceDefinition {
	crd := readCRD(t, filepath.Join("testdata", "widgets-old.yaml"))
	beta := *crd.Spec.Versions[0].DeepCopy()
	beta.Name = "v1beta1"
	crd.Spec.Versions[0].Storage = false
	crd.Spec.Versions = append([]apiextensionsv1.CustomResourceDefinitionVersion{beta}, crd.Spec.Versions...)
	crd.Status.StoredVersions = []string{"v1beta1"}
	return crd
}

func TestPlanSelfReportsNothing(t *testing.T) {
	crd := readCRD(t, filepath.Join("testdata", "widgets-new.yaml"))
	objs := readObjects(t, filepath.Join("testdata", "widgets-objects.yaml"))
	var valid []unstructured.Unstructured
	p, err := preview.NewPreviewer(crd)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		b, _ := o.MarshalJSON()
		r, err := p.Create(context.Background(), b, preview.PreviewOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if r.Accepted() {
			valid = append(valid, unstructured.Unstructured{Object: r.Object})
		}
	}
	if len(valid) < 2 {
		t.Fatalf("only %d valid objects", len(valid))
	}
	it, err := Plan(context.Background(), crd, crd, &SliceSource{Objects: valid}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if it.Breaking || len(it.SchemaChanges) > 0 || len(it.Objects.Findings) > 0 || !it.Apply.Allowed {
		t.Errorf("plan of a CRD against itself reports something: %+v", it)
	}
}

func TestPlanCreate(t *testing.T) {
	crd := readCRD(t, filepath.Join("testdata", "widgets-new.yaml"))
	it, err := Plan(context.Background(), nil, crd, nil, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if it.Operation != OperationCreate || !it.Apply.Allowed || it.Breaking || !slices.Equal(it.StoredVersionsAfterApply, []string{"v1"}) {
		t.Errorf("%+v", it)
	}
	bad := crd.DeepCopy()
	bad.Spec.Versions[0].Storage = false
	it, err = Plan(context.Background(), nil, bad, nil, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if it.Apply.Allowed || !it.Breaking {
		t.Errorf("a CRD with no storage version is accepted: %+v", it.Apply)
	}
}

func TestPlanInterrupted(t *testing.T) {
	live := readCRD(t, filepath.Join("testdata", "widgets-old.yaml"))
	objs := readObjects(t, filepath.Join("testdata", "widgets-objects.yaml"))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := Plan(ctx, live, live, &SliceSource{Objects: objs}, Options{})
	if err == nil || !strings.Contains(err.Error(), "interrupted") {
		t.Errorf("err = %v", err)
	}
}

func TestTighter(t *testing.T) {
	f := func(v float64) *float64 { return &v }
	for _, tc := range []struct {
		old, new     *float64
		oldEx, newEx bool
		lower, want  bool
	}{
		{nil, f(1), false, false, true, true},     // minimum added
		{f(1), nil, false, false, true, false},    // minimum removed
		{f(1), f(2), false, false, true, true},    // minimum raised
		{f(2), f(1), false, false, true, false},   // minimum lowered
		{f(10), f(5), false, false, false, true},  // maximum lowered
		{f(5), f(10), false, false, false, false}, // maximum raised
		{f(5), f(5), false, true, false, true},    // maximum made exclusive
		{f(5), f(5), true, false, false, false},   // maximum made inclusive
	} {
		if got := tighter(tc.old, tc.new, tc.oldEx, tc.newEx, tc.lower); got != tc.want {
			t.Errorf("tighter(%v, %v, %v, %v, lower=%v) = %v", ptr(tc.old), ptr(tc.new), tc.oldEx, tc.newEx, tc.lower, got)
		}
	}
}

func ptr(f *float64) any {
	if f == nil {
		return nil
	}
	return *f
}

// TestSchemaChangesLoosened: loosened constraints and removed rules are listed, not breaking.
func TestSchemaChangesLoosened(t *testing.T) {
	next := readCRD(t, filepath.Join("testdata", "widgets-old.yaml"))
	live := readCRD(t, filepath.Join("testdata", "widgets-new.yaml"))
	it, err := Plan(context.Background(), live, next, nil, Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		path, prefix string
		breaking     bool
	}{
		{"spec.size", "maximum 10 → 100", false},
		{"spec.mode", "enum \"a\"|\"b\" → \"a\"|\"b\"|\"c\"", false},
		{"spec.mode", "default removed", true},
		{"spec", "CEL rule removed", false},
		{"spec.tier", "removed", true},
		{"spec.legacy", "added (string)", false},
	} {
		if !hasChange(it, c.path, c.prefix, c.breaking) {
			t.Errorf("no schema change %s %q (breaking %v) in %+v", c.path, c.prefix, c.breaking, it.SchemaChanges)
		}
	}
}

// TestPlanNonStructuralNewSchema: the API server refuses the CRD, and plan does not evaluate
// objects with a schema it would not use.
func TestPlanNonStructuralNewSchema(t *testing.T) {
	live := readCRD(t, filepath.Join("testdata", "widgets-old.yaml"))
	next := live.DeepCopy()
	next.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"] = apiextensionsv1.JSONSchemaProps{Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{"x": {}}}
	objs := readObjects(t, filepath.Join("testdata", "widgets-objects.yaml"))
	it, err := Plan(context.Background(), live, next, &SliceSource{Objects: objs}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if it.Apply.Allowed || !it.Breaking || it.Objects.Evaluated != 0 || len(it.Objects.Notes) == 0 || !strings.Contains(it.Objects.Notes[0], "no structural schema") {
		t.Errorf("apply %+v, objects %+v", it.Apply, it.Objects)
	}
}

// kafkaLike is widgets-old with v1beta1 the storage version holding spec.legacy and v1 served
// without it (Strimzi's KafkaUser: acls[].operation exists only in v1beta2); stored lists
// status.storedVersions.
func kafkaLike(t *testing.T, group string) *apiextensionsv1.CustomResourceDefinition {
	crd := readCRD(t, filepath.Join("testdata", "widgets-old.yaml"))
	if group != "" {
		crd.Spec.Group = group
		crd.Name = crd.Spec.Names.Plural + "." + group
	}
	beta := *crd.Spec.Versions[0].DeepCopy()
	beta.Name = "v1beta1"
	v1 := &crd.Spec.Versions[0]
	v1.Storage = false
	spec := v1.Schema.OpenAPIV3Schema.Properties["spec"]
	delete(spec.Properties, "legacy")
	v1.Schema.OpenAPIV3Schema.Properties["spec"] = spec
	crd.Spec.Versions = append([]apiextensionsv1.CustomResourceDefinitionVersion{beta}, crd.Spec.Versions...)
	crd.Status.StoredVersions = []string{"v1beta1"}
	return crd
}

// TestPlanStorageVersusStorage: the new storage version lacks a field the old storage version
// holds; same-named versions are unchanged, so only comparing the storage versions shows it.
func TestPlanStorageVersusStorage(t *testing.T) {
	live := kafkaLike(t, "")
	next := live.DeepCopy()
	next.Spec.Versions[0].Storage, next.Spec.Versions[0].Served = false, false
	next.Spec.Versions[1].Storage = true
	var objs []unstructured.Unstructured
	for _, o := range readObjects(t, filepath.Join("testdata", "widgets-objects.yaml"))[:2] { // fine, legacy
		o.SetAPIVersion("plan.example.com/v1beta1")
		unstructured.RemoveNestedField(o.Object, "spec", "tier")
		objs = append(objs, o)
	}
	it, err := Plan(context.Background(), live, next, &SliceSource{Objects: objs}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	var cross []SchemaChange
	for _, c := range it.SchemaChanges {
		if c.From != "" {
			cross = append(cross, c)
		}
	}
	want := []SchemaChange{{Version: "v1", From: "v1beta1", Path: "spec.legacy", Change: "removed (was string): pruned from stored objects on read", Breaking: true, Effect: EffectLossy}}
	if d := cmp.Diff(want, cross); d != "" {
		t.Errorf("storage-version changes (-want +got):\n%s", d)
	}
	if f := findingOf(it, "legacy"); f == nil || !slices.Equal(f.PrunedOnRead, []string{"spec.legacy"}) {
		t.Errorf("legacy: %+v", f)
	}
	if it.Verdict != VerdictBreaking || !slices.ContainsFunc(it.BreakingReasons, func(r string) bool { return strings.HasPrefix(r, "1 object loses fields on read") }) {
		t.Errorf("verdict %q, reasons %q", it.Verdict, it.BreakingReasons)
	}

	// Removing v1beta1 outright: the apply is rejected (it is in storedVersions) and the
	// comparison is the same.
	next.Spec.Versions = next.Spec.Versions[1:]
	it, err = Plan(context.Background(), live, next, nil, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if it.Apply.Allowed || it.Verdict != VerdictBreaking || !slices.ContainsFunc(it.SchemaChanges, func(c SchemaChange) bool { return c.From == "v1beta1" && c.Path == "spec.legacy" }) {
		t.Errorf("apply %+v, verdict %q, changes %+v", it.Apply, it.Verdict, it.SchemaChanges)
	}
}

// TestPlanVerdicts: stricter rules no object violates are stricter, not breaking; the same
// rules with an object that violates them, or with no objects evaluated, are not.
func TestPlanVerdicts(t *testing.T) {
	live := readCRD(t, filepath.Join("testdata", "widgets-old.yaml"))
	next := readCRD(t, filepath.Join("testdata", "widgets-stricter.yaml"))
	objs := readObjects(t, filepath.Join("testdata", "widgets-objects.yaml"))
	it, err := Plan(context.Background(), live, next, &SliceSource{Objects: objs}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if it.Verdict != VerdictStricter || it.Breaking || len(it.Stricter) != 2 || len(it.BreakingReasons)+len(it.UnknownReasons) != 0 {
		t.Errorf("verdict %q, stricter %+v, reasons %q %q", it.Verdict, it.Stricter, it.BreakingReasons, it.UnknownReasons)
	}
	long := objs[0].DeepCopy()
	long.SetName("long-owner")
	unstructured.SetNestedField(long.Object, strings.Repeat("o", 70), "spec", "owner")
	it, err = Plan(context.Background(), live, next, &SliceSource{Objects: append(objs, *long)}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	// An owner of 70 characters is valid now and over the new maxLength: the no-op update
	// passes (ratcheting), a restore of the object is rejected. The object is invalid on
	// re-create: the user must act (exit 1), but nothing breaks on the apply.
	if it.Verdict != VerdictInvalidOnRecreate || it.Breaking || len(it.BreakingReasons) != 0 ||
		!slices.ContainsFunc(it.InvalidOnRecreateReasons, func(r string) bool { return strings.HasPrefix(r, "1 object violates the new schema") }) ||
		!slices.Equal(it.Kinds, []Kind{KindInvalidOnRecreate, KindStricter}) || ExitCode(it.Verdict, false) != 1 {
		t.Errorf("an object over the new rule: verdict %q kinds %v, reasons %q %q", it.Verdict, it.Kinds, it.BreakingReasons, it.InvalidOnRecreateReasons)
	}
	if f := findingOf(it, "long-owner"); f == nil || !slices.Equal(f.Kinds, []Kind{KindInvalidOnRecreate}) || len(f.CreateErrors) == 0 {
		t.Errorf("long-owner: %+v", f)
	}
	it, err = Plan(context.Background(), live, next, &SliceSource{Objects: objs}, Options{Sample: 3})
	if err != nil {
		t.Fatal(err)
	}
	if it.Verdict != VerdictUnknown || !it.Breaking || len(it.UnknownReasons) != 1 || !strings.HasPrefix(it.UnknownReasons[0], "only 3 of 7 objects were evaluated") {
		t.Errorf("sampled: verdict %q, unknown %q", it.Verdict, it.UnknownReasons)
	}
}

// TestPlanUnservedVersionAppliedByGitOps: the release stops serving v1alpha2 (kept in
// spec.versions): server-side apply keeps working, but kustomize-controller applies manifests
// at v1alpha2, so its next apply fails (breaking, with what to change); the one-time create is
// reported as such.
func TestPlanUnservedVersionAppliedByGitOps(t *testing.T) {
	live := readCRD(t, filepath.Join("testdata", "certs-old.yaml"))
	next := live.DeepCopy()
	next.Status = apiextensionsv1.CustomResourceDefinitionStatus{}
	next.Spec.Versions[0].Served = false
	objs := readObjects(t, filepath.Join("testdata", "certs-objects.yaml"))
	it, err := Plan(context.Background(), live, next, &SliceSource{Objects: objs}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"kustomize-controller still writes v1alpha2 (Apply, 1 object), which the new CRD no longer serves: its next apply fails; change the manifests of kustomize-controller to apiVersion plan.example.com/v1"}
	if d := cmp.Diff(want, it.BreakingReasons); d != "" || it.Verdict != VerdictBreaking || len(it.UnknownReasons) != 0 {
		t.Errorf("verdict %q, unknown %q, breaking reasons (-want +got):\n%s", it.Verdict, it.UnknownReasons, d)
	}
	var created ManagerWriter
	for _, mv := range it.ManagedFields {
		for _, w := range mv.Writers {
			if w.Manager == "kubectl-create" {
				created = w
			}
		}
	}
	if created.Role != "one-time" || created.Summary != "created at v1alpha2 by kubectl-create on 2025-03-01" || created.Advice != "" {
		t.Errorf("kubectl-create: %+v", created)
	}
}
