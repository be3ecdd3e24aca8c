package plan

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestPlanTypeMismatchOffline: a release whose new storage version types three fields
// differently (string → object, scalar → list, integer → string) over objects written at v1:
// each object holding a changed field is a type-mismatch finding naming each field, the value's
// type and the expected one; the CRD is breaking; the runbook's fix-values step gives a JSON
// patch (test, then replace) for the object whose values all convert, and get/edit commands
// for the one whose value does not.
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
	var step *RunbookStep
	for i, s := range Runbook([]Item{*it}, RunbookOptions{ApplyFile: "new.yaml"}) {
		if s.Action == ActionFixValues {
			step = &[]RunbookStep{s}[0]
			_ = i
		}
	}
	if step == nil {
		t.Fatal("no fix-values step")
	}
	wantCmds := []string{
		`kubectl patch brokers.v2.typechange.example.com text-config -n default --type=json -p '[{"op":"test","path":"/spec/config","value":"retention: 7d\npartitions: 3\n"},{"op":"replace","path":"/spec/config","value":{"partitions":3,"retention":"7d"}},{"op":"test","path":"/spec/hosts","value":"broker-0.example.com"},{"op":"replace","path":"/spec/hosts","value":["broker-0.example.com"]},{"op":"test","path":"/spec/port","value":9092},{"op":"replace","path":"/spec/port","value":"9092"}]'`,
		`kubectl get brokers.v2.typechange.example.com opaque -n default -o yaml`,
		`kubectl edit brokers.v2.typechange.example.com opaque -n default`,
	}
	if d := cmp.Diff(wantCmds, step.Commands); d != "" {
		t.Errorf("fix-values commands (-want +got):\n%s", d)
	}
	if !step.Manual || step.Target != "v2" || len(step.Objects) != 2 || !strings.Contains(step.Objects[1], "opaque: .spec.config is string, v2 expects map (no lossless conversion") {
		t.Errorf("fix-values step: %+v", step)
	}
}
