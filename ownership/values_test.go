package ownership

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"
)

// fieldSet parses a FieldsV1 (as the API server writes it) into a set.
func fieldSet(t *testing.T, raw string) *fieldpath.Set {
	t.Helper()
	s := fieldpath.NewSet()
	if err := s.FromJSON(strings.NewReader(raw)); err != nil {
		t.Fatal(err)
	}
	return s
}

// TestMoveToValuesGivesTheNewPathsToTheOwners: spec.config was YAML text and is now the map it
// spells. The two managers that owned the text (an applier and the creator) own the map's
// paths afterwards, exactly those of the converted object's field set under spec.config; the
// status writer and the label owner are untouched (labels is a map before and after), and so
// is a manager that owns nothing of the object.
func TestMoveToValuesGivesTheNewPathsToTheOwners(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	in := []metav1.ManagedFieldsEntry{
		entry("argocd", metav1.ManagedFieldsOperationApply, gNew, `{"f:metadata":{"f:labels":{"f:app":{}}},"f:spec":{"f:config":{}}}`, now),
		entry("kubectl-create", metav1.ManagedFieldsOperationUpdate, gNew, `{"f:spec":{".":{},"f:config":{},"f:mode":{}}}`, now),
		entry("operator", metav1.ManagedFieldsOperationUpdate, gNew, `{"f:status":{".":{},"f:version":{}}}`, now),
		entry("labeller", metav1.ManagedFieldsOperationUpdate, gNew, `{"f:metadata":{"f:labels":{".":{},"f:team":{}}}}`, now),
	}
	before := obj(t, `{"apiVersion":"stable.example.com/v1","kind":"W","metadata":{"name":"a","labels":{"app":"x","team":"y"}},"spec":{"mode":"m","config":"receivers:\n  otlp: {}\n"},"status":{"version":"1"}}`)
	after := obj(t, `{"apiVersion":"stable.example.com/v1","kind":"W","metadata":{"name":"a","labels":{"app":"x","team":"y"}},"spec":{"mode":"m","config":{"receivers":{"otlp":{}}}},"status":{"version":"1"}}`)
	// The converted object's field set as structured-merge-diff records it (preflight's
	// TypeChecker.FieldSet): an empty map is a leaf.
	fields := fieldSet(t, `{"f:metadata":{"f:labels":{"f:app":{},"f:team":{}}},"f:spec":{"f:mode":{},"f:config":{"f:receivers":{"f:otlp":{}}}},"f:status":{"f:version":{}}}`)
	out, changed, err := MoveToValues(in, before, after, fields)
	if err != nil {
		t.Fatal(err)
	}
	if changed != 2 {
		t.Errorf("%d entries changed, want 2 (argocd, kubectl-create)", changed)
	}
	want := []string{
		`{"f:metadata":{"f:labels":{"f:app":{}}},"f:spec":{"f:config":{"f:receivers":{"f:otlp":{}}}}}`,
		`{"f:spec":{".":{},"f:config":{"f:receivers":{"f:otlp":{}}},"f:mode":{}}}`,
		`{"f:status":{".":{},"f:version":{}}}`,
		`{"f:metadata":{"f:labels":{".":{},"f:team":{}}}}`,
	}
	for i, e := range out {
		if d := cmp.Diff(canonical(t, []byte(want[i])), canonical(t, e.FieldsV1.Raw)); d != "" {
			t.Errorf("%s (-want +got):\n%s", e.Manager, d)
		}
		if e.Manager != in[i].Manager || e.APIVersion != in[i].APIVersion || !e.Time.Equal(in[i].Time) {
			t.Errorf("entry %d: %s %s %v, was %s %s %v", i, e.Manager, e.APIVersion, e.Time, in[i].Manager, in[i].APIVersion, in[i].Time)
		}
	}
	if string(in[0].FieldsV1.Raw) != `{"f:metadata":{"f:labels":{"f:app":{}}},"f:spec":{"f:config":{}}}` {
		t.Errorf("the input was modified: %s", in[0].FieldsV1.Raw)
	}
}

// TestMoveToValuesListToMap: a value that was a list and became a map (its items owned one by
// one) moves whole: no path of the old items is left.
func TestMoveToValuesListToMap(t *testing.T) {
	now := time.Now()
	in := []metav1.ManagedFieldsEntry{entry("m", metav1.ManagedFieldsOperationUpdate, gNew, `{"f:spec":{"f:hosts":{"v:\"a\"":{}}}}`, now)}
	before := obj(t, `{"spec":{"hosts":["a"]}}`)
	after := obj(t, `{"spec":{"hosts":{"a":{}}}}`)
	out, changed, err := MoveToValues(in, before, after, fieldSet(t, `{"f:spec":{"f:hosts":{"f:a":{}}}}`))
	if err != nil || changed != 1 {
		t.Fatalf("changed %d, %v", changed, err)
	}
	if got := canonical(t, out[0].FieldsV1.Raw); got != canonical(t, []byte(`{"f:spec":{"f:hosts":{"f:a":{}}}}`)) {
		t.Errorf("got %s", got)
	}
}

func names(es []metav1.ManagedFieldsEntry) []string {
	var out []string
	for _, e := range es {
		out = append(out, e.Manager+"/"+string(e.Operation)+"@"+e.APIVersion+" "+string(e.FieldsV1.Raw))
	}
	slices.Sort(out)
	return out
}

// TestRestore: what the second write of a value conversion sets, from what the object has
// after the first: nothing (servers before 1.37 drop every entry), the original entries
// (1.37 keeps them), the moved ones (done already: no write), and entries a manager wrote
// in between (kept, with its moved fields added when at the same version).
func TestRestore(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	later := now.Add(time.Minute)
	original := []metav1.ManagedFieldsEntry{
		entry("argocd", metav1.ManagedFieldsOperationApply, gOld, `{"f:spec":{"f:config":{}}}`, now),
		entry("operator", metav1.ManagedFieldsOperationUpdate, gOld, `{"f:status":{"f:version":{}}}`, now),
	}
	moved := []metav1.ManagedFieldsEntry{
		entry("argocd", metav1.ManagedFieldsOperationApply, gNew, `{"f:spec":{"f:config":{"f:a":{}}}}`, now),
		entry("operator", metav1.ManagedFieldsOperationUpdate, gNew, `{"f:status":{"f:version":{}}}`, now),
	}
	operatorSince := entry("operator", metav1.ManagedFieldsOperationUpdate, gNew, `{"f:status":{"f:phase":{}}}`, later)
	for _, c := range []struct {
		name    string
		current []metav1.ManagedFieldsEntry
		want    []metav1.ManagedFieldsEntry
		changed bool
	}{
		{"all dropped", nil, moved, true},
		{"originals kept", original, moved, true},
		{"moved already", moved, moved, false},
		{"written since", []metav1.ManagedFieldsEntry{operatorSince}, []metav1.ManagedFieldsEntry{
			entry("operator", metav1.ManagedFieldsOperationUpdate, gNew, `{"f:status":{"f:phase":{},"f:version":{}}}`, later), moved[0]}, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, changed, err := Restore(c.current, original, moved)
			if err != nil {
				t.Fatal(err)
			}
			if changed != c.changed {
				t.Errorf("changed %v, want %v", changed, c.changed)
			}
			canon := func(es []metav1.ManagedFieldsEntry) []string {
				out := make([]metav1.ManagedFieldsEntry, len(es))
				for i, e := range es {
					out[i] = *e.DeepCopy()
					out[i].FieldsV1 = &metav1.FieldsV1{Raw: []byte(canonical(t, e.FieldsV1.Raw))}
				}
				return names(out)
			}
			if d := cmp.Diff(canon(c.want), canon(got)); d != "" {
				t.Errorf("(-want +got):\n%s", d)
			}
		})
	}
}

// TestToVersionRelabels: entries of other versions of the group move to the target (same
// paths: no read needed); another group's entries stay; an entry that needs the object read
// at its version is left when the read fails.
func TestToVersionRelabels(t *testing.T) {
	now := time.Now()
	in := []metav1.ManagedFieldsEntry{
		entry("a", metav1.ManagedFieldsOperationApply, gOld, `{"f:spec":{"f:size":{}}}`, now),
		entry("b", metav1.ManagedFieldsOperationUpdate, "other.example.com/v1", `{"f:spec":{"f:size":{}}}`, now),
	}
	target := obj(t, `{"spec":{"size":1}}`)
	read := func(string) (map[string]any, bool) {
		t.Error("read although every path exists at the target")
		return nil, false
	}
	out, moved := ToVersion(in, "stable.example.com", "v1", target, read)
	if moved != 1 || out[0].APIVersion != gNew || out[1].APIVersion != "other.example.com/v1" {
		t.Errorf("moved %d: %v", moved, names(out))
	}
	// spec.legacy is not in the object at v1: the entry needs the object read at v1beta1.
	in = []metav1.ManagedFieldsEntry{entry("a", metav1.ManagedFieldsOperationApply, gOld, `{"f:spec":{"f:legacy":{}}}`, now)}
	out, moved = ToVersion(in, "stable.example.com", "v1", target, func(string) (map[string]any, bool) { return nil, false })
	if moved != 0 || out[0].APIVersion != gOld {
		t.Errorf("moved %d without the source: %v", moved, names(out))
	}
}
