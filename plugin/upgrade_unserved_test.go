package plugin

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
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

	"github.com/crdver/kubectl-crdver/internal/testcrd"
	"github.com/crdver/kubectl-crdver/internal/testenv"
	"github.com/crdver/kubectl-crdver/migrate"
	"github.com/crdver/kubectl-crdver/plan"
	"github.com/crdver/kubectl-crdver/upgrade"
)

// A CRD with a history, as cert-manager 0.x → 1.6 leaves it: things.<group> was created with
// v1alpha1 (storage) and v1beta1; objects were written at v1alpha1 while it was served (by a
// GitOps applier, server-side apply as "gitops", and a one-time create as "kubectl-create");
// then a CRD update made v1beta1 the storage version and stopped serving v1alpha1. So
// status.storedVersions is [v1alpha1 v1beta1], v1alpha1 is not served, and etcd still holds
// every object encoded at v1alpha1. The release to upgrade to has v1beta1 and v1 (storage):
// it removes v1alpha1.
type unservedHistory struct {
	group, name, dir string
	crds             apiextensionsclient.Interface
	dyn              dynamic.Interface
	objects          []string
}

// setupClients is an unservedHistory with only its clients set.
func setupClients(t *testing.T) *unservedHistory {
	t.Helper()
	h := &unservedHistory{}
	var err error
	if h.crds, err = apiextensionsclient.NewForConfig(env.Config); err != nil {
		t.Fatal(err)
	}
	if h.dyn, err = dynamic.NewForConfig(env.Config); err != nil {
		t.Fatal(err)
	}
	return h
}

// thingSchema: size and color, and legacy when withLegacy.
func thingSchema(withLegacy bool) *apiextensionsv1.CustomResourceValidation {
	spec := apiextensionsv1.JSONSchemaProps{Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{
		"size": {Type: "integer"}, "color": {Type: "string"},
	}}
	if withLegacy {
		spec.Properties["legacy"] = apiextensionsv1.JSONSchemaProps{Type: "string"}
	}
	return &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{Type: "object",
		Properties: map[string]apiextensionsv1.JSONSchemaProps{"spec": spec}}}
}

// setupUnservedHistory builds the history. lossy: v1beta1 and the release's v1 lack
// spec.legacy, which one object holds at v1alpha1 (so only a read at v1alpha1 shows it).
func setupUnservedHistory(t *testing.T, group string, lossy bool) *unservedHistory {
	t.Helper()
	ctx := context.Background()
	h := setupClients(t)
	h.group, h.name = group, "things."+group
	old := testcrd.New(group, "Thing", testcrd.Version("v1alpha1", true, true, thingSchema(true)), testcrd.Version("v1beta1", true, false, thingSchema(!lossy)))
	if _, err := env.CreateCRD(ctx, old.DeepCopy()); err != nil {
		t.Fatal(err)
	}
	alpha := schema.GroupVersionResource{Group: group, Version: "v1alpha1", Resource: "things"}
	obj := func(name string, spec map[string]any) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{"apiVersion": group + "/v1alpha1", "kind": "Thing",
			"metadata": map[string]any{"name": name, "namespace": "default"}, "spec": spec}}
	}
	b, _ := obj("t-gitops", map[string]any{"size": int64(3), "color": "red", "legacy": "from-gitops"}).MarshalJSON()
	if _, err := h.dyn.Resource(alpha).Namespace("default").Patch(ctx, "t-gitops", types.ApplyPatchType, b, metav1.PatchOptions{FieldManager: "gitops"}); err != nil {
		t.Fatal(err)
	}
	if _, err := h.dyn.Resource(alpha).Namespace("default").Create(ctx, obj("t-created", map[string]any{"size": int64(5)}), metav1.CreateOptions{FieldManager: "kubectl-create"}); err != nil {
		t.Fatal(err)
	}
	h.objects = []string{"t-created", "t-gitops"}
	// The 1.6-like CRD update: v1beta1 stores, v1alpha1 is no longer served.
	crd, err := h.crds.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, h.name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	crd.Spec.Versions[0].Served, crd.Spec.Versions[0].Storage, crd.Spec.Versions[1].Storage = false, false, true
	if _, err := h.crds.ApiextensionsV1().CustomResourceDefinitions().Update(ctx, crd, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if crd := h.crd(t); !slices.Equal(crd.Status.StoredVersions, []string{"v1alpha1", "v1beta1"}) {
		t.Fatalf("history: storedVersions %v, want [v1alpha1 v1beta1]", crd.Status.StoredVersions)
	}
	for _, n := range h.objects {
		if got := h.storedAt(t, n); got != group+"/v1alpha1" {
			t.Fatalf("history: %s stored at %s, want %s/v1alpha1", n, got, group)
		}
	}
	next := testcrd.New(group, "Thing", testcrd.Version("v1beta1", true, false, thingSchema(!lossy)), testcrd.Version("v1", true, true, thingSchema(!lossy)))
	h.dir = t.TempDir()
	y, err := yaml.Marshal(next)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(h.dir, "things.yaml"), y, 0o644); err != nil {
		t.Fatal(err)
	}
	return h
}

func (h *unservedHistory) crd(t *testing.T) *apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	crd, err := h.crds.ApiextensionsV1().CustomResourceDefinitions().Get(context.Background(), h.name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return crd
}

// storedAt is the apiVersion the object is encoded at in etcd.
func (h *unservedHistory) storedAt(t *testing.T, name string) string {
	t.Helper()
	o, _, err := env.StoredObject(context.Background(), h.group, "things", "default", name)
	if err != nil {
		t.Fatal(err)
	}
	s, _ := o["apiVersion"].(string)
	return s
}

// state is what "nothing written" is checked on: the CRD's spec.versions (every field,
// served flags included) and status.storedVersions, and every object's bytes in etcd.
func (h *unservedHistory) state(t *testing.T) map[string]string {
	t.Helper()
	crd := h.crd(t)
	versions, _ := json.Marshal(crd.Spec.Versions)
	out := map[string]string{"spec.versions": string(versions), "storedVersions": strings.Join(crd.Status.StoredVersions, ",")}
	for _, n := range h.objects {
		o, _, err := env.StoredObject(context.Background(), h.group, "things", "default", n)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := json.Marshal(o)
		out["etcd/"+n] = string(b)
	}
	return out
}

func diffStates(t *testing.T, what string, before, after map[string]string) {
	t.Helper()
	for k, v := range before {
		if after[k] != v {
			t.Errorf("%s changed %s:\nbefore %s\nafter  %s", what, k, v, after[k])
		}
	}
}

// TestUpgradeStoredUnservedRefusedRestoresCRD: objects stored at a version the live CRD does
// not serve are read by serving it again; one of them holds a field the new storage version
// lacks (visible only at v1alpha1), so the upgrade is refused — and the CRD is as it was
// (v1alpha1 not served), every object unchanged in etcd, no backup written. The refusal names
// --allow-data-loss (which helps) and not --skip-invalid (which would not).
func TestUpgradeStoredUnservedRefusedRestoresCRD(t *testing.T) {
	isolateCache(t)
	h := setupUnservedHistory(t, "refused.unserved.example.com", true)
	before := h.state(t)
	rv := h.crd(t).ResourceVersion

	// --dry-run serves nothing: it says the preflight is not complete, and why.
	res := runCluster(t, "upgrade", "-f", h.dir, "--dry-run")
	t.Logf("upgrade -f NEW --dry-run → exit %d\n%s%s", res.code, res.stdout, res.stderr)
	if res.code != 1 {
		t.Fatalf("upgrade --dry-run: exit %d, want 1\n%s\n%s", res.code, res.stdout, res.stderr)
	}
	mustContain(t, "dry run", res.stdout, "serve again the versions in status.storedVersions", h.name+" v1alpha1 (planned)", "kubectl patch crd "+h.name, "Preflight: not evaluated")
	mustContain(t, "dry run", res.stderr, "the preflight is not complete", h.name+" v1alpha1", "nothing was written")
	if strings.Contains(res.stderr, "--allow-data-loss") || strings.Contains(res.stderr, "could not find the requested resource") {
		t.Errorf("dry run: advice that does not help, or a 404:\n%s", res.stderr)
	}
	// The command ends with upgrade's outcome: its exit code and its line.
	js := runCluster(t, "upgrade", "-f", h.dir, "--dry-run", "-o", "json")
	var dry struct{ Outcome upgrade.Outcome }
	if err := json.Unmarshal([]byte(js.stdout), &dry); err != nil {
		t.Fatalf("upgrade --dry-run -o json: %v\n%s", err, js.stdout)
	}
	if line := "error: " + dry.Outcome.Message + "\n"; js.code != dry.Outcome.ExitCode || js.stderr != line || res.stderr != line {
		t.Errorf("upgrade --dry-run: exit %d, stderr %q (-o json: exit %d, %q); the outcome says exit %d, %q", res.code, res.stderr, js.code, js.stderr, dry.Outcome.ExitCode, line)
	}
	if got := h.crd(t).ResourceVersion; got != rv {
		t.Errorf("--dry-run changed the CRD (resourceVersion %s → %s)", rv, got)
	}

	// Asked and refused: nothing changes.
	res = run(t, "n\n", "upgrade", "-f", h.dir, "--kubeconfig", env.Kubeconfig)
	if res.code != 3 {
		t.Fatalf("upgrade, serving not confirmed: exit %d, want 3\n%s\n%s", res.code, res.stdout, res.stderr)
	}
	mustContain(t, "question", res.stderr, "Serve them again and run the preflight? [y/N]", "not confirmed")
	mustContain(t, "question", res.stdout, "Preflight: not evaluated")
	if strings.Contains(res.stdout, "no object loses a field") {
		t.Errorf("a preflight that did not run is reported clean:\n%s", res.stdout)
	}
	if got := h.crd(t).ResourceVersion; got != rv {
		t.Errorf("a no to serving changed the CRD (resourceVersion %s → %s)", rv, got)
	}

	backup := filepath.Join(t.TempDir(), "backup.yaml")
	res = runCluster(t, "upgrade", "-f", h.dir, "--yes", "--backup", backup)
	t.Logf("upgrade -f NEW --yes → exit %d\n%s%s", res.code, res.stdout, res.stderr)
	if res.code != 1 {
		t.Fatalf("upgrade: exit %d, want 1 (refused)\n%s\n%s", res.code, res.stdout, res.stderr)
	}
	mustContain(t, "refusal", res.stdout, "t-gitops", "spec.legacy")
	mustContain(t, "refusal", res.stderr, "nothing was written", "--allow-data-loss", h.name+" v1alpha1, are unserved again")
	for _, bad := range []string{"--skip-invalid", "could not find the requested resource", "could not complete"} {
		if strings.Contains(res.stderr, bad) {
			t.Errorf("refusal says %q:\n%s", bad, res.stderr)
		}
	}
	diffStates(t, "the refused upgrade", before, h.state(t))
	if v := h.crd(t).Spec.Versions[0]; v.Name != "v1alpha1" || v.Served {
		t.Errorf("after the refusal v1alpha1 is %+v, want not served", v)
	}
	if _, err := os.Stat(backup); err == nil {
		t.Errorf("the refused upgrade wrote a backup")
	}
}

// TestUpgradeStoredUnservedCompletes: the same history without a field lost: the upgrade
// serves v1alpha1 again, backs up the objects as stored (at v1alpha1), rewrites them at v1,
// trims status.storedVersions, removes v1alpha1, and keeps every field and every manager.
// A no at the second question (after the preflight) unserves v1alpha1 again.
func TestUpgradeStoredUnservedCompletes(t *testing.T) {
	isolateCache(t)
	h := setupUnservedHistory(t, "completes.unserved.example.com", false)
	before := h.state(t)

	res := run(t, "y\nn\n", "upgrade", "-f", h.dir, "--kubeconfig", env.Kubeconfig, "--backup", filepath.Join(t.TempDir(), "b.yaml"))
	if res.code != 3 {
		t.Fatalf("upgrade, yes to serving and no to the upgrade: exit %d, want 3\n%s\n%s", res.code, res.stdout, res.stderr)
	}
	mustContain(t, "second no", res.stderr, "Carry out the upgrade", "unserved again")
	mustContain(t, "second no", res.stdout, "Preflight: no object loses a field")
	diffStates(t, "the upgrade not confirmed", before, h.state(t))

	backup := filepath.Join(t.TempDir(), "backup.yaml")
	res = runCluster(t, "upgrade", "-f", h.dir, "--yes", "--backup", backup)
	if res.code != 0 {
		t.Fatalf("upgrade: exit %d\n%s\n%s", res.code, res.stdout, res.stderr)
	}
	mustContain(t, "upgrade", res.stdout, "serve-stored", "Upgrade complete.")
	crd := h.crd(t)
	if !slices.Equal(crd.Status.StoredVersions, []string{"v1"}) {
		t.Errorf("storedVersions %v, want [v1]", crd.Status.StoredVersions)
	}
	var names []string
	for _, v := range crd.Spec.Versions {
		names = append(names, v.Name)
	}
	if !slices.Equal(names, []string{"v1beta1", "v1"}) {
		t.Errorf("versions %v, want [v1beta1 v1]", names)
	}
	b, err := os.ReadFile(backup)
	if n := strings.Count(string(b), "---\napiVersion: "+h.group+"/v1alpha1\n"); err != nil || n != 2 {
		t.Errorf("backup holds %d objects read at v1alpha1, want 2 (%v)", n, err)
	}
	if !strings.Contains(string(b), "legacy: from-gitops") {
		t.Errorf("backup lacks spec.legacy")
	}
	want := map[string]map[string]any{
		"t-gitops":  {"size": int64(3), "color": "red", "legacy": "from-gitops"},
		"t-created": {"size": int64(5)},
	}
	v1 := schema.GroupVersionResource{Group: h.group, Version: "v1", Resource: "things"}
	for n, spec := range want {
		if got := h.storedAt(t, n); got != h.group+"/v1" {
			t.Errorf("%s stored at %s, want v1", n, got)
		}
		u, err := h.dyn.Resource(v1).Namespace("default").Get(context.Background(), n, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		got, _, _ := unstructured.NestedMap(u.Object, "spec")
		gb, _ := json.Marshal(got)
		wb, _ := json.Marshal(spec)
		if string(gb) != string(wb) {
			t.Errorf("%s: spec %s, want %s", n, gb, wb)
		}
		manager := map[string]string{"t-gitops": "gitops", "t-created": "kubectl-create"}[n]
		found := false
		for _, e := range u.GetManagedFields() {
			if e.Manager == manager {
				found = true
			}
			if e.APIVersion != h.group+"/v1" {
				t.Errorf("%s: managedFields entry of %s names %s", n, e.Manager, e.APIVersion)
			}
		}
		if !found {
			t.Errorf("%s: manager %s lost", n, manager)
		}
	}
}

// TestUpgradeStoredUnservedInterrupted: Ctrl-C while the preflight reads the versions served
// again leaves the CRD as it was: they are unserved again although the run's context is done.
// The preflight is handed the CRD with them served (what it reads), and nothing else changes.
func TestUpgradeStoredUnservedInterrupted(t *testing.T) {
	isolateCache(t)
	h := setupUnservedHistory(t, "interrupted.unserved.example.com", false)
	before := h.state(t)
	c, err := migrate.NewClients(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	next := testenv.ReadCRDs(t, filepath.Join(h.dir, "things.yaml"))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var sawServed bool
	rep, err := upgrade.Run(ctx, c, upgrade.Options{Next: next, ApplyFile: h.dir, BackupFile: filepath.Join(t.TempDir(), "b.yaml"),
		Preflight: func(ctx context.Context, live *apiextensionsv1.CustomResourceDefinition, target string) ([]upgrade.ObjectFinding, error) {
			sawServed = live.Spec.Versions[0].Name == "v1alpha1" && live.Spec.Versions[0].Served
			if v := h.crd(t).Spec.Versions[0]; !v.Served {
				t.Errorf("during the preflight v1alpha1 is not served on the server")
			}
			cancel() // Ctrl-C
			return nil, ctx.Err()
		}})
	if !errors.Is(err, upgrade.ErrRefused) || rep == nil || !rep.Preflight.Incomplete {
		t.Fatalf("Run: %v (report %+v), want an incomplete preflight", err, rep)
	}
	if !sawServed {
		t.Errorf("the preflight was handed the CRD without v1alpha1 served")
	}
	if len(rep.ServedAgain) != 1 || rep.ServedAgain[0].State != upgrade.ServeRestored {
		t.Errorf("servedAgain %+v, want v1alpha1 unserved again", rep.ServedAgain)
	}
	diffStates(t, "the interrupted upgrade", before, h.state(t))
}

// TestUpgradeStoredUnservedRunbookByHand: the runbook plan prints for the history serves
// v1alpha1 again before the backup (so the backup reads the objects as stored), and followed
// by hand — its kubectl commands run by a shell, as copied — it takes the cluster to the
// release keeping every field and manager.
func TestUpgradeStoredUnservedRunbookByHand(t *testing.T) {
	if _, err := exec.LookPath("kubectl"); err != nil {
		t.Skip("kubectl is not installed") // the runbook's kubectl steps need the real one
	}
	isolateCache(t)
	h := setupUnservedHistory(t, "byhand.unserved.example.com", false)
	kc := tempKubeconfig(t)
	rep, actions := planRunbook(t, h.dir, kc)
	i, b := slices.Index(actions, plan.ActionServeStored), slices.Index(actions, plan.ActionBackup)
	if i < 0 || b < i {
		t.Fatalf("runbook actions %v: want serve-stored before backup", actions)
	}
	work := t.TempDir()
	followRunbook(t, work, kc, rep)
	backup, err := os.ReadFile(filepath.Join(work, "crdver-backup.yaml"))
	if n := strings.Count(string(backup), "apiVersion: "+h.group+"/v1alpha1\n  kind: Thing"); err != nil || n != 2 {
		t.Errorf("the backup holds %d objects read at v1alpha1, want 2 (%v)", n, err)
	}
	crd := h.crd(t)
	if !slices.Equal(crd.Status.StoredVersions, []string{"v1"}) || len(crd.Spec.Versions) != 2 {
		t.Errorf("after the runbook: storedVersions %v, %d versions; want [v1], v1beta1 and v1", crd.Status.StoredVersions, len(crd.Spec.Versions))
	}
	v1 := schema.GroupVersionResource{Group: h.group, Version: "v1", Resource: "things"}
	u, err := h.dyn.Resource(v1).Namespace("default").Get(context.Background(), "t-gitops", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if l, _, _ := unstructured.NestedString(u.Object, "spec", "legacy"); l != "from-gitops" {
		t.Errorf("t-gitops: spec.legacy %q after the runbook", l)
	}
	if !slices.ContainsFunc(u.GetManagedFields(), func(e metav1.ManagedFieldsEntry) bool { return e.Manager == "gitops" && e.APIVersion == h.group+"/v1" }) {
		t.Errorf("t-gitops: gitops's entry not at v1: %+v", u.GetManagedFields())
	}
}

// TestUpgradeStoredUnservedKeptUnserved: a release that keeps the old version in spec.versions,
// not served (as cert-manager 1.6 keeps v1alpha2), and moves storage to v1: the upgrade serves
// v1alpha1 again to read its objects, rewrites them at v1, trims status.storedVersions, and
// the release's apply leaves v1alpha1 not served, as the release has it.
func TestUpgradeStoredUnservedKeptUnserved(t *testing.T) {
	isolateCache(t)
	h := setupUnservedHistory(t, "kept.unserved.example.com", false)
	next := testcrd.New(h.group, "Thing", testcrd.Version("v1alpha1", false, false, thingSchema(true)), testcrd.Version("v1beta1", true, false, thingSchema(true)), testcrd.Version("v1", true, true, thingSchema(true)))
	y, err := yaml.Marshal(next)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(h.dir, "things.yaml"), y, 0o644); err != nil {
		t.Fatal(err)
	}
	res := runCluster(t, "upgrade", "-f", h.dir, "--yes", "--backup", filepath.Join(t.TempDir(), "backup.yaml"))
	if res.code != 0 {
		t.Fatalf("upgrade: exit %d\n%s\n%s", res.code, res.stdout, res.stderr)
	}
	crd := h.crd(t)
	if !slices.Equal(crd.Status.StoredVersions, []string{"v1"}) {
		t.Errorf("storedVersions %v, want [v1]", crd.Status.StoredVersions)
	}
	for _, v := range crd.Spec.Versions {
		if want := v.Name != "v1alpha1"; v.Served != want {
			t.Errorf("%s: served %v after the upgrade, want %v (as the release has it)", v.Name, v.Served, want)
		}
	}
	for _, n := range h.objects {
		if got := h.storedAt(t, n); got != h.group+"/v1" {
			t.Errorf("%s stored at %s, want v1", n, got)
		}
	}
	v1 := schema.GroupVersionResource{Group: h.group, Version: "v1", Resource: "things"}
	u, err := h.dyn.Resource(v1).Namespace("default").Get(context.Background(), "t-gitops", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if l, _, _ := unstructured.NestedString(u.Object, "spec", "legacy"); l != "from-gitops" {
		t.Errorf("t-gitops: spec.legacy %q after the upgrade", l)
	}
}

// TestUpgradeStoredUnservedNoObjects: the history's CRD whose objects are all gone (cert-manager
// 1.6's certificaterequests with none left): v1alpha1 is still in status.storedVersions and not
// served, but no object is stored at it, so there is nothing to read: the upgrade serves
// nothing again, its preflight is not unknown for v1alpha1, and it completes.
func TestUpgradeStoredUnservedNoObjects(t *testing.T) {
	isolateCache(t)
	h := setupUnservedHistory(t, "noobjects.unserved.example.com", true)
	beta := schema.GroupVersionResource{Group: h.group, Version: "v1beta1", Resource: "things"}
	for _, n := range h.objects {
		if err := h.dyn.Resource(beta).Namespace("default").Delete(context.Background(), n, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	h.objects = nil
	if crd := h.crd(t); !slices.Equal(crd.Status.StoredVersions, []string{"v1alpha1", "v1beta1"}) {
		t.Fatalf("storedVersions %v, want [v1alpha1 v1beta1]", crd.Status.StoredVersions)
	}
	res := runCluster(t, "upgrade", "-f", h.dir, "--yes", "--backup", filepath.Join(t.TempDir(), "backup.yaml"))
	t.Logf("upgrade -f NEW --yes → exit %d\n%s%s", res.code, res.stdout, res.stderr)
	if res.code != 0 {
		t.Fatalf("upgrade of a CRD without objects: exit %d, want 0\n%s\n%s", res.code, res.stdout, res.stderr)
	}
	for _, bad := range []string{"is in status.storedVersions but not served", "served again to read"} {
		if strings.Contains(res.stdout+res.stderr, bad) {
			t.Errorf("upgrade says %q, though no object is stored at v1alpha1", bad)
		}
	}
	if crd := h.crd(t); !slices.Equal(crd.Status.StoredVersions, []string{"v1"}) {
		t.Errorf("storedVersions %v, want [v1]", crd.Status.StoredVersions)
	}
}

// TestUpgradeStoredUnservedRunbookNoIntermediate: a release whose storage version the live CRD
// already serves (Gateway API 1.2's ReferenceGrant v1beta1) and that removes the stored but
// unserved v1alpha1. The runbook's serve-stored step serves v1alpha1 again, so no intermediate
// CRD is needed to read it: the runbook has no intermediate step (whose --intermediate-crds
// would print nothing once v1alpha1 is served, and its apply fail on an empty file), and
// followed by hand it takes the cluster to the release.
func TestUpgradeStoredUnservedRunbookNoIntermediate(t *testing.T) {
	if _, err := exec.LookPath("kubectl"); err != nil {
		t.Skip("kubectl is not installed") // the runbook's kubectl steps need the real one
	}
	isolateCache(t)
	h := setupUnservedHistory(t, "nointer.unserved.example.com", false)
	next := testcrd.New(h.group, "Thing", testcrd.Version("v1beta1", true, true, thingSchema(true)))
	y, err := yaml.Marshal(next)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(h.dir, "things.yaml"), y, 0o644); err != nil {
		t.Fatal(err)
	}
	kc := tempKubeconfig(t)
	rep, actions := planRunbook(t, h.dir, kc)
	if !slices.Contains(actions, plan.ActionServeStored) || slices.Contains(actions, plan.ActionIntermediate) {
		t.Fatalf("runbook actions %v: want serve-stored and no intermediate-crds", actions)
	}
	work := t.TempDir()
	followRunbook(t, work, kc, rep)
	crd := h.crd(t)
	if !slices.Equal(crd.Status.StoredVersions, []string{"v1beta1"}) || len(crd.Spec.Versions) != 1 {
		t.Errorf("after the runbook: storedVersions %v, %d versions; want [v1beta1], v1beta1 only", crd.Status.StoredVersions, len(crd.Spec.Versions))
	}
	beta := schema.GroupVersionResource{Group: h.group, Version: "v1beta1", Resource: "things"}
	u, err := h.dyn.Resource(beta).Namespace("default").Get(context.Background(), "t-gitops", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if l, _, _ := unstructured.NestedString(u.Object, "spec", "legacy"); l != "from-gitops" {
		t.Errorf("t-gitops: spec.legacy %q after the runbook", l)
	}
	if !slices.ContainsFunc(u.GetManagedFields(), func(e metav1.ManagedFieldsEntry) bool {
		return e.Manager == "gitops" && e.APIVersion == h.group+"/v1beta1"
	}) {
		t.Errorf("t-gitops: gitops's entry not at v1beta1: %+v", u.GetManagedFields())
	}
}

// TestUpgradeBackToUnservedStorage: going back to a release whose storage version the live CRD
// has but does not serve, and stores nothing at (Gateway API 1.1 → 0.6: ReferenceGrant
// v1alpha2). The preflight judges writes at that version, so the upgrade serves it again first
// (asked, like any write), instead of calling what the rewrite loses unknown; it completes
// with every field kept.
func TestUpgradeBackToUnservedStorage(t *testing.T) {
	isolateCache(t)
	ctx := context.Background()
	h := setupClients(t)
	h.group = "back.unserved.example.com"
	h.name = "things." + h.group
	live := testcrd.New(h.group, "Thing", testcrd.Version("v1alpha1", false, false, thingSchema(true)), testcrd.Version("v1beta1", true, true, thingSchema(true)))
	if _, err := env.CreateCRD(ctx, live.DeepCopy()); err != nil {
		t.Fatal(err)
	}
	beta := schema.GroupVersionResource{Group: h.group, Version: "v1beta1", Resource: "things"}
	obj := &unstructured.Unstructured{Object: map[string]any{"apiVersion": h.group + "/v1beta1", "kind": "Thing",
		"metadata": map[string]any{"name": "t-gitops", "namespace": "default"}, "spec": map[string]any{"size": int64(3), "legacy": "from-gitops"}}}
	if _, err := h.dyn.Resource(beta).Namespace("default").Create(ctx, obj, metav1.CreateOptions{FieldManager: "gitops"}); err != nil {
		t.Fatal(err)
	}
	if crd := h.crd(t); !slices.Equal(crd.Status.StoredVersions, []string{"v1beta1"}) {
		t.Fatalf("storedVersions %v, want [v1beta1]", crd.Status.StoredVersions)
	}
	h.dir = t.TempDir()
	prev := testcrd.New(h.group, "Thing", testcrd.Version("v1alpha1", true, true, thingSchema(true)), testcrd.Version("v1beta1", true, false, thingSchema(true)))
	y, err := yaml.Marshal(prev)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(h.dir, "things.yaml"), y, 0o644); err != nil {
		t.Fatal(err)
	}
	res := runCluster(t, "upgrade", "-f", h.dir, "--yes", "--backup", filepath.Join(t.TempDir(), "backup.yaml"))
	t.Logf("upgrade -f OLD --yes → exit %d\n%s%s", res.code, res.stdout, res.stderr)
	if res.code != 0 {
		t.Fatalf("upgrade back to a release storing at an unserved version: exit %d, want 0\n%s\n%s", res.code, res.stdout, res.stderr)
	}
	if strings.Contains(res.stdout+res.stderr, "v1alpha1 is not served") {
		t.Errorf("the preflight did not read at v1alpha1")
	}
	crd := h.crd(t)
	if !slices.Equal(crd.Status.StoredVersions, []string{"v1alpha1"}) || !crd.Spec.Versions[0].Served {
		t.Errorf("after going back: storedVersions %v, versions %+v; want [v1alpha1], served", crd.Status.StoredVersions, crd.Spec.Versions)
	}
	alpha := schema.GroupVersionResource{Group: h.group, Version: "v1alpha1", Resource: "things"}
	u, err := h.dyn.Resource(alpha).Namespace("default").Get(ctx, "t-gitops", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if l, _, _ := unstructured.NestedString(u.Object, "spec", "legacy"); l != "from-gitops" {
		t.Errorf("t-gitops: spec.legacy %q after going back", l)
	}
}
