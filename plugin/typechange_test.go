package plugin

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/yaml"

	"github.com/google/go-cmp/cmp"

	crdinfo "github.com/crdver/kubectl-crdver/crd"
	"github.com/crdver/kubectl-crdver/internal/testenv"
	"github.com/crdver/kubectl-crdver/plan"
)

// typechangeCRD reads testdata/typechange/name with its group renamed.
func typechangeCRD(t *testing.T, name, group string) *apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	b, err := os.ReadFile(td("typechange", name))
	if err != nil {
		t.Fatal(err)
	}
	crd, err := crdinfo.Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	crd.Spec.Group = group
	crd.Name = crd.Spec.Names.Plural + "." + group
	return crd
}

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
// another type and gives the fix-values step; upgrade refuses before any write (the CRD and
// the objects are unchanged); once the new CRD is applied, the step's patch gives each object
// the listed values and server-side apply works again; migrate then rewrites every object at
// v2 and ends with the same managers on each object.
func TestTypeChangeFromPlanToFix(t *testing.T) {
	isolateCache(t)
	ctx := context.Background()
	const group = "typechange.plugin.example.com"
	live := typechangeCRD(t, "live.yaml", group)
	next := typechangeCRD(t, "new.yaml", group)
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
	var step *plan.RunbookStep
	for i := range rep.Runbook {
		if rep.Runbook[i].Action == plan.ActionFixValues {
			step = &rep.Runbook[i]
		}
	}
	if step == nil || len(step.Objects) != 2 {
		t.Fatalf("plan: fix-values step %+v", step)
	}
	human := runCluster(t, "plan", "-f", newFile)
	mustContain(t, "plan", human.stdout, "default/text-config: type: .spec.config is string, v2 expects map", "kubectl patch brokers.v2."+group+" text-config -n default --type=json")
	for _, c := range step.Commands {
		if strings.HasPrefix(c, "kubectl patch ") {
			// The patch is printed whole (a line break inside its quotes would change it).
			mustContain(t, "plan's runbook", human.stdout, c[strings.Index(c, "'"):])
		}
	}

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
	mustContain(t, "upgrade", res.stdout+res.stderr, "values whose type does not fit")
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

	// Apply the release by hand, then the step's patch (what kubectl patch sends).
	cur.Spec.Versions = next.Spec.Versions
	if _, err := cs.ApiextensionsV1().CustomResourceDefinitions().Update(ctx, cur, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := env.WaitEstablished(ctx, live.Name); err != nil {
		t.Fatal(err)
	}
	for _, c := range step.Commands {
		if !strings.HasPrefix(c, "kubectl patch ") {
			continue
		}
		name := strings.Fields(c)[3]
		patch := c[strings.Index(c, "-p '")+4 : len(c)-1]
		patched, err := ri("v2").Patch(ctx, name, types.JSONPatchType, []byte(patch), metav1.PatchOptions{FieldManager: "kubectl-patch"})
		if err != nil {
			t.Fatalf("%s: %v", c, err)
		}
		cfg, _, _ := unstructured.NestedMap(patched.Object, "spec", "config")
		hosts, _, _ := unstructured.NestedStringSlice(patched.Object, "spec", "hosts")
		port, _, _ := unstructured.NestedString(patched.Object, "spec", "port")
		if cfg["retention"] != "7d" || !slices.Equal(hosts, []string{"broker-0.example.com"}) || port != "9092" {
			t.Errorf("%s after the patch: %v", name, patched.Object["spec"])
		}
		// kube-apiserver 1.37 keeps the managedFields of an object it cannot type: the
		// patch's own manager is not recorded, and the v1 entries stay (the decision table).
		if got := managersOf(patched); !slices.Equal(got, []string{"editor/Update", "gitops/Apply"}) {
			t.Errorf("%s: managers after the patch %v, want the two of before", name, got)
		}
		// Its managedFields entries still name v1, whose schema the new value does not fit:
		// server-side apply fails until the rewrite moves them to v2.
		if err := apply("v2", name); err == nil {
			t.Errorf("%s: server-side apply at v2 worked after the patch, before the rewrite; the decision table says it fails until the entries of v1 are moved", name)
		}
	}

	// A plan after the fix: text-config holds spec.config as a map, written at v2 (the storage
	// version): it is not encoded at v1, whose schema (a string) would have pruned the map's
	// keys on every read. Plan must not call their keys lost (it did: "loses fields on read if
	// encoded at another version", a data-loss step with --allow-data-loss). Only opaque,
	// whose value converts to nothing, is left.
	res = runCluster(t, "plan", "-f", newFile, "-o", "json")
	rep = plan.Report{}
	if err := json.Unmarshal([]byte(res.stdout), &rep); err != nil {
		t.Fatalf("plan after the fix: %v\n%s", err, res.stderr)
	}
	if res.code != 1 {
		t.Errorf("plan after the fix: exit %d, want 1 (opaque is left)", res.code)
	}
	checkLeft := func(when string, rep plan.Report) {
		t.Helper()
		var left []string
		for _, f := range rep.Items[0].Objects.Findings {
			left = append(left, f.Name)
			if f.Name != "opaque" {
				t.Errorf("%s: %s has a finding: kinds %v, pruned %v, possibly pruned %v, notes %q", when, f.Name, f.Kinds, f.PrunedOnRead, f.PossiblyPrunedOnRead, f.Notes)
				continue
			}
			if !slices.Equal(f.Kinds, []plan.Kind{plan.KindTypeMismatch, plan.KindInvalidOnRecreate}) || len(f.PossiblyPrunedOnRead) != 0 {
				t.Errorf("%s: opaque: kinds %v, possibly pruned %v, want type-mismatch and invalid-on-recreate only", when, f.Kinds, f.PossiblyPrunedOnRead)
			}
		}
		if !slices.Equal(left, []string{"opaque"}) {
			t.Errorf("%s: objects with findings %v, want opaque only", when, left)
		}
		if k := rep.Items[0].Kinds; slices.Contains(k, plan.KindDataLoss) || slices.Contains(k, plan.KindUnknown) {
			t.Errorf("%s: the CRD's kinds %v: nothing is lost", when, k)
		}
		for _, st := range rep.Runbook {
			for _, c := range st.Commands {
				if strings.Contains(c, "--allow-data-loss") {
					t.Errorf("%s: the runbook asks for --allow-data-loss: %s", when, c)
				}
			}
		}
	}
	checkLeft("plan after the fix", rep)

	// migrate: the decision table's rows for what its preflight finds (data-loss, unknown,
	// rejected-write, ownership-loss): none here (1.37 keeps the managedFields of opaque, which
	// it cannot type, and of text-config, which it can once rewritten), so it rewrites every
	// object at v2, trims storedVersions and exits 0, with the same managers on each object;
	// server-side apply then works on text-config and plain (opaque is the person's to fix).
	mgrs := map[string][]string{}
	for _, n := range names {
		u, _ := ri("v2").Get(ctx, n, metav1.GetOptions{})
		mgrs[n] = managersOf(u)
	}
	res = runCluster(t, "migrate", live.Name, "--to", "v2", "--yes", "--quiet", "--checkpoint", filepath.Join(dir, "cp.json"))
	if res.code != 0 {
		t.Fatalf("migrate: exit %d, want 0 (nothing its preflight refuses for)\n%s\n%s", res.code, res.stdout, res.stderr)
	}
	mustContain(t, "migrate", res.stdout, "nothing is lost or refused by rewriting them at v2", "status.storedVersions: [v1 v2] -> [v2]")
	if got, err := cs.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, live.Name, metav1.GetOptions{}); err != nil || !slices.Equal(got.Status.StoredVersions, []string{"v2"}) {
		t.Errorf("after migrate: storedVersions %v (%v), want [v2]", got.Status.StoredVersions, err)
	}
	for _, n := range names {
		u, _ := ri("v2").Get(ctx, n, metav1.GetOptions{})
		if got := managersOf(u); !slices.Equal(got, mgrs[n]) {
			t.Errorf("%s: managers %v after migrate, %v before", n, got, mgrs[n])
		}
		// opaque's value converts to nothing: its fix is for a person (kubectl edit).
		if err := apply("v2", n); (err != nil) != (n == "opaque") {
			t.Errorf("%s: server-side apply at v2 after migrate: %v", n, err)
		}
	}
	res = runCluster(t, "plan", "-f", newFile, "-o", "json")
	rep = plan.Report{}
	if err := json.Unmarshal([]byte(res.stdout), &rep); err != nil {
		t.Fatalf("plan after migrate: %v\n%s", err, res.stderr)
	}
	if res.code != 1 {
		t.Errorf("plan after migrate: exit %d, want 1 (opaque is left)", res.code)
	}
	checkLeft("plan after migrate", rep)
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
	live := typechangeCRD(t, "live.yaml", group)
	next := typechangeCRD(t, "new.yaml", group)
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
