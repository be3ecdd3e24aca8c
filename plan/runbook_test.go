package plan

import (
	"context"
	"slices"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
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
	it := planRemovingFirst(t, live)
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
	live.Annotations = map[string]string{"meta.helm.sh/release-name": "widgets", "meta.helm.sh/release-namespace": "apps"}
	it := planRemovingFirst(t, live)
	steps := runbookOf(t, it)
	if got := actionsOf(steps); !slices.Equal(got, []string{ActionBackup, ActionRetire, ActionToolApply, ActionVerify}) {
		t.Fatalf("actions %v", got)
	}
	if c := steps[1].Commands[0]; strings.Contains(c, "--remove") {
		t.Errorf("retire removes the version of a Helm-managed CRD: %q", c)
	}
	if s := steps[2]; len(s.Commands) != 0 || !s.Manual || !strings.Contains(s.Why, `let Helm (release "widgets" in namespace "apps", annotations meta.helm.sh/release-name, meta.helm.sh/release-namespace) apply`) {
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

// Objects that lose fields (a data-loss finding): every retire command of the CRD carries the
// consent --allow-data-loss, after the backup step, and says what it drops, that the backup
// keeps it and that restore puts it back; without a backup, no command carries the consent.
func TestRunbookDataLossConsent(t *testing.T) {
	live := twoVersions(t, true)
	it := planRemovingFirst(t, live)
	clean := runbookOf(t, it)
	for _, s := range clean {
		for _, c := range s.Commands {
			if strings.Contains(c, "--allow-data-loss") {
				t.Errorf("no loss, yet step %s says %q", s.Action, c)
			}
		}
	}
	it.Objects.Total = 1
	it.Objects.Findings = []Finding{{Namespace: "default", Name: "legacy", PrunedOnRead: []string{"spec.legacy"}}}
	steps := runbookOf(t, it)
	if got := actionsOf(steps); !slices.Equal(got, []string{ActionConvertObjects, ActionBackup, ActionRetire, ActionApply, ActionVerify}) {
		t.Fatalf("actions %v", got)
	}
	if c := steps[2].Commands; len(c) != 1 || c[0] != "kubectl crdver retire widgets.plan.example.com v1beta1 --to v1 --remove --allow-data-loss" {
		t.Errorf("retire step: %q", c)
	}
	for _, w := range []string{"--allow-data-loss is your consent", "the backup step above keeps them", "kubectl crdver restore -f crdver-backup.yaml"} {
		if !strings.Contains(steps[2].Why, w) {
			t.Errorf("retire step's text lacks %q: %s", w, steps[2].Why)
		}
	}
	if !strings.Contains(steps[0].Why, "the storage steps below say --allow-data-loss") {
		t.Errorf("convert-objects step does not point to the consent: %s", steps[0].Why)
	}
	if !strings.Contains(strings.Join(itemSteps(steps), "\n"), "# "+steps[2].Why) {
		t.Errorf("the per-CRD steps do not say what the consent drops: %q", itemSteps(steps))
	}
	if d := DecisionFor(KindDataLoss); d.Consent != OverrideAllowDataLoss {
		t.Errorf("decision table: data-loss consent %q", d.Consent)
	}

	// No backup (nothing to read at every stored version): no consent.
	it.Objects.Total = 0
	for _, s := range runbookOf(t, it) {
		if s.Action == ActionBackup {
			t.Errorf("backup step without objects")
		}
		for _, c := range s.Commands {
			if strings.Contains(c, "--allow-data-loss") {
				t.Errorf("no backup, yet step %s says %q", s.Action, c)
			}
		}
	}
}

// Data that sits at a stored version the plan cannot read as stored (the live CRD converts
// through a webhook): the storage commands carry the consent, naming that version.
func TestRunbookUnreadStoredConsent(t *testing.T) {
	live := twoVersions(t, true)
	it := planRemovingFirst(t, live)
	it.live = it.live.DeepCopy()
	it.live.Spec.Conversion = &apiextensionsv1.CustomResourceConversion{Strategy: apiextensionsv1.WebhookConverter}
	steps := runbookOf(t, it)
	i := slices.IndexFunc(steps, func(s RunbookStep) bool { return s.Action == ActionRetire })
	b := slices.IndexFunc(steps, func(s RunbookStep) bool { return s.Action == ActionBackup })
	if i < 0 || b < 0 || b > i {
		t.Fatalf("actions %v", actionsOf(steps))
	}
	if c := steps[i].Commands; len(c) != 1 || !strings.HasSuffix(c[0], " --allow-data-loss") {
		t.Errorf("retire step: %q", c)
	}
	if !strings.Contains(steps[i].Why, "encoded at v1beta1") {
		t.Errorf("retire step's text does not name the unread version: %s", steps[i].Why)
	}
}
