package plan

import (
	"context"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// runbookOf plans live → next offline and returns the release runbook of the one item.
func runbookOf(t *testing.T, items ...*Item) []RunbookStep {
	t.Helper()
	var its []Item
	for _, it := range items {
		its = append(its, *it)
	}
	return Runbook(its, RunbookOptions{ApplyFile: "new/"})
}

func actionsOf(steps []RunbookStep) []string {
	var out []string
	for _, s := range steps {
		out = append(out, s.Action)
	}
	return out
}

// A removed stored version: retire (with --remove) before one apply with --force-conflicts.
func TestRunbookRemovedStoredVersion(t *testing.T) {
	live := twoVersions(t, true)
	next := live.DeepCopy()
	next.Spec.Versions = next.Spec.Versions[1:]
	next.Spec.Versions[0].Storage = true
	it, err := Plan(context.Background(), live, next, nil, Options{})
	if err != nil {
		t.Fatal(err)
	}
	steps := runbookOf(t, it, it)
	// Two CRDs of one release (the same item twice stands for two): one apply, one verify.
	if got := actionsOf(steps); !slices.Equal(got, []string{ActionBackup, ActionRetire, ActionRetire, ActionApply, ActionVerify}) {
		t.Fatalf("actions %v", got)
	}
	if c := steps[1].Commands; len(c) != 1 || c[0] != "kubectl crdver retire widgets.plan.example.com v1beta1 --to v1 --remove" {
		t.Errorf("retire step: %q", c)
	}
	if c := steps[0].Commands; len(c) != 1 || !strings.HasPrefix(c[0], "kubectl get widgets.v1beta1.plan.example.com,") {
		t.Errorf("backup step reads at the stored version: %q", c)
	}
	if c := steps[3].Commands; len(c) != 1 || c[0] != "kubectl apply --server-side --force-conflicts -f new/" {
		t.Errorf("apply step: %q", c)
	}
}

// A CRD managed by Helm: no apply of ours (let Helm apply), no --remove (Helm's apply removes).
func TestRunbookToolManaged(t *testing.T) {
	live := twoVersions(t, true)
	live.Labels = map[string]string{"app.kubernetes.io/managed-by": "Helm"}
	live.Annotations = map[string]string{"meta.helm.sh/release-name": "widgets"}
	next := live.DeepCopy()
	next.Spec.Versions = next.Spec.Versions[1:]
	next.Spec.Versions[0].Storage = true
	it, err := Plan(context.Background(), live, next, nil, Options{})
	if err != nil {
		t.Fatal(err)
	}
	steps := runbookOf(t, it)
	if got := actionsOf(steps); !slices.Equal(got, []string{ActionBackup, ActionRetire, ActionToolApply, ActionVerify}) {
		t.Fatalf("actions %v", got)
	}
	if c := steps[1].Commands[0]; strings.Contains(c, "--remove") {
		t.Errorf("retire removes the version of a Helm-managed CRD: %q", c)
	}
	if s := steps[2]; len(s.Commands) != 0 || !s.Manual || !strings.Contains(s.Why, `let Helm (release "widgets") apply`) {
		t.Errorf("tool step: %+v", s)
	}
}

// A CRD the API server would reject for another reason: fix it; nothing is written before.
func TestRunbookBlockedCRD(t *testing.T) {
	live := twoVersions(t, false)
	live.Status.StoredVersions = []string{"v1beta1"}
	next := live.DeepCopy()
	next.Spec.Versions[0].Storage = true
	next.Spec.Versions[1].Storage = true // two storage versions: invalid
	it, err := Plan(context.Background(), live, next, nil, Options{})
	if err != nil {
		t.Fatal(err)
	}
	steps := runbookOf(t, it)
	for _, s := range steps {
		if s.Phase == PhaseStorage || s.Phase == PhaseApply {
			t.Errorf("a step writes although the release cannot be applied: %+v", s)
		}
	}
	if !slices.Contains(actionsOf(steps), ActionFixCRDs) {
		t.Errorf("no fix step: %v", actionsOf(steps))
	}
}

// Objects invalid on re-create where the live CRD does not serve the new storage version yet:
// the fix step's commands use that version and say they are for after the apply.
func TestRunbookInvalidOnRecreateAfterTheApply(t *testing.T) {
	live := readCRD(t, "testdata/widgets-old.yaml")
	next := readCRD(t, "testdata/widgets-stricter.yaml")
	// The live CRD serves v1beta1 only; the release serves v1 only.
	for i := range live.Spec.Versions {
		live.Spec.Versions[i].Name = "v1beta1"
	}
	live.Status.StoredVersions = []string{"v1beta1"}
	objs := readObjects(t, "testdata/widgets-objects.yaml")[:1]
	objs[0].SetAPIVersion("plan.example.com/v1beta1")
	objs[0].SetName("long-owner")
	if err := unstructured.SetNestedField(objs[0].Object, strings.Repeat("o", 70), "spec", "owner"); err != nil {
		t.Fatal(err)
	}
	it, err := Plan(context.Background(), live, next, &SliceSource{Objects: objs}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	steps := runbookOf(t, it)
	i := slices.IndexFunc(steps, func(s RunbookStep) bool { return s.Action == ActionFixRecreate })
	if i < 0 {
		t.Fatalf("no fix step: %v (verdict %q, findings %+v)", actionsOf(steps), it.Verdict, it.Objects.Findings)
	}
	s := steps[i]
	if s.Target != "v1" || !strings.Contains(s.Why, "after the apply (the live CRD does not serve v1 yet)") ||
		!slices.Contains(s.Commands, "kubectl edit widgets.v1.plan.example.com long-owner -n default") {
		t.Errorf("fix step: %+v", s)
	}
}
