package plugin

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/yaml"

	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"

	"github.com/crdver/kubectl-crdver/explain"
	"github.com/crdver/kubectl-crdver/internal/testcrd"
	"github.com/crdver/kubectl-crdver/migrate"
	"github.com/crdver/kubectl-crdver/plan"
	"github.com/crdver/kubectl-crdver/upgrade"
)

// A two-CRD release, in its own group per test:
//   - widgets: live v1beta1 only (storage); the release has v1 only (storage), so the live CRD
//     lacks the new storage version (an intermediate CRD), and v1 drops spec.legacy and sets
//     spec.size maximum 10 (stricter);
//   - gadgets: live v1beta1 (storage) and v1 (served); the release removes v1beta1 and adds a
//     CEL rule to v1 (stricter).
//
// Both conversion None. Objects are written at v1beta1 by a GitOps applier (server-side apply,
// manager "gitops") and a one-time create ("kubectl-create").

func upgradeSchema(legacy bool, maxSize int64, cel string) *apiextensionsv1.CustomResourceValidation {
	spec := apiextensionsv1.JSONSchemaProps{Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{
		"size":  {Type: "integer"},
		"color": {Type: "string"},
	}}
	if legacy {
		spec.Properties["legacy"] = apiextensionsv1.JSONSchemaProps{Type: "string"}
	}
	if maxSize > 0 {
		s := spec.Properties["size"]
		s.Maximum = ptrFloat(float64(maxSize))
		spec.Properties["size"] = s
	}
	if cel == "required:size" {
		// A new default makes the rewrite change spec, so ratcheting does not excuse it.
		spec.Required = []string{"size"}
		c := spec.Properties["color"]
		c.Default = &apiextensionsv1.JSON{Raw: []byte(`"none"`)}
		spec.Properties["color"] = c
	} else if cel != "" {
		spec.XValidations = apiextensionsv1.ValidationRules{{Rule: cel, Message: "stricter rule"}}
	}
	return &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{
		"spec": spec,
	}}}
}

func ptrFloat(f float64) *float64 { return &f }

type release struct {
	group            string
	oldCRDs, newCRDs []*apiextensionsv1.CustomResourceDefinition
	dir              string // the new release's CRD files
	crds             apiextensionsclient.Interface
	dyn              dynamic.Interface
	widgets, gadgets schema.GroupVersionResource
	ns               string
}

// setupRelease installs the old release, creates the objects (withLegacy: one widget holds
// spec.legacy, which v1 lacks), and writes the new release to a folder.
func setupRelease(t *testing.T, group string, withLegacy bool) *release {
	t.Helper()
	return setupReleaseWith(t, group, withLegacy, false)
}

// setupReleaseWith: requireSize makes gadgets' v1 (live and new) require spec.size, which
// g-gitops (written at v1beta1) lacks: its rewrite at v1 is rejected (Strimzi's KafkaConnect).
func setupReleaseWith(t *testing.T, group string, withLegacy, requireSize bool) *release {
	t.Helper()
	ctx := context.Background()
	r := &release{group: group, ns: "default"}
	r.oldCRDs = []*apiextensionsv1.CustomResourceDefinition{
		testcrd.New(group, "Widget", testcrd.Version("v1beta1", true, true, upgradeSchema(true, 0, ""))),
		testcrd.New(group, "Gadget", testcrd.Version("v1beta1", true, true, upgradeSchema(false, 0, "")), testcrd.Version("v1", true, false, upgradeSchema(false, 0, ""))),
	}
	r.newCRDs = []*apiextensionsv1.CustomResourceDefinition{
		testcrd.New(group, "Widget", testcrd.Version("v1", true, true, upgradeSchema(false, 10, ""))),
		testcrd.New(group, "Gadget", testcrd.Version("v1", true, true, upgradeSchema(false, 0, "!has(self.color) || self.color != 'forbidden'"))),
	}
	if requireSize {
		r.oldCRDs[1].Spec.Versions[1].Schema = upgradeSchema(false, 0, "required:size")
		r.newCRDs[1].Spec.Versions[0].Schema = upgradeSchema(false, 0, "required:size")
	}
	for _, c := range r.oldCRDs {
		if _, err := env.CreateCRD(ctx, c.DeepCopy()); err != nil {
			t.Fatal(err)
		}
	}
	r.dir = t.TempDir()
	for _, c := range r.newCRDs {
		b, err := yaml.Marshal(c)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(r.dir, c.Spec.Names.Plural+".yaml"), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var err error
	if r.crds, err = apiextensionsclient.NewForConfig(env.Config); err != nil {
		t.Fatal(err)
	}
	if r.dyn, err = dynamic.NewForConfig(env.Config); err != nil {
		t.Fatal(err)
	}
	r.widgets = schema.GroupVersionResource{Group: group, Version: "v1beta1", Resource: "widgets"}
	r.gadgets = schema.GroupVersionResource{Group: group, Version: "v1beta1", Resource: "gadgets"}
	apply := func(gvr schema.GroupVersionResource, kind, name string, spec map[string]any) {
		u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": group + "/v1beta1", "kind": kind,
			"metadata": map[string]any{"name": name, "namespace": r.ns}, "spec": spec}}
		b, _ := u.MarshalJSON()
		if _, err := r.dyn.Resource(gvr).Namespace(r.ns).Patch(ctx, name, types.ApplyPatchType, b, metav1.PatchOptions{FieldManager: "gitops"}); err != nil {
			t.Fatal(err)
		}
	}
	create := func(gvr schema.GroupVersionResource, kind, name string, spec map[string]any) {
		u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": group + "/v1beta1", "kind": kind,
			"metadata": map[string]any{"name": name, "namespace": r.ns}, "spec": spec}}
		if _, err := r.dyn.Resource(gvr).Namespace(r.ns).Create(ctx, u, metav1.CreateOptions{FieldManager: "kubectl-create"}); err != nil {
			t.Fatal(err)
		}
	}
	apply(r.widgets, "Widget", "w-gitops", map[string]any{"size": int64(3), "color": "red"})
	create(r.widgets, "Widget", "w-created", map[string]any{"size": int64(5)})
	if withLegacy {
		create(r.widgets, "Widget", "w-legacy", map[string]any{"size": int64(1), "legacy": "keep-me"})
	}
	if requireSize {
		apply(r.gadgets, "Gadget", "g-gitops", map[string]any{}) // no size, no color
	} else {
		apply(r.gadgets, "Gadget", "g-gitops", map[string]any{"color": "blue"})
	}
	create(r.gadgets, "Gadget", "g-created", map[string]any{"size": int64(2)})
	return r
}

// snapshot is every object's resourceVersion and each CRD's resourceVersion.
func (r *release) snapshot(t *testing.T) map[string]string {
	t.Helper()
	ctx := context.Background()
	out := map[string]string{}
	for _, c := range r.oldCRDs {
		crd, err := r.crds.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, c.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		out["crd/"+c.Name] = crd.ResourceVersion
		gvr := schema.GroupVersionResource{Group: r.group, Version: "v1beta1", Resource: c.Spec.Names.Plural}
		list, err := r.dyn.Resource(gvr).Namespace(r.ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, u := range list.Items {
			out[c.Spec.Names.Plural+"/"+u.GetName()] = u.GetResourceVersion()
		}
	}
	return out
}

// checkUpgraded proves the cluster runs the new release: each CRD has v1 only, storedVersions
// [v1], every object is stored at v1 in etcd with its data, every manager's entries survive
// and server-side apply by each manager works; plan of the release is not breaking.
func (r *release) checkUpgraded(t *testing.T, kubeconfig string) {
	t.Helper()
	ctx := context.Background()
	for _, c := range r.newCRDs {
		crd, err := r.crds.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, c.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, v := range crd.Spec.Versions {
			names = append(names, v.Name)
		}
		if !slices.Equal(names, []string{"v1"}) || !slices.Equal(crd.Status.StoredVersions, []string{"v1"}) {
			t.Errorf("%s: versions %v storedVersions %v, want [v1] [v1]", c.Name, names, crd.Status.StoredVersions)
		}
		gvr := schema.GroupVersionResource{Group: r.group, Version: "v1", Resource: c.Spec.Names.Plural}
		list, err := r.dyn.Resource(gvr).Namespace(r.ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, u := range list.Items {
			stored, _, err := env.StoredObject(ctx, r.group, c.Spec.Names.Plural, r.ns, u.GetName())
			if err != nil {
				t.Fatal(err)
			}
			if stored["apiVersion"] != r.group+"/v1" {
				t.Errorf("%s: stored at %v in etcd, want %s/v1", u.GetName(), stored["apiVersion"], r.group)
			}
			var managers []string
			for _, e := range u.GetManagedFields() {
				managers = append(managers, e.Manager)
				if e.APIVersion != r.group+"/v1" {
					t.Errorf("%s: managedFields entry of %s names %s", u.GetName(), e.Manager, e.APIVersion)
				}
			}
			want := "kubectl-create"
			if strings.HasSuffix(u.GetName(), "-gitops") {
				want = "gitops"
			}
			if !slices.Contains(managers, want) {
				t.Errorf("%s: managers %v lost %s", u.GetName(), managers, want)
			}
			// Server-side apply by the manager, at v1, works (it fails on stale entries).
			body := fmt.Sprintf(`{"apiVersion":"%s/v1","kind":"%s","metadata":{"name":"%s","namespace":"%s","labels":{"after":"upgrade"}}}`, r.group, c.Spec.Names.Kind, u.GetName(), r.ns)
			if _, err := r.dyn.Resource(gvr).Namespace(r.ns).Patch(ctx, u.GetName(), types.ApplyPatchType, []byte(body), metav1.PatchOptions{FieldManager: want}); err != nil {
				t.Errorf("%s: server-side apply by %s after the upgrade: %v", u.GetName(), want, err)
			}
		}
	}
	if res := run(t, "", "plan", "-f", r.dir, "--kubeconfig", kubeconfig); res.code != 0 {
		t.Errorf("plan of the same release after the upgrade: exit %d\n%s\n%s", res.code, res.stdout, res.stderr)
	}
}

// tempKubeconfig copies the test kubeconfig into a temporary folder (what kubectl is given).
func tempKubeconfig(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(env.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func isolateCache(t *testing.T) {
	t.Helper()
	d := t.TempDir()
	t.Setenv("XDG_CACHE_HOME", d)
	t.Setenv("HOME", d)
}

// TestUpgradeRunbookByHand: plan prints one runbook for the two-CRD release; executing its
// commands top to bottom (ours in-process, kubectl for real) takes the cluster to the release.
func TestUpgradeRunbookByHand(t *testing.T) {
	if _, err := exec.LookPath("kubectl"); err != nil {
		t.Skip("kubectl is not installed") // the runbook's kubectl steps need the real one
	}
	isolateCache(t)
	r := setupRelease(t, "byhand.upgrade.example.com", false)
	kc := tempKubeconfig(t)
	rep, actions := planRunbook(t, r.dir, kc)
	applies := 0
	for _, s := range rep.Runbook {
		for _, c := range s.Commands {
			if strings.HasPrefix(c, "kubectl apply") && s.Action == plan.ActionApply {
				applies++
			}
		}
	}
	want := []string{plan.ActionChangeWriters, plan.ActionChangeWriters, plan.ActionBackup, plan.ActionIntermediate, plan.ActionRetire, plan.ActionRetire, plan.ActionApply, plan.ActionVerify}
	if !slices.Equal(actions, want) {
		t.Fatalf("runbook actions %v, want %v\n%+v", actions, want, rep.Runbook)
	}
	if applies != 1 {
		t.Errorf("the release is applied %d times, want once", applies)
	}
	// The human runbook fits 120 columns.
	human := run(t, "", "plan", "-f", r.dir, "--kubeconfig", kc)
	for _, l := range strings.Split(human.stdout[strings.Index(human.stdout, "Runbook"):], "\n") {
		if len(l) > 120 && !strings.Contains(l, "$ ") {
			t.Errorf("runbook line over 120 columns: %q", l)
		}
	}

	work := t.TempDir()
	followRunbook(t, work, kc, rep)
	backup, err := os.ReadFile(filepath.Join(work, "crdver-backup.yaml"))
	if err != nil || !strings.Contains(string(backup), r.group+"/v1beta1") || !strings.Contains(string(backup), "w-gitops") {
		t.Errorf("the backup step did not read the objects at v1beta1 (%v)", err)
	}
	r.checkUpgraded(t, kc)
}

// planRunbook is plan -o json of the release in dir against kubeconfig, and its runbook's
// actions in order.
func planRunbook(t *testing.T, dir, kubeconfig string) (*plan.Report, []string) {
	t.Helper()
	res := run(t, "", "plan", "-f", dir, "--kubeconfig", kubeconfig, "-o", "json")
	var rep plan.Report
	if err := json.Unmarshal([]byte(res.stdout), &rep); err != nil {
		t.Fatalf("plan -o json: %v\n%s\n%s", err, res.stdout, res.stderr)
	}
	var actions []string
	for _, s := range rep.Runbook {
		actions = append(actions, s.Action)
	}
	return &rep, actions
}

// followRunbook runs the commands of rep's runbook in order in dir, as a user copies them
// (runStep).
func followRunbook(t *testing.T, dir, kubeconfig string, rep *plan.Report) {
	t.Helper()
	for n, s := range rep.Runbook {
		for _, c := range s.Commands {
			runStep(t, dir, kubeconfig, c, n+1)
		}
	}
}

// runStep runs one runbook command in dir: `kubectl crdver …` in-process (with --yes: the
// test has no terminal to answer; a trailing `> FILE` as a redirection), any other command as
// copied, by a shell with KUBECONFIG set (kubectl for real, its quoting as the user's).
func runStep(t *testing.T, dir, kubeconfig, command string, n int) {
	t.Helper()
	if !strings.HasPrefix(command, "kubectl crdver ") {
		cmd := exec.Command("bash", "-c", command)
		cmd.Dir, cmd.Env = dir, append(os.Environ(), "KUBECONFIG="+kubeconfig)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("step %d: %s: %v\n%s", n, command, err, out)
		}
		return
	}
	out := ""
	if i := strings.Index(command, " > "); i > 0 {
		command, out = command[:i], strings.TrimSpace(command[i+3:])
	}
	a := append(strings.Fields(command)[2:], "--kubeconfig", kubeconfig)
	if a[0] == "retire" || a[0] == "migrate" {
		a = append(a, "--yes")
	}
	res := run(t, "", a...)
	if res.code != 0 {
		t.Fatalf("step %d: %s: exit %d\n%s\n%s", n, command, res.code, res.stdout, res.stderr)
	}
	if out != "" {
		if err := os.WriteFile(filepath.Join(dir, out), []byte(res.stdout), 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

// TestUpgradeYes: one command takes the cluster to the release, with a backup at v1beta1.
func TestUpgradeYes(t *testing.T) {
	isolateCache(t)
	r := setupRelease(t, "yes.upgrade.example.com", false)
	backup := filepath.Join(t.TempDir(), "backup.yaml")
	res := runCluster(t, "upgrade", "-f", r.dir, "--yes", "--backup", backup)
	if res.code != 0 {
		t.Fatalf("upgrade: exit %d\n%s\n%s", res.code, res.stdout, res.stderr)
	}
	mustContain(t, "upgrade output", res.stdout, "Upgrade complete.", backup)
	b, err := os.ReadFile(backup)
	if n := strings.Count(string(b), "---\napiVersion: "+r.group+"/v1beta1\n"); err != nil || n != 4 {
		t.Errorf("backup holds %d objects at v1beta1, want 4 (%v)", n, err)
	}
	r.checkUpgraded(t, env.Kubeconfig)
	// The user's own next apply of the release does not conflict.
	if _, err := exec.LookPath("kubectl"); err == nil {
		out, err := exec.Command("/usr/bin/kubectl", "apply", "--server-side", "-f", r.dir, "--kubeconfig", tempKubeconfig(t)).CombinedOutput()
		if err != nil {
			t.Errorf("kubectl apply --server-side of the release after upgrade: %v\n%s", err, out)
		}
	}
}

// TestUpgradeVerifyReusesFirstPlan: the verify step's plan does not evaluate again the objects
// the first plan found clean, which the upgrade rewrote without changing their content
// (plan.ObjectMemo), and finds nothing, as the first plan did for them.
func TestUpgradeVerifyReusesFirstPlan(t *testing.T) {
	isolateCache(t)
	r := setupRelease(t, "memo.upgrade.example.com", false)
	res := runCluster(t, "upgrade", "-f", r.dir, "--yes", "--backup", filepath.Join(t.TempDir(), "backup.yaml"), "-o", "json")
	if res.code != 0 {
		t.Fatalf("upgrade: exit %d\n%s\n%s", res.code, res.stdout, res.stderr)
	}
	var rep upgrade.Report
	if err := json.Unmarshal([]byte(res.stdout), &rep); err != nil {
		t.Fatalf("%v\n%s", err, res.stdout)
	}
	var clean int64
	for _, it := range rep.Plan.Items {
		clean += it.Objects.Evaluated - int64(len(it.Objects.Findings))
	}
	if rep.Verify == nil || clean == 0 || rep.Verify.Unchanged != clean {
		t.Errorf("verify: %+v; the first plan found %d objects clean, all rewritten unchanged", rep.Verify, clean)
	}
	r.checkUpgraded(t, env.Kubeconfig)
}

// TestUpgradeRefusesDataLoss: an object holding a field v1 lacks stops the upgrade before any
// write; --allow-data-loss goes on, and the backup keeps the field.
func TestUpgradeRefusesDataLoss(t *testing.T) {
	isolateCache(t)
	r := setupRelease(t, "loss.upgrade.example.com", true)
	before := r.snapshot(t)
	backup := filepath.Join(t.TempDir(), "backup.yaml")
	res := runCluster(t, "upgrade", "-f", r.dir, "--yes", "--backup", backup)
	if res.code != 1 {
		t.Fatalf("upgrade with data loss: exit %d, want 1\n%s\n%s", res.code, res.stdout, res.stderr)
	}
	mustContain(t, "refusal", res.stdout, "w-legacy", "spec.legacy")
	mustContain(t, "refusal", res.stderr, "nothing was written", "--allow-data-loss")
	if strings.Contains(res.stderr, "--skip-invalid") {
		t.Errorf("the refusal names --skip-invalid, which does not help with data loss: %s", res.stderr)
	}
	if after := r.snapshot(t); !mapsEqual(before, after) {
		t.Errorf("the refused upgrade wrote: before %v after %v", before, after)
	}
	if _, err := os.Stat(backup); err == nil {
		t.Errorf("the refused upgrade wrote a backup")
	}
	res = runCluster(t, "upgrade", "-f", r.dir, "--yes", "--backup", backup, "--allow-data-loss")
	if res.code != 0 {
		t.Fatalf("upgrade --allow-data-loss: exit %d\n%s\n%s", res.code, res.stdout, res.stderr)
	}
	b, err := os.ReadFile(backup)
	if err != nil || !strings.Contains(string(b), "legacy: keep-me") {
		t.Errorf("the backup lacks spec.legacy (%v)", err)
	}
	r.checkUpgraded(t, env.Kubeconfig)
}

// TestUpgradeRefusesRejectedRewrite: an object whose rewrite at the new storage version would
// be rejected stops the upgrade before any storage switch; --skip-invalid goes on, and the
// release is not applied over the CRD whose storedVersions could not be trimmed.
func TestUpgradeRefusesRejectedRewrite(t *testing.T) {
	isolateCache(t)
	r := setupReleaseWith(t, "rejected.upgrade.example.com", false, true)
	before := r.snapshot(t)
	backup := filepath.Join(t.TempDir(), "backup.yaml")
	res := runCluster(t, "upgrade", "-f", r.dir, "--yes", "--backup", backup)
	if res.code != 1 {
		t.Fatalf("upgrade: exit %d, want 1\n%s\n%s", res.code, res.stdout, res.stderr)
	}
	mustContain(t, "refusal", res.stdout, "g-gitops", "rejected")
	mustContain(t, "refusal", res.stderr, "would be rejected", "nothing was written")
	if after := r.snapshot(t); !mapsEqual(before, after) {
		t.Errorf("the refused upgrade wrote: before %v after %v", before, after)
	}
	res = runCluster(t, "upgrade", "-f", r.dir, "--yes", "--backup", backup, "--skip-invalid")
	if res.code != 1 {
		t.Fatalf("upgrade --skip-invalid: exit %d, want 1 (not complete)\n%s\n%s", res.code, res.stdout, res.stderr)
	}
	mustContain(t, "--skip-invalid", res.stderr, "not complete", "gadgets."+r.group)
	crd, err := r.crds.ApiextensionsV1().CustomResourceDefinitions().Get(context.Background(), "gadgets."+r.group, metav1.GetOptions{})
	if err != nil || !slices.Contains(crd.Status.StoredVersions, "v1beta1") {
		t.Fatalf("gadgets: storedVersions %v (%v): the object that failed keeps v1beta1", crd.Status.StoredVersions, err)
	}
	if _, err := r.dyn.Resource(r.gadgets).Namespace(r.ns).Get(context.Background(), "g-gitops", metav1.GetOptions{}); err != nil {
		t.Errorf("g-gitops is no longer readable at v1beta1: %v", err)
	}
}

// TestUpgradeDryRunWritesNothing: --dry-run prints the runbook and the preflight only.
func TestUpgradeDryRunWritesNothing(t *testing.T) {
	isolateCache(t)
	r := setupRelease(t, "dry.upgrade.example.com", false)
	before := r.snapshot(t)
	dir := t.TempDir()
	t.Chdir(dir)
	res := runCluster(t, "upgrade", "-f", r.dir, "--dry-run")
	if res.code != 0 {
		t.Fatalf("upgrade --dry-run: exit %d\n%s\n%s", res.code, res.stdout, res.stderr)
	}
	mustContain(t, "dry run", res.stdout, "Runbook", "kubectl apply --server-side --force-conflicts", "Dry run: nothing was written.")
	if after := r.snapshot(t); !mapsEqual(before, after) {
		t.Errorf("--dry-run wrote: before %v after %v", before, after)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Errorf("--dry-run wrote files: %v", ents)
	}
}

// TestUpgradeProgressCountsTheCheck: the preflight's second read of the objects (its deeper
// check of what the rewrite at the new storage version loses and which writes are refused)
// the backup and the retire step's read of the objects' managedFields have progress lines of
// their own, as the plan's evaluation and the rewrite have, and the verify step's evaluation
// has the plan's: at a million objects each took minutes with nothing printed.
func TestUpgradeProgressCountsTheCheck(t *testing.T) {
	isolateCache(t)
	r := setupRelease(t, "progress.upgrade.example.com", false)
	backup := filepath.Join(t.TempDir(), "backup.yaml")
	res := runCluster(t, "upgrade", "-f", r.dir, "--yes", "--backup", backup, "--progress-interval", "1ms")
	if res.code != 0 {
		t.Fatalf("upgrade: exit %d\n%s\n%s", res.code, res.stdout, res.stderr)
	}
	for _, re := range []string{
		`(?m)^upgrade preflight: (\d+)/(?:\d+|\?) objects checked, .*$`,
		`(?m)^upgrade backup: (\d+)/\? objects backed up, .*$`,
		// the retire step's reads of every object's managedFields
		`(?m)^upgrade: (\d+)/\? objects read for managedFields entries of v1beta1, .*$`,
	} {
		lines := regexp.MustCompile(re).FindAllStringSubmatch(res.stderr, -1)
		if len(lines) == 0 {
			t.Errorf("no progress line %s:\n%s", re, res.stderr)
		} else if last := lines[len(lines)-1]; last[1] == "0" {
			t.Errorf("last progress line %q: want objects counted", last[0])
		}
	}
	// The verify step's plan of the release (every object read again) counts as the first.
	if _, after, ok := strings.Cut(res.stderr, "apply: done"); !ok || !regexp.MustCompile(`(?m)^upgrade: [1-9]\d*/\d+ objects evaluated, `).MatchString(after) {
		t.Errorf("no progress line of the verify step's evaluation after the apply:\n%s", res.stderr)
	}
	r.checkUpgraded(t, env.Kubeconfig)
}

// TestUpgradeResumes: an upgrade interrupted after its first storage step is resumed by
// running it again; the first backup is kept.
func TestUpgradeResumes(t *testing.T) {
	isolateCache(t)
	r := setupRelease(t, "resume.upgrade.example.com", false)
	c, err := migrate.NewClients(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	var next []*apiextensionsv1.CustomResourceDefinition
	for _, n := range r.newCRDs {
		next = append(next, n.DeepCopy())
	}
	backup := filepath.Join(t.TempDir(), "backup.yaml")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	o := upgrade.Options{Next: next, ApplyFile: r.dir, BackupFile: backup, Notify: func(s string) {
		if strings.Contains(s, "intermediate-crds: done") {
			cancel()
		}
	}}
	rep, err := upgrade.Run(ctx, c, o)
	if err == nil || !strings.Contains(err.Error(), "interrupted") {
		t.Fatalf("interrupted run: %v", err)
	}
	if rep.Backup == nil || rep.Backup.File != backup {
		t.Fatalf("backup: %+v", rep.Backup)
	}
	first, _ := os.ReadFile(backup)
	crd, err := r.crds.ApiextensionsV1().CustomResourceDefinitions().Get(context.Background(), "widgets."+r.group, metav1.GetOptions{})
	if err != nil || crd.Spec.Versions[0].Name != "v1" || !slices.Contains(crd.Status.StoredVersions, "v1beta1") {
		t.Fatalf("after the interruption widgets should have the intermediate CRD with v1beta1 still stored: %+v %v", crd.Status.StoredVersions, err)
	}
	o.Notify = nil
	rep, err = upgrade.Run(context.Background(), c, o)
	if err != nil || len(rep.Problems) > 0 {
		t.Fatalf("resumed run: %v %v", err, rep.Problems)
	}
	if !rep.Resumed || rep.Backup == nil || !rep.Backup.Reused {
		t.Errorf("the resumed run did not continue from the checkpoint: resumed %v backup %+v", rep.Resumed, rep.Backup)
	}
	if again, _ := os.ReadFile(backup); string(again) != string(first) {
		t.Errorf("the resumed run rewrote the backup")
	}
	r.checkUpgraded(t, env.Kubeconfig)
}

func mapsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// TestRetireAdviceNeverPointsForward: versions never suggests retiring the newest served
// version (Gateway API v0.5: storage v1alpha2, v1beta1 served — retire would move entries back
// to v1alpha2); an older version is retired to the newest one, named with --to.
func TestRetireAdviceNeverPointsForward(t *testing.T) {
	crd := testcrd.New("advice.example.com", "Gateway",
		testcrd.Version("v1alpha2", true, true, upgradeSchema(false, 0, "")), testcrd.Version("v1beta1", true, false, upgradeSchema(false, 0, "")))
	if got := explain.RetireAdvice(crd, "v1beta1"); got != "" {
		t.Errorf("advice for the newest served version: %q, want none", got)
	}
	if got, want := explain.RetireAdvice(crd, "v1alpha2"), "kubectl crdver retire gateways.advice.example.com v1alpha2 --to v1beta1"; got != want {
		t.Errorf("advice for v1alpha2: %q, want %q", got, want)
	}
}

// TestUpgradeAsks: without --yes the upgrade asks once before the first write; "no" writes
// nothing (no backup either) and exits 3.
func TestUpgradeAsks(t *testing.T) {
	isolateCache(t)
	r := setupRelease(t, "ask.upgrade.example.com", false)
	before := r.snapshot(t)
	backup := filepath.Join(t.TempDir(), "backup.yaml")
	res := run(t, "n\n", "upgrade", "-f", r.dir, "--backup", backup, "--kubeconfig", env.Kubeconfig)
	if res.code != 3 {
		t.Fatalf("upgrade answered no: exit %d\n%s\n%s", res.code, res.stdout, res.stderr)
	}
	mustContain(t, "question", res.stderr, "Carry out the upgrade", "not confirmed")
	if after := r.snapshot(t); !mapsEqual(before, after) {
		t.Errorf("an unconfirmed upgrade wrote")
	}
	if _, err := os.Stat(backup); err == nil {
		t.Errorf("an unconfirmed upgrade wrote a backup")
	}
}
