package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/yaml"

	"github.com/crdver/kubectl-crdver/plan"
	"github.com/crdver/kubectl-crdver/preflight"
	"github.com/crdver/kubectl-crdver/upgrade"
)

// otelRelease: the OpenTelemetry operator v0.98.0 → v0.99.0 (testdata/releases/
// opentelemetry-operator). v0.99.0 makes v1beta1 the storage version of
// OpenTelemetryCollector and keeps v1alpha1 served; v1alpha1's spec.config is the collector's
// configuration as YAML text, v1beta1's an object. The CRD is the project's generated file
// (config/crd/bases), conversion None, as the Helm chart renders it with
// admissionWebhooks.create=false: a v1alpha1 object reads at v1beta1 with the string
// untouched. The objects are the project's own v1alpha1 samples and e2e inputs.
var otelRelease = release{
	Project: "opentelemetry-operator", Old: "v0.98.0", New: "v0.99.0",
	Samples:    []string{"samples/*.yaml"},
	Controller: "opentelemetry-operator",
	Status: func(o *tracked, cur *unstructured.Unstructured) map[string]any {
		return map[string]any{"version": "0.98.0", "scale": map[string]any{"replicas": int64(1)}}
	},
	Applier: "argocd-controller",
}

const otelCRD = "opentelemetrycollectors.opentelemetry.io"

// otelNoProcessors are the samples whose pipeline names no processors (v1alpha1 accepts the
// text; v1beta1's schema requires processors in each pipeline).
var otelNoProcessors = map[string]bool{"otel": true, "opentelemetrycollector-as-sidecar": true}

// versionless is a manager as LostManagers words it without the version its entry names
// ("kubectl-create (Update at opentelemetry.io/v1alpha1)" → "kubectl-create (Update)"): the
// rewrite moves entries to the storage version.
func versionless(m []string) []string {
	out := make([]string, 0, len(m))
	for _, x := range m {
		if i := strings.Index(x, " at "); i > 0 {
			j := strings.IndexAny(x[i:], ",)")
			x = x[:i] + x[i+j:]
		}
		out = append(out, x)
	}
	slices.Sort(out)
	return out
}

// otelState is each sample's resourceVersion and managers (as the ownership report words
// them), read at v.
func (h *harness) otelState(v string) (map[string]string, map[string][]string) {
	h.t.Helper()
	rvs, mgrs := map[string]string{}, map[string][]string{}
	for _, o := range h.objects {
		u, err := h.get(o, v)
		if err != nil {
			h.t.Fatalf("%s: %v", o, err)
		}
		rvs[o.Namespace+"/"+o.Name] = u.GetResourceVersion()
		all, _ := preflight.LostManagers(u.GetManagedFields(), nil)
		mgrs[o.Namespace+"/"+o.Name] = slices.Sorted(slices.Values(all))
	}
	return rvs, mgrs
}

// otelApplyLabel server-side applies one label on o at v1beta1 as the GitOps applier (what
// its next sync of a v1beta1 manifest does first: the object typed at v1beta1).
func (h *harness) otelApplyLabel(o *tracked) error {
	body := fmt.Sprintf(`{"apiVersion":"opentelemetry.io/v1beta1","kind":"OpenTelemetryCollector","metadata":{"name":%q,"namespace":%q,"labels":{"synced":"yes"}}}`, o.Name, o.Namespace)
	force := true
	_, err := h.resource(o, "v1beta1").Patch(h.ctx, o.Name, types.ApplyPatchType, []byte(body), metav1.PatchOptions{FieldManager: h.rel.Applier, Force: &force})
	return err
}

// otelSetUp installs v0.98.0 with the samples (created by kubectl, status by the operator,
// applied by Argo CD, all at v1alpha1) and returns the new release's folder.
func otelSetUp(t *testing.T) (*harness, string) {
	h := newHarness(t, otelRelease)
	h.setUp(nil)
	if len(h.objects) != 4 {
		t.Fatalf("%d samples created, want 4", len(h.objects))
	}
	return h, h.releaseDir(otelRelease.New)
}

// otelPlan runs plan -o json and checks that it names every sample with spec.config's
// mismatch (a string where v1beta1 has a map), the type-mismatch kind and a fix-values step
// with one patch per object; it returns the report's findings by object.
func (h *harness) otelPlan(newDir string) (map[string]plan.Finding, *plan.RunbookStep) {
	h.t.Helper()
	r := h.crdver("plan", "-f", newDir, "-o", "json")
	if r.code != 1 {
		h.t.Fatalf("plan: exit %d, want 1 (breaking)\n%s", r.code, r.stderr)
	}
	var rep plan.Report
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		h.t.Fatalf("plan -o json: %v\n%s", err, r.stdout)
	}
	if len(rep.Items) != 1 || rep.Items[0].Verdict != plan.VerdictBreaking || !slices.Contains(rep.Items[0].Kinds, plan.KindTypeMismatch) {
		h.t.Fatalf("plan: %+v", rep.Items)
	}
	found := map[string]plan.Finding{}
	for _, f := range rep.Items[0].Objects.Findings {
		found[f.Namespace+"/"+f.Name] = f
	}
	for _, o := range h.objects {
		f := found[o.Namespace+"/"+o.Name]
		if len(f.TypeMismatches) != 1 || f.TypeMismatches[0].Path != ".spec.config" || f.TypeMismatches[0].ValueType != "string" || f.TypeMismatches[0].Expected != "map" {
			h.t.Errorf("plan: %s: type mismatches %+v, want .spec.config string → map", o, f.TypeMismatches)
		}
		if !slices.Contains(f.Kinds, plan.KindTypeMismatch) {
			h.t.Errorf("plan: %s: kinds %v", o, f.Kinds)
		}
		if len(f.TypeMismatches) != 1 {
			continue
		}
		// The v1alpha1 samples whose pipeline names no processors convert to a map that
		// v1beta1 rejects (it requires processors): no patch for them, the server's error.
		m := f.TypeMismatches[0]
		if otelNoProcessors[o.Name] != (m.Converted == "") || otelNoProcessors[o.Name] != slices.Contains(m.ConvertedErrors, "spec.config.service.pipelines.traces.processors: Required value") {
			h.t.Errorf("plan: %s: converted %q, errors of the converted object %q", o, m.Converted, m.ConvertedErrors)
		}
	}
	var step *plan.RunbookStep
	for i := range rep.Runbook {
		if rep.Runbook[i].Action == plan.ActionFixValues {
			step = &rep.Runbook[i]
		}
	}
	if step == nil {
		h.t.Fatalf("plan: no fix-values step:\n%s", r.stdout)
	}
	return found, step
}

// otelApplyNew applies v0.99.0's CRD as the runbook's apply step does, and waits until
// v1beta1 is served.
func (h *harness) otelApplyNew(newDir string) {
	h.t.Helper()
	if r := h.applyCRDFile(filepath.Join(newDir, "opentelemetry.io_opentelemetrycollectors.yaml"), "--force-conflicts"); r.err != nil {
		h.t.Fatalf("applying v0.99.0: %v\n%s", r.err, r.stderr)
	}
	o := h.objects[0]
	err := wait.PollUntilContextTimeout(h.ctx, 50*time.Millisecond, 20*time.Second, true, func(ctx context.Context) (bool, error) {
		_, err := h.resource(o, "v1beta1").Get(ctx, o.Name, metav1.GetOptions{})
		return err == nil || !apierrors.IsNotFound(err), nil
	})
	if err != nil {
		h.t.Fatalf("v1beta1 is not served: %v", err)
	}
}

// otelFixValues runs the fix-values step's commands as the user would (the real kubectl) and
// returns the objects whose patch the API server accepted.
func (h *harness) otelFixValues(step *plan.RunbookStep) map[string]bool {
	h.t.Helper()
	done := map[string]bool{}
	for _, c := range step.Commands {
		if !strings.HasPrefix(c, "kubectl patch ") {
			continue
		}
		f := strings.Fields(c)
		name, ns := f[3], ""
		if i := slices.Index(f, "-n"); i > 0 {
			ns = f[i+1]
		}
		patch := c[strings.Index(c, "-p '")+4 : len(c)-1]
		r := h.kubectl(f[1], f[2], name, "-n", ns, "--type=json", "-p", patch)
		if r.err != nil {
			h.t.Logf("%s: %v\n%s", c, r.err, r.stderr)
			continue
		}
		done[ns+"/"+name] = true
	}
	return done
}

// otelFix runs the fix-values step (otelFixValues) and does a person's fix of the objects it
// leaves to one, after checking plan's prediction that the converted value is rejected; it
// returns the objects the step's patches fixed.
func (h *harness) otelFix(found map[string]plan.Finding, step *plan.RunbookStep) map[string]bool {
	h.t.Helper()
	t := h.t
	fixed := h.otelFixValues(step)
	for _, o := range h.objects {
		key := o.Namespace + "/" + o.Name
		m := found[key].TypeMismatches
		if len(m) != 1 {
			continue
		}
		if fixed[key] == otelNoProcessors[o.Name] {
			t.Errorf("%s: fix-values patch accepted %v, want %v", o, fixed[key], !otelNoProcessors[o.Name])
		}
		if !otelNoProcessors[o.Name] {
			continue
		}
		// Plan's prediction: the value converted as the step would have, sent to the server,
		// is rejected with the errors plan lists.
		var cfg map[string]any
		var text string
		if err := json.Unmarshal([]byte(m[0].Value), &text); err != nil || yaml.Unmarshal([]byte(text), &cfg) != nil {
			t.Fatalf("%s: value %s", o, m[0].Value)
		}
		patch, _ := json.Marshal([]map[string]any{{"op": "replace", "path": "/spec/config", "value": cfg}})
		_, err := h.resource(o, "v1beta1").Patch(h.ctx, o.Name, types.JSONPatchType, patch, metav1.PatchOptions{FieldManager: "kubectl-patch"})
		for _, e := range m[0].ConvertedErrors {
			if err == nil || !strings.Contains(err.Error(), e) {
				t.Errorf("%s: the converted value: %v, plan said %q", o, err, e)
			}
		}
		// The person's fix: the same map with the empty processors list v1beta1 asks for
		// (as the project's own v1beta1 samples write it).
		if err := unstructured.SetNestedSlice(cfg, []any{}, "service", "pipelines", "traces", "processors"); err != nil {
			t.Fatal(err)
		}
		patch, _ = json.Marshal([]map[string]any{{"op": "replace", "path": "/spec/config", "value": cfg}})
		if r := h.kubectl("patch", "opentelemetrycollectors.v1beta1.opentelemetry.io", o.Name, "-n", o.Namespace, "--type=json", "-p", string(patch)); r.err != nil {
			t.Fatalf("%s: the person's fix: %v\n%s", o, r.err, r.stderr)
		}
	}
	for _, o := range h.objects {
		u, err := h.get(o, "v1beta1")
		if err != nil {
			t.Fatal(err)
		}
		if cfg, ok, _ := unstructured.NestedMap(u.Object, "spec", "config"); !ok || cfg["service"] == nil {
			t.Errorf("%s: spec.config after the fix: %v", o, u.Object["spec"])
		}
	}
	return fixed
}

// upgradeRefuses runs upgrade --yes (with args) and checks that it refuses before any write
// for the type mismatch: exit 1, the objects and the CRD unchanged, no backup.
func (h *harness) otelUpgradeRefuses(newDir string, args ...string) {
	h.t.Helper()
	rvs, mgrs := h.otelState("v1alpha1")
	crdRV := h.liveCRD(otelCRD).ResourceVersion
	tmp := h.t.TempDir()
	r := h.crdver(append([]string{"upgrade", "-f", newDir, "--yes", "--backup", filepath.Join(tmp, "backup.yaml"), "--checkpoint", filepath.Join(tmp, "cp.json"), "-o", "json"}, args...)...)
	if r.code != 1 {
		h.t.Fatalf("upgrade %v: exit %d, want 1\n%s\n%s", args, r.code, r.stdout, r.stderr)
	}
	var rep upgrade.Report
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		h.t.Fatalf("upgrade -o json: %v\n%s", err, r.stdout)
	}
	if rep.Outcome.Result != "refused" || !slices.Contains(rep.Outcome.Refusals, plan.KindTypeMismatch) {
		h.t.Errorf("upgrade %v: outcome %s, refusals %v, want refused for type-mismatch", args, rep.Outcome.Result, rep.Outcome.Refusals)
	}
	if after, am := h.otelState("v1alpha1"); fmt.Sprint(after, am) != fmt.Sprint(rvs, mgrs) {
		h.t.Errorf("upgrade %v: the refused run wrote the objects", args)
	}
	if h.liveCRD(otelCRD).ResourceVersion != crdRV {
		h.t.Errorf("upgrade %v: the refused run changed the CRD", args)
	}
	if _, err := os.Stat(filepath.Join(tmp, "backup.yaml")); err == nil {
		h.t.Errorf("upgrade %v: the refused run wrote a backup", args)
	}
}

// TestOpenTelemetryTypeChange: the OpenTelemetry operator v0.98.0 → v0.99.0 on kube-apiserver
// 1.37 (the package's), as a user runs it:
//
//   - plan names every sample with .spec.config a string where v1beta1 has a map, and gives
//     the fix-values step;
//   - upgrade --yes refuses before any write, with or without --allow-data-loss and
//     --allow-ownership-loss (type-mismatch has no override);
//   - once the release's CRD is applied, server-side apply fails on each sample with the
//     error plan named;
//   - the fix-values step's patches (run with the real kubectl) give each object the listed
//     value; migrate rewrites every object at v1beta1 and exits 0, every object keeping its
//     managers (1.37 keeps the managedFields of an object it cannot type); server-side apply
//     then works on every object, and plan of the release is clean of them.
func TestOpenTelemetryTypeChange(t *testing.T) {
	h, newDir := otelSetUp(t)
	found, step := h.otelPlan(newDir)
	h.otelUpgradeRefuses(newDir)
	h.otelUpgradeRefuses(newDir, "--allow-data-loss", "--allow-ownership-loss", "--skip-invalid")

	h.otelApplyNew(newDir)
	for _, o := range h.objects {
		err := h.otelApplyLabel(o)
		want := found[o.Namespace+"/"+o.Name].TypeMismatches
		if err == nil || len(want) == 0 || !strings.Contains(err.Error(), ".spec.config: expected map, got") {
			t.Errorf("%s: server-side apply at v1beta1 after the apply: %v; plan said %+v", o, err, want)
		}
	}
	_, mgrs := h.otelState("v1beta1")

	h.otelFix(found, step)

	tmp := t.TempDir()
	r := h.crdver("migrate", otelCRD, "--yes", "--quiet", "--checkpoint", filepath.Join(tmp, "cp.json"))
	if r.code != 0 {
		t.Fatalf("migrate after the fix: exit %d, want 0\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	if sv := h.liveCRD(otelCRD).Status.StoredVersions; !slices.Equal(sv, []string{"v1beta1"}) {
		t.Errorf("after migrate: storedVersions %v, want [v1beta1]", sv)
	}
	_, after := h.otelState("v1beta1")
	for k, m := range mgrs {
		// The rewrite moves every entry to v1beta1; a patch adds kubectl-patch at most.
		got := slices.DeleteFunc(versionless(after[k]), func(x string) bool { return strings.HasPrefix(x, "kubectl-patch ") })
		if !slices.Equal(got, versionless(m)) {
			t.Errorf("%s: managers %v after the fix and migrate, %v before (1.37 keeps them)", k, after[k], m)
		}
	}
	for _, o := range h.objects {
		if err := h.otelApplyLabel(o); err != nil {
			t.Errorf("%s: server-side apply at v1beta1 after the fix and migrate: %v", o, err)
		}
	}
	r = h.crdver("plan", "-f", newDir, "-o", "json")
	var rep plan.Report
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Fatalf("plan after the fix: %v\n%s", err, r.stderr)
	}
	if r.code != 0 || len(rep.Items) != 1 || len(rep.Items[0].Objects.Findings) != 0 {
		t.Errorf("plan after the fix and migrate: exit %d, findings %+v\n%s", r.code, rep.Items[0].Objects.Findings, r.stderr)
	}
}

// TestOpenTelemetryOwnershipOnOlderServer: the same release on kube-apiserver 1.34, which
// drops every managedFields entry of an object it cannot type when it rewrites it. After the
// release's CRD is applied (the values not fixed yet):
//
//   - migrate refuses before any write, with --allow-data-loss too, listing each sample with
//     its managers (all of them: kubectl-create, the operator's status writer, Argo CD);
//   - with --allow-ownership-loss it rewrites every object at v1beta1 and exits 0; each object
//     then has exactly none of the managers listed, and nothing else changed in it;
//   - after the fix-values step (and the person's fix of the two it leaves to one),
//     server-side apply works on every object.
func TestOpenTelemetryOwnershipOnOlderServer(t *testing.T) {
	older := olderServer(t)
	current := env
	env = older
	t.Cleanup(func() { env = current })
	h, newDir := otelSetUp(t)
	found, step := h.otelPlan(newDir)
	h.otelUpgradeRefuses(newDir, "--allow-data-loss", "--allow-ownership-loss")
	h.otelApplyNew(newDir)

	rvs, mgrs := h.otelState("v1beta1")
	specs := map[string]any{}
	for _, o := range h.objects {
		u, err := h.get(o, "v1beta1")
		if err != nil {
			t.Fatal(err)
		}
		specs[o.Namespace+"/"+o.Name] = u.Object["spec"]
	}
	tmp := t.TempDir()
	for _, args := range [][]string{nil, {"--allow-data-loss"}} {
		r := h.crdver(append([]string{"migrate", otelCRD, "--yes", "--quiet", "--checkpoint", filepath.Join(tmp, "cp.json")}, args...)...)
		if r.code != 1 {
			t.Fatalf("migrate %v: exit %d, want 1\n%s\n%s", args, r.code, r.stdout, r.stderr)
		}
		mustContainE2E(t, "migrate's refusal", r.stdout+r.stderr, "4 objects would lose field managers", "--allow-ownership-loss", "nothing was written")
		for k, m := range mgrs {
			mustContainE2E(t, "migrate's refusal", r.stdout, k)
			for _, x := range m {
				mustContainE2E(t, "migrate's refusal", r.stdout, strings.SplitN(x, " (", 2)[0])
			}
		}
		if after, am := h.otelState("v1beta1"); fmt.Sprint(after, am) != fmt.Sprint(rvs, mgrs) {
			t.Errorf("migrate %v: the refused run wrote", args)
		}
	}
	r := h.crdver("migrate", otelCRD, "--yes", "--quiet", "--allow-ownership-loss", "--checkpoint", filepath.Join(tmp, "cp.json"))
	if r.code != 0 {
		t.Fatalf("migrate --allow-ownership-loss: exit %d, want 0\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	if sv := h.liveCRD(otelCRD).Status.StoredVersions; !slices.Equal(sv, []string{"v1beta1"}) {
		t.Errorf("after migrate: storedVersions %v, want [v1beta1]", sv)
	}
	_, after := h.otelState("v1beta1")
	for _, o := range h.objects {
		k := o.Namespace + "/" + o.Name
		if len(after[k]) != 0 {
			t.Errorf("%s: managers %v after the consented migrate: the refusal listed all of %v", o, after[k], mgrs[k])
		}
		u, err := h.get(o, "v1beta1")
		if err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(u.Object["spec"]) != fmt.Sprint(specs[k]) {
			t.Errorf("%s: spec changed by the migrate: %v → %v", o, specs[k], u.Object["spec"])
		}
	}

	h.otelFix(found, step)
	for _, o := range h.objects {
		if err := h.otelApplyLabel(o); err != nil {
			t.Errorf("%s: server-side apply at v1beta1 after the fix: %v", o, err)
		}
	}
}

func mustContainE2E(t *testing.T, what, got string, wants ...string) {
	t.Helper()
	for _, w := range wants {
		if !strings.Contains(got, w) {
			t.Errorf("%s: no %q in:\n%s", what, w, got)
		}
	}
}
