package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/yaml"

	"github.com/crdver/kubectl-crdver/internal/testenv"
	"github.com/crdver/kubectl-crdver/plan"
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

// otelApplyLabel server-side applies one label on o at v1beta1 as the GitOps applier (what
// its next sync of a v1beta1 manifest does first: the object typed at v1beta1).
func (h *harness) otelApplyLabel(o *tracked) error {
	body := fmt.Sprintf(`{"apiVersion":"opentelemetry.io/v1beta1","kind":"OpenTelemetryCollector","metadata":{"name":%q,"namespace":%q,"labels":{"synced":"yes"}}}`, o.Name, o.Namespace)
	force := true
	_, err := h.resource(o, "v1beta1").Patch(h.ctx, o.Name, types.ApplyPatchType, []byte(body), metav1.PatchOptions{FieldManager: h.rel.Applier, Force: &force})
	return err
}

// otelScaling are settings of v1alpha1 that v1beta1 drops (the autoscaler's bounds moved
// under spec.autoscaler; the update strategy became deploymentUpdateStrategy): what the
// convert-objects step lists and --allow-data-loss consents to losing.
var otelScaling = map[string]any{"minReplicas": int64(1), "maxReplicas": int64(3), "updateStrategy": map[string]any{"type": "RollingUpdate"}}

// otelSetUp installs v0.98.0 with the samples (created by kubectl, status by the operator,
// applied by Argo CD, all at v1alpha1), their GitOps manifests then given otelScaling (the
// applier's next sync), and returns the new release's folder.
func otelSetUp(t *testing.T, e *testenv.Env) (*harness, string) {
	h := newHarnessOn(t, otelRelease, e)
	h.setUp(nil)
	if len(h.objects) != 4 {
		t.Fatalf("%d samples created, want 4", len(h.objects))
	}
	for _, o := range h.objects {
		m := copyMap(o.Manifest)
		for k, v := range otelScaling {
			if err := unstructured.SetNestedField(m, v, "spec", k); err != nil {
				t.Fatal(err)
			}
		}
		if err := h.gitopsApply(o, o.Version, m); err != nil {
			t.Fatalf("%s: %v", o, err)
		}
		o.Manifest = m
	}
	return h, h.releaseDir(otelRelease.New)
}

// otelPlan runs plan -o json and checks that it names every sample with spec.config's
// mismatch (a string where v1beta1 has a map), the type-mismatch kind, and a runbook that
// converts the values after the backup: the step for a person (the two samples whose converted
// map v1beta1 rejects: no processors) after the backup, at v1alpha1, and the rewrite with
// --fix-values after the intermediate CRD. It returns the report.
func (h *harness) otelPlan(newDir string) *plan.Report {
	h.t.Helper()
	r := h.crdver("plan", "-f", newDir, "-o", "json")
	if r.code != 1 {
		h.t.Fatalf("plan: exit %d, want 1 (breaking)\n%s", r.code, r.stderr)
	}
	var rep plan.Report
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		h.t.Fatalf("plan -o json: %v\n%s", err, r.stdout)
	}
	h.otelPlanned(&rep)
	return &rep
}

// otelPlanned checks a plan of the release (plan's, or the one upgrade ran) as otelPlan says.
func (h *harness) otelPlanned(rep *plan.Report) {
	h.t.Helper()
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
			continue
		}
		// The v1alpha1 samples whose pipeline names no processors convert to a map that
		// v1beta1 rejects (it requires processors): for a person, with the server's error.
		m := f.TypeMismatches[0]
		if otelNoProcessors[o.Name] != (m.Converted == "") || otelNoProcessors[o.Name] != slices.Contains(m.ConvertedErrors, "spec.config.service.pipelines.traces.processors: Required value") {
			h.t.Errorf("plan: %s: converted %q, errors of the converted object %q", o, m.Converted, m.ConvertedErrors)
		}
	}
	var actions []string
	for _, s := range rep.Runbook {
		actions = append(actions, s.Action)
	}
	want := []string{plan.ActionConvertObjects, plan.ActionBackup, plan.ActionFixValues, plan.ActionIntermediate, plan.ActionMigrate, plan.ActionApply, plan.ActionVerify}
	if !slices.Equal(actions, want) {
		for _, s := range rep.Runbook {
			h.t.Logf("%s %v %s", s.Action, s.Objects, s.Why)
		}
		h.t.Fatalf("plan: runbook %v, want %v", actions, want)
	}
	person, migrate := rep.Runbook[2], rep.Runbook[4]
	if !person.Manual || person.Version != "v1alpha1" || len(person.Objects) != len(otelNoProcessors) {
		h.t.Errorf("plan: the fix-values step: %+v", person)
	}
	if !migrate.FixValues || len(migrate.Commands) != 1 || !strings.HasSuffix(migrate.Commands[0], " --fix-values --allow-data-loss") {
		h.t.Errorf("plan: the rewrite: %+v", migrate)
	}
}

// otelPersonFix does what the runbook's fix-values step asks of a person, as one does it: the
// collector configuration of each sample it names (its YAML text) read at the step's version
// and changed there so that it converts (the empty processors list v1beta1 requires in each
// pipeline, as the project's own v1beta1 samples write it), with the real kubectl.
func (h *harness) otelPersonFix(version string) {
	h.t.Helper()
	for _, o := range h.objects {
		if !otelNoProcessors[o.Name] {
			continue
		}
		u, err := h.get(o, version)
		if err != nil {
			h.t.Fatal(err)
		}
		text, _, _ := unstructured.NestedString(u.Object, "spec", "config")
		var cfg map[string]any
		if err := yaml.Unmarshal([]byte(text), &cfg); err != nil {
			h.t.Fatalf("%s: config %q: %v", o, text, err)
		}
		pipelines, _, _ := unstructured.NestedMap(cfg, "service", "pipelines")
		for name, p := range pipelines {
			if pm, ok := p.(map[string]any); ok && pm["processors"] == nil {
				pm["processors"] = []any{}
				pipelines[name] = pm
			}
		}
		_ = unstructured.SetNestedMap(cfg, pipelines, "service", "pipelines")
		b, _ := yaml.Marshal(cfg)
		patch, _ := json.Marshal(map[string]any{"spec": map[string]any{"config": string(b)}})
		if r := h.kubectl("patch", o.Resource+"."+version+"."+o.Group, o.Name, "-n", o.Namespace, "--type=merge", "-p", string(patch)); r.err != nil {
			h.t.Fatalf("%s: the person's fix at %s: %v\n%s", o, version, r.err, r.stderr)
		}
	}
}

// otelChecks checks the end of an upgrade of the release with the values converted: the
// release applied with every value a map, every field outside the consented losses and every
// manager of before kept (plus the person's kubectl-patch), the consented losses held by the
// backup, and server-side apply at v1beta1 working for the applier (plan of the release is the
// verification's, upgrade's and the runbook's).
func (h *harness) otelChecks(label, newDir, backup string, before snapshot, consented map[*tracked][]string) {
	h.t.Helper()
	t := h.t
	for _, v := range h.releaseApplied(newDir) {
		t.Errorf("%s: the release is not applied: %s", label, v)
	}
	now := h.snapshot()
	for _, o := range h.objects {
		b, a := before[o], now[o]
		if cfg, ok := a.Data["v1beta1"]["spec"].(map[string]any)["config"].(map[string]any); !ok || cfg["service"] == nil {
			t.Errorf("%s: %s: spec.config at v1beta1 is not the converted map: %v", label, o, a.Data["v1beta1"]["spec"])
		}
		// What it held at v1alpha1 is kept at v1beta1 but for the consented losses and the
		// converted value (and the status, which the operator writes).
		if lost := lostFields(b.Data["v1alpha1"], a.Data["v1beta1"], append([]string{"spec.config", "status", "metadata.labels"}, consented[o]...)...); len(lost) > 0 {
			t.Errorf("%s: %s: fields lost outside the consented ones %v: %v", label, o, consented[o], lost)
		}
		var bm, am []string
		for _, e := range b.Managers {
			bm = append(bm, e.Manager+"/"+e.Operation+"/"+e.Subresource)
		}
		for _, e := range a.Managers {
			if e.Manager != "kubectl-patch" {
				am = append(am, e.Manager+"/"+e.Operation+"/"+e.Subresource)
			}
			if e.APIVersion != o.Group+"/v1beta1" {
				t.Errorf("%s: %s: manager %s still at %s", label, o, e.Manager, e.APIVersion)
			}
		}
		slices.Sort(bm)
		slices.Sort(am)
		if !slices.Equal(slices.Compact(bm), slices.Compact(am)) {
			t.Errorf("%s: %s: managers %v after, %v before", label, o, am, bm)
		}
	}
	h.otelBackupHolds(label, backup, before, consented)
	for _, o := range h.objects {
		if err := h.otelApplyLabel(o); err != nil {
			t.Errorf("%s: %s: server-side apply at v1beta1 by %s: %v", label, o, h.rel.Applier, err)
		}
	}
}

// otelBackupHolds checks that the backup holds every consented field of every object as it was
// before (read at v1alpha1, the version the backup reads).
func (h *harness) otelBackupHolds(label, file string, before snapshot, consented map[*tracked][]string) {
	h.t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		h.t.Errorf("%s: the backup: %v", label, err)
		return
	}
	// One document per object (upgrade's backup), or one List (kubectl get -o yaml: the
	// runbook's).
	held := map[string]map[string]any{}
	for _, doc := range strings.Split(string(b), "\n---\n") {
		var m map[string]any
		if yaml.Unmarshal([]byte(doc), &m) != nil || m == nil {
			continue
		}
		items, ok := m["items"].([]any)
		if !ok {
			items = []any{m}
		}
		for _, it := range items {
			if im, ok := it.(map[string]any); ok {
				u := &unstructured.Unstructured{Object: im}
				held[u.GetNamespace()+"/"+u.GetName()] = leaves(im)
			}
		}
	}
	n := 0
	for _, o := range h.objects {
		got := held[o.Namespace+"/"+o.Name]
		for p, v := range leaves(before[o].Data["v1alpha1"]) {
			if !underAny(p, consented[o]) {
				continue
			}
			n++
			if gv, ok := got[p]; !ok || fmt.Sprint(gv) != fmt.Sprint(v) {
				h.t.Errorf("%s: the backup %s lacks %s of %s (%v)", label, file, p, o, v)
			}
		}
	}
	if n == 0 {
		h.t.Errorf("%s: no consented field to look for in the backup: the test checks nothing", label)
	}
}

// otelConsented are the fields the preflight says each object loses (the consented losses of
// --allow-data-loss), by object.
func (h *harness) otelConsented(losses []upgrade.ObjectFinding) map[*tracked][]string {
	out := map[*tracked][]string{}
	for _, l := range losses {
		if o := h.find(l.CRD, l.Namespace, l.Name); o != nil {
			out[o] = append(out[o], l.Fields...)
		}
	}
	return out
}

// TestOpenTelemetryFixValues: the OpenTelemetry operator v0.98.0 → v0.99.0, whose new storage
// version v1beta1 types spec.config as an object (YAML text in v1alpha1) and drops fields
// v1alpha1 has (the convert-objects step's consented losses), on kube-apiserver 1.37 and 1.34:
//
//   - upgrade --fix-values --allow-data-loss takes the backup and stops at the step for a
//     person (exit 1: the two samples whose converted value v1beta1 rejects; upgrade status
//     then gives the command that continues, with --fix-values); after the person's change of
//     their text at v1alpha1, the same command ends applied and verified (exit 0), every value
//     converted, the backup holding every consented field, every manager kept;
//   - runbook: plan's runbook followed at a terminal, in its order (the person's step done as
//     a person does it), after every step no manager lost and nothing lost before the step
//     that consents, ends the same way.
//
// The two API servers run at once (each its own CRD); upgrade and runbook one after the other on
// each. (That upgrade without --fix-values refuses before any write, naming it, is
// plugin's TestTypeChangeFromPlanToFix.)
func TestOpenTelemetryFixValues(t *testing.T) {
	for _, minor := range []string{"1.37", "1.34"} {
		t.Run(minor, func(t *testing.T) {
			t.Parallel()
			e := env
			if minor == "1.34" {
				e = olderServer(t)
			}
			t.Run("upgrade", func(t *testing.T) { testOtelUpgradeFixValues(t, e) })
			t.Run("runbook", func(t *testing.T) { testOtelRunbookFixValues(t, e) })
		})
	}
}

func testOtelUpgradeFixValues(t *testing.T, e *testenv.Env) {
	h, newDir := otelSetUp(t, e)
	before, crds := h.snapshot(), h.crdStates()

	work := t.TempDir()
	backup := filepath.Join(work, "backup.yaml")
	args := []string{"upgrade", "-f", newDir, "--yes", "--fix-values", "--allow-data-loss", "--backup", backup, "--checkpoint", filepath.Join(work, "cp.json"), "-o", "json"}
	r := h.crdver(args...)
	var rep upgrade.Report
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Fatalf("upgrade -o json: %v\n%s\n%s", err, r.stdout, r.stderr)
	}
	if r.code != 1 || rep.Outcome.Result != upgrade.ResultNotApplied || !strings.Contains(r.stderr, "then run the same command again") {
		t.Fatalf("upgrade --fix-values: exit %d, outcome %+v, want 1: stopped for a person\n%s", r.code, rep.Outcome, r.stderr)
	}
	h.otelPlanned(rep.Plan)
	t.Logf("the stop for a person (exit %d):\n%s", r.code, tail(r.stderr, 6))
	for _, name := range []string{"otel", "opentelemetrycollector-as-sidecar"} {
		mustContainE2E(t, "the stop for a person", r.stderr, name)
	}
	if _, err := os.Stat(backup); err != nil {
		t.Errorf("the run stopped for a person before taking the backup: %v", err)
	}
	// Nothing was written to the cluster before the person's step (the backup is a file).
	for _, w := range wroteNothing(crds, h.crdStates(), before, h.snapshot()) {
		t.Errorf("the run stopped for a person after writing: %s", w)
	}
	consented := h.otelConsented(rep.Preflight.DataLoss)
	if len(consented) != len(h.objects) {
		t.Errorf("consented losses for %d objects, want every sample: %+v", len(consented), rep.Preflight.DataLoss)
	}

	// Coming back later: upgrade status gives the command that continues, --fix-values in it.
	st := h.crdver("upgrade", "status", "-f", newDir, "--checkpoint", filepath.Join(work, "cp.json"))
	if !strings.Contains(st.stdout, "--fix-values --backup "+backup) {
		t.Errorf("upgrade status after the stop for a person (exit %d): no command with --fix-values\n%s%s", st.code, st.stdout, st.stderr)
	}

	h.otelPersonFix("v1alpha1")
	r = h.crdver(args...)
	rep = upgrade.Report{}
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Fatalf("upgrade -o json: %v\n%s\n%s", err, r.stdout, r.stderr)
	}
	if r.code != 0 || !rep.Outcome.Applied || !rep.Outcome.Verified || rep.Backup == nil || !rep.Backup.Reused {
		t.Fatalf("upgrade --fix-values after the person's fix: exit %d, outcome %+v, backup %+v\n%s", r.code, rep.Outcome, rep.Backup, r.stderr)
	}
	fixed := 0
	for _, fx := range rep.FixedValues {
		for _, f := range fx.Fixed {
			fixed++
			if len(f.LostManagers) > 0 {
				t.Errorf("%s: lost managers %v", f.Name, f.LostManagers)
			}
		}
	}
	if fixed != len(h.objects) {
		t.Errorf("%d objects' values converted, want %d: %+v", fixed, len(h.objects), rep.FixedValues)
	}
	h.otelChecks("upgrade", newDir, backup, before, consented)
}

func testOtelRunbookFixValues(t *testing.T, e *testenv.Env) {
	h, newDir := otelSetUp(t, e)
	rep := h.otelPlan(newDir)
	initial := h.snapshot()
	work := t.TempDir()
	consented := map[*tracked][]string{}
	for _, f := range rep.Items[0].Objects.Findings {
		if o := h.find(rep.Items[0].CRD, f.Namespace, f.Name); o != nil {
			consented[o] = append(consented[o], f.PrunedOnRead...)
		}
	}
	baseline := initial
	for i, ps := range runbookSteps(rep) {
		switch {
		case ps.Manual && ps.Action == plan.ActionConvertObjects:
			t.Logf("step %d (for a person: the loss accepted): %v", i+1, ps.Objects)
			continue
		case ps.Manual && ps.Action == plan.ActionFixValues:
			h.otelPersonFix(rep.Runbook[2].Version)
			t.Logf("step %d (for a person, done): %v", i+1, ps.Objects)
			// The person's change is the new baseline of the values; the managers must stay.
			now := h.snapshot()
			for o, b := range baseline {
				if lost := lostManagers(b.Managers, now[o].Managers); len(lost) > 0 {
					t.Errorf("the person's step at v1alpha1 lost managers of %s: %v", o, lost)
				}
			}
			baseline = now
			continue
		case ps.Manual:
			t.Fatalf("step %d is for a person: %s %s", i+1, ps.Action, ps.Why)
		}
		res := h.runStep(work, ps.Command)
		t.Logf("step %d: %s → exit %d\n%s%s", i+1, ps.Command, res.Code, tail(res.Stdout, 8), tail(res.Stderr, 8))
		if res.Code != 0 {
			t.Fatalf("step %d failed: %s", i+1, ps.Command)
		}
		// No manager lost after any step, no field lost before the step that consents to the
		// loss (the rewrite with --allow-data-loss, which converts the values too); what it
		// leaves is the new baseline.
		allowLoss := strings.Contains(ps.Command, "--allow-data-loss")
		now := h.snapshot()
		for _, v := range h.releaseInvariants(baseline, now, map[string]string{otelCRD: "v1alpha1"}, allowLoss) {
			t.Errorf("after step %d (%s): %s", i+1, ps.Command, v)
		}
		if allowLoss {
			baseline = now
		}
	}
	h.otelChecks("runbook", newDir, filepath.Join(work, "crdver-backup.yaml"), initial, consented)
}

func mustContainE2E(t *testing.T, what, got string, wants ...string) {
	t.Helper()
	for _, w := range wants {
		if !strings.Contains(got, w) {
			t.Errorf("%s: no %q in:\n%s", what, w, got)
		}
	}
}
