package plan

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// TestPlanTypeMismatchOffline: a release whose new storage version types three fields
// differently (string → object, scalar → list, integer → string) over objects written at v1:
// each object holding a changed field is a type-mismatch finding naming each field, the value's
// type and the expected one; the CRD is breaking; the runbook converts the values of the object
// whose values all convert in its rewrite (migrate --fix-values, after the backup and the
// intermediate CRD), and gives the one whose value does not convert to a person after the
// backup, at v1 (get/edit commands).
func TestPlanTypeMismatchOffline(t *testing.T) {
	dir := filepath.Join("..", "testdata", "typechange")
	live := readCRD(t, filepath.Join(dir, "live.yaml"))
	next := readCRD(t, filepath.Join(dir, "new.yaml"))
	objs := readObjects(t, filepath.Join(dir, "objects.yaml"))
	it, err := Plan(context.Background(), live, next, &SliceSource{Objects: objs, PageSize: 2}, Options{Workers: 2, ApplyFile: "new.yaml"})
	if err != nil {
		t.Fatal(err)
	}
	if it.Verdict != VerdictBreaking || !slices.Contains(it.Kinds, KindTypeMismatch) {
		t.Errorf("verdict %s kinds %v, want breaking with %s", it.Verdict, it.Kinds, KindTypeMismatch)
	}
	if f := findingOf(it, "plain"); f != nil && len(f.TypeMismatches) > 0 {
		t.Errorf("plain: %+v", f.TypeMismatches)
	}
	f := findingOf(it, "text-config")
	if f == nil {
		t.Fatal("text-config: no finding")
	}
	var got []string
	for _, m := range f.TypeMismatches {
		got = append(got, m.Path+" "+m.ValueType+"→"+m.Expected+" "+m.Converted)
	}
	want := []string{`.spec.config string→map {"partitions":3,"retention":"7d"}`, `.spec.hosts string→list ["broker-0.example.com"]`, `.spec.port integer→string "9092"`}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("text-config mismatches (-want +got):\n%s", d)
	}
	if !slices.Contains(f.Kinds, KindTypeMismatch) || len(f.TypeRecreateErrors) != 3 {
		t.Errorf("text-config kinds %v, re-create errors as read %q", f.Kinds, f.TypeRecreateErrors)
	}
	// The runbook, in order: the backup; the step for a person (opaque's text spells no map:
	// changed at v1, which keeps every field and manager); the intermediate CRD (the live one
	// lacks v2); the rewrite with --fix-values, which converts text-config's values first;
	// the apply; verify.
	steps := Runbook([]Item{*it}, RunbookOptions{ApplyFile: "new.yaml"})
	var actions []string
	for _, s := range steps {
		actions = append(actions, s.Action)
	}
	if d := cmp.Diff([]string{ActionBackup, ActionFixValues, ActionIntermediate, ActionMigrate, ActionApply, ActionVerify}, actions); d != "" {
		t.Fatalf("runbook actions (-want +got):\n%s", d)
	}
	person, migrate := steps[1], steps[3]
	wantCmds := []string{
		`kubectl get brokers.v1.typechange.example.com opaque -n default -o yaml`,
		`kubectl edit brokers.v1.typechange.example.com opaque -n default`,
	}
	if d := cmp.Diff(wantCmds, person.Commands); d != "" {
		t.Errorf("fix-values commands (-want +got):\n%s", d)
	}
	if !person.Manual || person.Version != "v1" || person.Target != "v2" || len(person.Objects) != 1 || !strings.Contains(person.Objects[0], "opaque: .spec.config is string, v2 expects map (no lossless conversion)") {
		t.Errorf("fix-values step: %+v", person)
	}
	if d := cmp.Diff([]string{"kubectl crdver migrate brokers.typechange.example.com --fix-values"}, migrate.Commands); d != "" || !migrate.FixValues || migrate.Manual {
		t.Errorf("migrate step: %+v %s", migrate, d)
	}
	wantObjs := []string{
		`default/text-config: .spec.config is string, v2 expects map → {"partitions":3,"retention":"7d"}; .spec.hosts is string, v2 expects list → ["broker-0.example.com"]; .spec.port is integer, v2 expects string → "9092"`,
		`default/opaque: .spec.config is string, v2 expects map; converted once you have changed it (the fix-values step above)`,
	}
	if d := cmp.Diff(wantObjs, migrate.Objects); d != "" {
		t.Errorf("migrate step's objects (-want +got):\n%s", d)
	}
}

// TestTypeMismatchRunbookPlacement: where the runbook converts the values of a type change,
// besides after the intermediate CRD (TestPlanTypeMismatchOffline):
//
//   - the live CRD already stores at v2, whose live schema still types the values as text
//     (status.storedVersions [v2]: nothing to migrate): after the apply, which brings the new
//     schema, with the rewrite that converts them (migrate --fix-values);
//   - the release removes v1, which is still stored: before the retire steps (which have no
//     --fix-values), a rewrite that converts them.
//
// In both the step for a person (opaque) comes after the backup, and nothing before the
// backup writes.
func TestTypeMismatchRunbookPlacement(t *testing.T) {
	dir := filepath.Join("..", "testdata", "typechange")
	next := readCRD(t, filepath.Join(dir, "new.yaml"))
	objs := readObjects(t, filepath.Join(dir, "objects.yaml"))
	actions := func(steps []RunbookStep) ([]string, *RunbookStep) {
		var out []string
		var fix *RunbookStep
		for i, s := range steps {
			out = append(out, s.Action)
			if s.FixValues {
				fix = &steps[i]
			}
		}
		return out, fix
	}

	// v2 stored and served with v1's schema (text); the release types it anew.
	live := next.DeepCopy()
	live.Spec.Versions[1].Schema = live.Spec.Versions[0].Schema.DeepCopy()
	live.Status.StoredVersions = []string{"v2"}
	atV2 := make([]unstructured.Unstructured, len(objs))
	for i := range objs {
		atV2[i] = *objs[i].DeepCopy()
		atV2[i].SetAPIVersion("typechange.example.com/v2")
	}
	it, err := Plan(context.Background(), live, next, &SliceSource{Objects: atV2, PageSize: 2}, Options{Workers: 2, ApplyFile: "new.yaml"})
	if err != nil {
		t.Fatal(err)
	}
	got, fix := actions(Runbook([]Item{*it}, RunbookOptions{ApplyFile: "new.yaml"}))
	if d := cmp.Diff([]string{ActionBackup, ActionFixValues, ActionApply, ActionMigrate, ActionVerify}, got); d != "" {
		t.Errorf("v2 stored with the old schema: actions (-want +got):\n%s", d)
	}
	if fix == nil || fix.Phase != PhaseApply || !slices.Equal(fix.Commands, []string{"kubectl crdver migrate brokers.typechange.example.com --fix-values"}) {
		t.Errorf("v2 stored with the old schema: the conversion %+v", fix)
	}

	// The release removes v1, in status.storedVersions.
	noV1 := next.DeepCopy()
	noV1.Spec.Versions = noV1.Spec.Versions[1:]
	live = readCRD(t, filepath.Join(dir, "live.yaml"))
	live.Status.StoredVersions = []string{"v1"}
	it, err = Plan(context.Background(), live, noV1, &SliceSource{Objects: objs, PageSize: 2}, Options{Workers: 2, ApplyFile: "new.yaml"})
	if err != nil {
		t.Fatal(err)
	}
	got, fix = actions(Runbook([]Item{*it}, RunbookOptions{ApplyFile: "new.yaml"}))
	if d := cmp.Diff([]string{ActionBackup, ActionFixValues, ActionIntermediate, ActionMigrate, ActionRetire, ActionApply, ActionVerify}, got); d != "" {
		t.Errorf("v1 removed: actions (-want +got):\n%s", d)
	}
	if fix == nil || fix.Phase != PhaseStorage || !slices.Equal(fix.Commands, []string{"kubectl crdver migrate brokers.typechange.example.com --fix-values"}) {
		t.Errorf("v1 removed: the conversion %+v", fix)
	}
}
