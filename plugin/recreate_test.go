package plugin

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/yaml"

	"github.com/crdver/kubectl-crdver/internal/testcrd"
	"github.com/crdver/kubectl-crdver/plan"
	"github.com/crdver/kubectl-crdver/preview"
	"github.com/crdver/kubectl-crdver/upgrade"
)

// sourceSchema is a Flux-like Source: spec.interval and spec.url. strict adds what a later
// release added: a duration pattern on interval and url required.
func sourceSchema(strict bool) *apiextensionsv1.CustomResourceValidation {
	interval := apiextensionsv1.JSONSchemaProps{Type: "string"}
	spec := apiextensionsv1.JSONSchemaProps{Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{"url": {Type: "string"}}}
	if strict {
		interval.Pattern = `^([0-9]+(\.[0-9]+)?(ms|s|m|h))+$`
		spec.Required = []string{"url"}
	}
	spec.Properties["interval"] = interval
	return &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{"spec": spec}}}
}

// apiErrorTexts renders an API error's causes the way plan renders preview's errors
// ("field: message"), sorted.
func apiErrorTexts(err error) []string {
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
	out := preview.ErrorTexts(pe)
	sort.Strings(out)
	return out
}

// TestInvalidOnRecreateFromPlanToVerify: objects written under a looser schema (interval "m"
// before the duration pattern, no url before url became required) are accepted by every write
// of the upgrade (the API server ratchets unchanged fields) but rejected on re-create. One
// verdict all the way: plan says invalid-on-recreate (exit 1, not breaking) with the API
// server's exact errors and a runbook step for a person; upgrade --yes lists them before the
// first write, applies and verifies the release (CRDs equal to the release, storedVersions
// trimmed) and ends with exit 1 and a last line saying the release is applied; once a user has
// fixed the objects, plan is clean and the runbook's verify step passes.
func TestInvalidOnRecreateFromPlanToVerify(t *testing.T) {
	isolateCache(t)
	ctx := context.Background()
	group := "recreate.upgrade.example.com"
	// Live: v1beta1 storage, v1 served, both loose. The release: v1 storage and v1beta1 served,
	// both strict: a storage migration, nothing removed.
	old := testcrd.New(group, "Source", testcrd.Version("v1beta1", true, true, sourceSchema(false)), testcrd.Version("v1", true, false, sourceSchema(false)))
	next := testcrd.New(group, "Source", testcrd.Version("v1beta1", true, false, sourceSchema(true)), testcrd.Version("v1", true, true, sourceSchema(true)))
	if _, err := env.CreateCRD(ctx, old.DeepCopy()); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	b, err := yaml.Marshal(next)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "sources.yaml"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	dyn, err := dynamic.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	crds, err := apiextensionsclient.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	beta := dyn.Resource(schema.GroupVersionResource{Group: group, Version: "v1beta1", Resource: "sources"}).Namespace("default")
	v1 := dyn.Resource(schema.GroupVersionResource{Group: group, Version: "v1", Resource: "sources"}).Namespace("default")
	objects := map[string]map[string]any{
		"bad-interval": {"interval": "m", "url": "https://example.com/a"},
		"no-url":       {"interval": "1m"},
		"good":         {"interval": "5m", "url": "https://example.com/b"},
	}
	for name, spec := range objects {
		u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": group + "/v1beta1", "kind": "Source",
			"metadata": map[string]any{"name": name, "namespace": "default"}, "spec": spec}}
		if _, err := beta.Create(ctx, u, metav1.CreateOptions{FieldManager: "kubectl-create"}); err != nil {
			t.Fatal(err)
		}
	}
	invalid := []string{"bad-interval", "no-url"}
	kc := tempKubeconfig(t)

	// 1. plan: its own verdict, exit 1, not breaking.
	res := run(t, "", "plan", "-f", dir, "--kubeconfig", kc, "-o", "json")
	if res.code != 1 {
		t.Fatalf("plan: exit %d, want 1\n%s\n%s", res.code, res.stdout, res.stderr)
	}
	var before plan.Report
	if err := json.Unmarshal([]byte(res.stdout), &before); err != nil {
		t.Fatal(err)
	}
	it := before.Items[0]
	if it.Verdict != plan.VerdictInvalidOnRecreate || it.Breaking || before.Summary.Verdict != plan.VerdictInvalidOnRecreate || before.Summary.ExitCode != 1 ||
		len(it.BreakingReasons)+len(it.UnknownReasons) != 0 || len(it.InvalidOnRecreateReasons) != 1 || !slices.Contains(it.Kinds, plan.KindInvalidOnRecreate) {
		t.Fatalf("plan: verdict %q breaking %v kinds %v summary %+v reasons %q %q %q", it.Verdict, it.Breaking, it.Kinds, before.Summary, it.BreakingReasons, it.UnknownReasons, it.InvalidOnRecreateReasons)
	}
	mustContain(t, "plan's last line", res.stderr, "invalid on re-create", "sources."+group)
	if strings.Contains(res.stderr, "would break") {
		t.Errorf("plan calls objects invalid on re-create breaking: %s", res.stderr)
	}
	predicted := map[string][]string{}
	for _, f := range it.Objects.Findings {
		if len(f.UpdateErrors) > 0 || len(f.PrunedOnRead) > 0 {
			t.Errorf("%s: plan predicts a rejected write or a loss: %+v", f.Name, f)
		}
		if slices.Equal(f.Kinds, []plan.Kind{plan.KindInvalidOnRecreate}) {
			predicted[f.Name] = sorted(f.CreateErrors)
		}
	}
	if got := sortedKeys(predicted); !slices.Equal(got, invalid) {
		t.Fatalf("plan finds %v invalid on re-create, want %v", got, invalid)
	}

	// The runbook: one step for a person naming each object with its errors and the commands
	// to look at and edit it; the verify step last.
	var fix, verify *plan.RunbookStep
	for i, s := range before.Runbook {
		switch s.Action {
		case plan.ActionFixRecreate:
			fix = &before.Runbook[i]
		case plan.ActionVerify:
			verify = &before.Runbook[i]
		}
	}
	if fix == nil || verify == nil || !fix.Manual || fix.Phase != plan.PhaseFix || fix.Target != "v1" {
		t.Fatalf("runbook: fix step %+v, verify step %+v", fix, verify)
	}
	mustContain(t, "the fix step", fix.Why, "before or after the apply", "re-creat")
	for _, n := range invalid {
		line := ""
		for _, o := range fix.Objects {
			if strings.HasPrefix(o, "default/"+n+": ") {
				line = o
			}
		}
		for _, e := range predicted[n] {
			if !strings.Contains(line, e) {
				t.Errorf("the fix step's line for %s lacks the error %q: %q", n, e, line)
			}
		}
		for _, c := range []string{"kubectl get sources.v1." + group + " " + n + " -n default -o yaml", "kubectl edit sources.v1." + group + " " + n + " -n default"} {
			if !slices.Contains(fix.Commands, c) {
				t.Errorf("the fix step lacks %q: %q", c, fix.Commands)
			}
		}
	}
	human := run(t, "", "plan", "-f", dir, "--kubeconfig", kc)
	t.Logf("plan (exit %d):\n%s%s", human.code, human.stdout, human.stderr)
	mustContain(t, "plan's human output", human.stdout, "sources."+group+" (update): invalid on re-create", "Invalid on re-create", "default/bad-interval: ")

	// --dry-run says what the run would end with: the release applied, the objects left.
	res = runCluster(t, "upgrade", "-f", dir, "--dry-run")
	if res.code != 1 || !strings.Contains(res.stderr, "the upgrade would apply the release and leave 2 objects invalid on re-create") {
		t.Errorf("upgrade --dry-run: exit %d\n%s", res.code, res.stderr)
	}

	// 2. upgrade --yes: lists the objects before the first write, applies and verifies the
	// release, ends with exit 1 and says the release is applied.
	backup := filepath.Join(t.TempDir(), "backup.yaml")
	res = runCluster(t, "upgrade", "-f", dir, "--yes", "--backup", backup)
	if res.code != 1 {
		t.Fatalf("upgrade: exit %d, want 1\n%s\n%s", res.code, res.stdout, res.stderr)
	}
	out := res.stdout
	t.Logf("upgrade --yes (exit %d):\n%s%s", res.code, out, res.stderr)
	pre, runbook := strings.Index(out, "Invalid on re-create:"), strings.Index(out, "Runbook (the whole release")
	if pre < 0 || runbook < 0 || pre > runbook {
		t.Errorf("upgrade does not list the objects before the runbook it carries out:\n%s", out)
	}
	mustContain(t, "upgrade's output", out, "default/bad-interval", "default/no-url", "fix-invalid-on-recreate", "Release applied and verified. Left for you: 2 objects invalid on re-create")
	lines := strings.Split(strings.TrimSpace(res.stderr), "\n")
	last := lines[len(lines)-1]
	if !strings.HasPrefix(last, "error: the release is applied and verified; left for you: 2 objects invalid on re-create") || !strings.Contains(last, "kubectl crdver plan -f "+dir) {
		t.Errorf("upgrade's last line: %q", last)
	}
	if strings.Contains(res.stderr, "not complete") {
		t.Errorf("upgrade calls itself not complete for objects it reported before writing:\n%s", res.stderr)
	}
	crd, err := crds.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, next.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(crd.Status.StoredVersions, []string{"v1"}) {
		t.Errorf("storedVersions %v, want [v1]", crd.Status.StoredVersions)
	}
	if len(crd.Spec.Versions) != len(next.Spec.Versions) {
		t.Fatalf("versions %+v", crd.Spec.Versions)
	}
	for _, want := range next.Spec.Versions {
		i := slices.IndexFunc(crd.Spec.Versions, func(v apiextensionsv1.CustomResourceDefinitionVersion) bool { return v.Name == want.Name })
		if i < 0 {
			t.Fatalf("%s missing after the upgrade", want.Name)
		}
		got := crd.Spec.Versions[i]
		if got.Served != want.Served || got.Storage != want.Storage || !equality.Semantic.DeepEqual(got.Schema, want.Schema) {
			t.Errorf("%s after the upgrade: served %v storage %v schema equal %v", want.Name, got.Served, got.Storage, equality.Semantic.DeepEqual(got.Schema, want.Schema))
		}
	}

	// The server's own answer: a dry-run create of each object as listed is rejected with
	// exactly the errors plan predicted; the valid one is only refused for existing.
	for name := range objects {
		u, err := v1.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		c := &unstructured.Unstructured{Object: map[string]any{"apiVersion": u.GetAPIVersion(), "kind": "Source",
			"metadata": map[string]any{"name": name + "-copy", "namespace": "default"}, "spec": u.Object["spec"]}}
		_, err = v1.Create(ctx, c, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}, FieldValidation: "Strict"})
		want := predicted[name]
		switch {
		case len(want) == 0 && err != nil:
			t.Errorf("%s: the server rejects a re-create plan did not predict: %v", name, err)
		case len(want) > 0 && err == nil:
			t.Errorf("%s: the server accepts the re-create plan said is rejected (%q)", name, want)
		case len(want) > 0:
			if got := apiErrorTexts(err); !slices.Equal(got, want) {
				t.Errorf("%s: the server says %q, plan said %q", name, got, want)
			}
		}
	}

	// Run again, -o json: the same outcome, from the decision table.
	res = runCluster(t, "upgrade", "-f", dir, "--yes", "--backup", filepath.Join(t.TempDir(), "b2.yaml"), "-o", "json")
	var rep upgrade.Report
	if err := json.Unmarshal([]byte(res.stdout), &rep); err != nil {
		t.Fatalf("upgrade -o json (exit %d): %v\n%s\n%s", res.code, err, res.stdout, res.stderr)
	}
	o := rep.Outcome
	if res.code != 1 || o.Result != upgrade.ResultAppliedRemaining || !o.Applied || !o.Verified || o.ExitCode != 1 || len(o.Remaining) != 1 ||
		len(rep.Problems) != 0 || rep.Verify == nil || len(rep.Verify.InvalidOnRecreate) != 2 || len(rep.Preflight.InvalidOnRecreate) != 2 {
		t.Errorf("second run: exit %d, outcome %+v, problems %q, verify %+v", res.code, o, rep.Problems, rep.Verify)
	}
	for _, f := range rep.Verify.InvalidOnRecreate {
		if !f.ReportedInPreflight || !slices.Equal(sorted(f.Errors), predicted[f.Name]) {
			t.Errorf("verify: %+v, plan said %q", f, predicted[f.Name])
		}
	}

	// 3. The user fixes the objects (real updates); plan is clean and the runbook's verify step
	// passes.
	fixes := map[string][2]string{"bad-interval": {"interval", "1m"}, "no-url": {"url", "https://example.com/c"}}
	for name, f := range fixes {
		u, err := v1.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if err := unstructured.SetNestedField(u.Object, f[1], "spec", f[0]); err != nil {
			t.Fatal(err)
		}
		if _, err := v1.Update(ctx, u, metav1.UpdateOptions{FieldManager: "kubectl-edit"}); err != nil {
			t.Fatalf("fixing %s: %v", name, err)
		}
	}
	if res := run(t, "", "plan", "-f", dir, "--kubeconfig", kc); res.code != 0 {
		t.Errorf("plan after the fixes: exit %d\n%s\n%s", res.code, res.stdout, res.stderr)
	}
	work := t.TempDir()
	for _, c := range verify.Commands {
		runStep(t, work, kc, strings.ReplaceAll(c, "NEW-CRDS.yaml", dir), len(before.Runbook))
	}
	res = runCluster(t, "upgrade", "-f", dir, "--yes", "--backup", filepath.Join(t.TempDir(), "b3.yaml"))
	if res.code != 0 {
		t.Errorf("upgrade after the fixes: exit %d\n%s\n%s", res.code, res.stdout, res.stderr)
	}
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func sorted(s []string) []string {
	out := append([]string{}, s...)
	sort.Strings(out)
	return out
}
