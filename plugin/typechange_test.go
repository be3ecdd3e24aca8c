package plugin

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/yaml"

	"github.com/google/go-cmp/cmp"

	"github.com/crdver/kubectl-crdver/internal/testcrd"
	"github.com/crdver/kubectl-crdver/internal/testenv"
	"github.com/crdver/kubectl-crdver/plan"
)

func managersOf(u *unstructured.Unstructured) []string {
	var out []string
	for _, m := range u.GetManagedFields() {
		out = append(out, m.Manager+"/"+string(m.Operation))
	}
	slices.Sort(out)
	return out
}

// TestTypeChangeFromPlanToFix: the typechange release on the API server, each object with an
// Update manager (editor) and an Apply manager (gitops). Plan names each object's values of
// another type: opaque's (text that spells no map) in the step for a person, at v1, the others
// converted by the rewrite with --fix-values; upgrade without --fix-values refuses before any
// write, naming it. With the new CRD applied by hand, migrate --fix-values refuses before any
// write while opaque's value converts to nothing; once a person has changed its text at v1,
// it converts both objects' values, rewrites every object at v2 and trims, every manager kept,
// server-side apply working and plan of the release clean.
func TestTypeChangeFromPlanToFix(t *testing.T) {
	isolateCache(t)
	ctx := context.Background()
	const group = "typechange.plugin.example.com"
	live := testcrd.With(testenv.ReadCRDs(t, td("typechange", "live.yaml"))[0], testcrd.Group(group))
	next := testcrd.With(testenv.ReadCRDs(t, td("typechange", "new.yaml"))[0], testcrd.Group(group))
	registerCRD(t, live)
	dyn := dynamic.NewForConfigOrDie(env.Config)
	ri := func(v string) dynamic.ResourceInterface {
		return dyn.Resource(schema.GroupVersionResource{Group: group, Version: v, Resource: "brokers"}).Namespace("default")
	}
	b, err := os.ReadFile(td("typechange", "objects.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, doc := range strings.Split(string(b), "\n---\n") {
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal([]byte(doc), &u.Object); err != nil {
			t.Fatal(err)
		}
		u.SetAPIVersion(group + "/v1")
		if _, err := ri("v1").Create(ctx, u, metav1.CreateOptions{FieldManager: "editor"}); err != nil {
			t.Fatal(err)
		}
		names = append(names, u.GetName())
	}
	apply := func(v, name string) error {
		body := `{"apiVersion":"` + group + `/` + v + `","kind":"Broker","metadata":{"name":"` + name + `","namespace":"default","labels":{"team":"data"}}}`
		_, err := ri(v).Patch(ctx, name, types.ApplyPatchType, []byte(body), metav1.PatchOptions{FieldManager: "gitops"})
		return err
	}
	for _, n := range names {
		if err := apply("v1", n); err != nil {
			t.Fatal(err)
		}
	}
	dir := t.TempDir()
	nb, err := yaml.Marshal(next)
	if err != nil {
		t.Fatal(err)
	}
	newFile := filepath.Join(dir, "new.yaml")
	if err := os.WriteFile(newFile, nb, 0o600); err != nil {
		t.Fatal(err)
	}

	// Plan: breaking, per object, with the fix-values step.
	res := runCluster(t, "plan", "-f", newFile, "-o", "json")
	if res.code != 1 {
		t.Fatalf("plan: exit %d\n%s", res.code, res.stderr)
	}
	var rep plan.Report
	if err := json.Unmarshal([]byte(res.stdout), &rep); err != nil {
		t.Fatal(err)
	}
	it := rep.Items[0]
	if it.Verdict != plan.VerdictBreaking || !slices.Contains(it.Kinds, plan.KindTypeMismatch) {
		t.Errorf("plan: verdict %s kinds %v", it.Verdict, it.Kinds)
	}
	// The runbook: opaque (its text spells no map) for a person after the backup, at v1; the
	// rewrite with --fix-values converts text-config's values.
	var person, migrate *plan.RunbookStep
	for i := range rep.Runbook {
		switch st := &rep.Runbook[i]; {
		case st.Action == plan.ActionFixValues:
			person = st
		case st.Action == plan.ActionMigrate && st.FixValues:
			migrate = st
		}
	}
	if person == nil || len(person.Objects) != 1 || person.Version != "v1" || migrate == nil || len(migrate.Objects) != 2 {
		t.Fatalf("plan: fix-values step %+v, rewrite %+v", person, migrate)
	}
	human := runCluster(t, "plan", "-f", newFile)
	mustContain(t, "plan", human.stdout, "default/text-config: type: .spec.config is string, v2 expects map", "kubectl edit brokers.v1."+group+" opaque -n default",
		"kubectl crdver migrate brokers."+group+" --fix-values")

	// Upgrade refuses before any write.
	before := map[string]string{}
	for _, n := range names {
		u, err := ri("v1").Get(ctx, n, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		before[n] = u.GetResourceVersion()
	}
	res = runCluster(t, "upgrade", "-f", newFile, "--yes", "--allow-data-loss", "--allow-ownership-loss", "--backup", filepath.Join(dir, "backup.yaml"))
	if res.code != 1 {
		t.Fatalf("upgrade: exit %d, want 1\n%s\n%s", res.code, res.stdout, res.stderr)
	}
	mustContain(t, "upgrade", res.stdout+res.stderr, "values whose type does not fit", "--fix-values")
	cs := apiextensionsclient.NewForConfigOrDie(env.Config)
	cur, err := cs.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, live.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(cur.Spec.Versions) != 1 {
		t.Errorf("the refused upgrade changed the CRD: %d versions", len(cur.Spec.Versions))
	}
	for _, n := range names {
		u, err := ri("v1").Get(ctx, n, metav1.GetOptions{})
		if err != nil || u.GetResourceVersion() != before[n] {
			t.Errorf("the refused upgrade wrote %s (%v)", n, err)
		}
	}

	// Apply the release by hand (the new storage version v2 now, before any backup: what the
	// old advice had users do); migrate --to v2 --fix-values then refuses before any write for
	// opaque, whose value converts to nothing.
	cur.Spec.Versions = next.Spec.Versions
	if _, err := cs.ApiextensionsV1().CustomResourceDefinitions().Update(ctx, cur, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := env.WaitEstablished(ctx, live.Name); err != nil {
		t.Fatal(err)
	}
	mgrs := map[string][]string{}
	for _, n := range names {
		u, _ := ri("v2").Get(ctx, n, metav1.GetOptions{})
		mgrs[n] = managersOf(u)
		before[n] = u.GetResourceVersion()
	}
	migrateArgs := []string{"migrate", live.Name, "--to", "v2", "--fix-values", "--yes", "--checkpoint", filepath.Join(dir, "cp.json")}
	res = runCluster(t, migrateArgs...)
	if res.code != 1 {
		t.Fatalf("migrate --fix-values with opaque unconvertible: exit %d, want 1\n%s\n%s", res.code, res.stdout, res.stderr)
	}
	mustContain(t, "migrate --fix-values", res.stderr, "default/opaque (.spec.config is string, v2 expects map: no lossless conversion)", "nothing was written")
	for _, n := range names {
		if u, err := ri("v2").Get(ctx, n, metav1.GetOptions{}); err != nil || u.GetResourceVersion() != before[n] {
			t.Errorf("the refused migrate wrote %s (%v)", n, err)
		}
	}

	// The person's change at v1 (the runbook's fix-values step): text that spells a map. Then
	// migrate --fix-values converts both objects' values before its rewrite, keeping every
	// manager (the person's kubectl-patch beside them), and server-side apply works at v2.
	if _, err := ri("v1").Patch(ctx, "opaque", types.MergePatchType, []byte(`{"spec":{"config":"words: just\n"}}`), metav1.PatchOptions{FieldManager: "kubectl-patch"}); err != nil {
		t.Fatal(err)
	}
	mgrs["opaque"] = append(mgrs["opaque"], "kubectl-patch/Update")
	slices.Sort(mgrs["opaque"])
	res = runCluster(t, migrateArgs...)
	if res.code != 0 {
		t.Fatalf("migrate --fix-values: exit %d, want 0\n%s\n%s", res.code, res.stdout, res.stderr)
	}
	mustContain(t, "migrate --fix-values", res.stderr, "text-config: converted .spec.config is string, v2 expects map", "opaque: converted .spec.config is string, v2 expects map", "field managers kept")
	if got, err := cs.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, live.Name, metav1.GetOptions{}); err != nil || !slices.Equal(got.Status.StoredVersions, []string{"v2"}) {
		t.Errorf("after migrate: storedVersions %v (%v), want [v2]", got.Status.StoredVersions, err)
	}
	for _, n := range names {
		u, _ := ri("v2").Get(ctx, n, metav1.GetOptions{})
		if got := managersOf(u); !slices.Equal(got, mgrs[n]) {
			t.Errorf("%s: managers %v after migrate --fix-values, %v before", n, got, mgrs[n])
		}
		if err := apply("v2", n); err != nil {
			t.Errorf("%s: server-side apply at v2 after migrate --fix-values: %v", n, err)
		}
	}
	u, _ := ri("v2").Get(ctx, "text-config", metav1.GetOptions{})
	cfg, _, _ := unstructured.NestedMap(u.Object, "spec", "config")
	hosts, _, _ := unstructured.NestedStringSlice(u.Object, "spec", "hosts")
	port, _, _ := unstructured.NestedString(u.Object, "spec", "port")
	if cfg["retention"] != "7d" || !slices.Equal(hosts, []string{"broker-0.example.com"}) || port != "9092" {
		t.Errorf("text-config after migrate --fix-values: %v", u.Object["spec"])
	}
	// Plan of the release: nothing left (no value of another type, nothing lost).
	res = runCluster(t, "plan", "-f", newFile, "-o", "json")
	if res.code != 0 {
		t.Errorf("plan after migrate --fix-values: exit %d, want 0\n%s", res.code, res.stdout)
	}
}

// olderServer starts kube-apiserver 1.34 (testenv.StartBuiltMinor: skipped when not built)
// and makes it the package's env for the rest of the test.
func olderServer(t *testing.T) {
	t.Helper()
	older := testenv.StartBuiltMinor(t, "1.34")
	current := env
	env = older
	t.Cleanup(func() { env = current })
}

// typechangeApplied sets up the typechange pair on env with the new CRD applied (objects
// written at v1 by editor and applied by gitops), and returns the CRD's name and a snapshot
// function: resourceVersion and managers per object.
func typechangeApplied(t *testing.T, group string) (string, func() (map[string]string, map[string][]string)) {
	ctx := context.Background()
	live := testcrd.With(testenv.ReadCRDs(t, td("typechange", "live.yaml"))[0], testcrd.Group(group))
	next := testcrd.With(testenv.ReadCRDs(t, td("typechange", "new.yaml"))[0], testcrd.Group(group))
	registerCRD(t, live)
	dyn := dynamic.NewForConfigOrDie(env.Config)
	ri := func(v string) dynamic.ResourceInterface {
		return dyn.Resource(schema.GroupVersionResource{Group: group, Version: v, Resource: "brokers"}).Namespace("default")
	}
	specs := map[string]map[string]any{
		"text-config": {"config": "a: 1\n", "hosts": "h", "port": int64(1)},
		"plain":       {"replicas": int64(1)},
	}
	for n, spec := range specs {
		u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": group + "/v1", "kind": "Broker",
			"metadata": map[string]any{"name": n, "namespace": "default"}, "spec": spec}}
		if _, err := ri("v1").Create(ctx, u, metav1.CreateOptions{FieldManager: "editor"}); err != nil {
			t.Fatal(err)
		}
		body := `{"apiVersion":"` + group + `/v1","kind":"Broker","metadata":{"name":"` + n + `","namespace":"default","labels":{"team":"data"}}}`
		if _, err := ri("v1").Patch(ctx, n, types.ApplyPatchType, []byte(body), metav1.PatchOptions{FieldManager: "gitops"}); err != nil {
			t.Fatal(err)
		}
	}
	cs := apiextensionsclient.NewForConfigOrDie(env.Config)
	cur, err := cs.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, live.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cur.Spec.Versions = next.Spec.Versions
	if _, err := cs.ApiextensionsV1().CustomResourceDefinitions().Update(ctx, cur, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := env.WaitEstablished(ctx, live.Name); err != nil {
		t.Fatal(err)
	}
	snapshot := func() (map[string]string, map[string][]string) {
		rvs, mgrs := map[string]string{}, map[string][]string{}
		for n := range specs {
			u, err := ri("v2").Get(ctx, n, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			rvs[n], mgrs[n] = u.GetResourceVersion(), managersOf(u)
		}
		return rvs, mgrs
	}
	return live.Name, snapshot
}

// TestOwnershipConsentOnOlderServer: on kube-apiserver 1.34, which drops every managedFields
// entry of an object it cannot type, migrate refuses before any write even with
// --allow-data-loss, listing the objects and managers; with --allow-ownership-loss it goes on,
// and exactly the listed objects lose exactly the listed managers (the others keep theirs).
func TestOwnershipConsentOnOlderServer(t *testing.T) {
	olderServer(t)
	name, snapshot := typechangeApplied(t, "typechange.old.plugin.example.com")
	const group = "typechange.old.plugin.example.com"
	rvs, mgrs := snapshot()
	dir := t.TempDir()
	res := runCluster(t, "migrate", name, "--to", "v2", "--yes", "--quiet", "--allow-data-loss", "--skip-invalid", "--checkpoint", filepath.Join(dir, "cp.json"))
	if res.code != 1 {
		t.Fatalf("migrate --allow-data-loss: exit %d, want 1\n%s\n%s", res.code, res.stdout, res.stderr)
	}
	mustContain(t, "refusal", res.stdout, "1 object would lose field managers", "default/text-config", "all: gitops (Apply at", "editor (Update at")
	mustContain(t, "refusal", res.stderr, "nothing was written", "--allow-ownership-loss")
	if after, _ := snapshot(); !cmp.Equal(after, rvs) {
		t.Errorf("the refused migrate wrote: %v → %v", rvs, after)
	}
	res = runCluster(t, "migrate", name, "--to", "v2", "--yes", "--quiet", "--allow-ownership-loss", "--checkpoint", filepath.Join(dir, "cp.json"))
	if res.code != 0 {
		t.Fatalf("migrate --allow-ownership-loss: exit %d\n%s\n%s", res.code, res.stdout, res.stderr)
	}
	_, after := snapshot()
	if len(after["text-config"]) != 0 || !cmp.Equal(after["plain"], mgrs["plain"]) {
		t.Errorf("managers after the consented migrate: %v (before %v): text-config should have lost exactly its listed two, plain none", after, mgrs)
	}
}

// TestRetireOwnershipConsentOnOlderServer: retire of v1 (moving to v2) on kube-apiserver 1.34
// refuses before any write with --allow-data-loss alone, listing the managers; with
// --allow-ownership-loss it goes on, only the listed object loses managers, and it ends with
// exit 0.
func TestRetireOwnershipConsentOnOlderServer(t *testing.T) {
	olderServer(t)
	name, snapshot := typechangeApplied(t, "typechange.retire.plugin.example.com")
	rvs, mgrs := snapshot()
	dir := t.TempDir()
	res := runCluster(t, "retire", name, "v1", "--to", "v2", "--yes", "--quiet", "--allow-data-loss", "--checkpoint", filepath.Join(dir, "cp.json"))
	if res.code != 1 {
		t.Fatalf("retire --allow-data-loss: exit %d, want 1\n%s\n%s", res.code, res.stdout, res.stderr)
	}
	mustContain(t, "refusal", res.stdout+res.stderr, "1 object would lose field managers", "default/text-config", "--allow-ownership-loss")
	if after, _ := snapshot(); !cmp.Equal(after, rvs) {
		t.Errorf("the refused retire wrote: %v → %v", rvs, after)
	}
	res = runCluster(t, "retire", name, "v1", "--to", "v2", "--yes", "--quiet", "--allow-ownership-loss", "--checkpoint", filepath.Join(dir, "cp.json"))
	if res.code != 0 {
		t.Errorf("retire --allow-ownership-loss: exit %d, want 0 (the losses are those consented to)\n%s\n%s", res.code, res.stdout, res.stderr)
	}
	_, after := snapshot()
	if len(after["text-config"]) != 0 || len(after["plain"]) != len(mgrs["plain"]) {
		t.Errorf("managers after the consented retire: %v (before %v): text-config should have lost its two, plain none", after, mgrs)
	}
}
