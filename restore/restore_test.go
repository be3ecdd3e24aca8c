package restore

import (
	"slices"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// What a restore compares: every top-level field but status, descended through maps, lists
// whole, each label and annotation; never server-set metadata.
func TestLeavesOfCleanedBackup(t *testing.T) {
	b := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "example.com/v1beta1", "kind": "Widget",
		"metadata": map[string]any{
			"name": "w", "namespace": "ns", "uid": "u-1", "resourceVersion": "42", "generation": int64(3),
			"labels": map[string]any{"app.kubernetes.io/name": "demo"}, "annotations": map[string]any{"note": "x"},
			"managedFields": []any{map[string]any{"manager": "gitops"}}, "finalizers": []any{"f"},
		},
		"spec":   map[string]any{"size": int64(3), "legacy": "keep", "ports": []any{int64(80)}, "nested": map[string]any{"a": map[string]any{"b": true}}, "empty": map[string]any{}, "none": nil},
		"data":   "top-level",
		"status": map[string]any{"ready": true},
	}}
	var got []string
	for _, l := range leaves(cleaned(b).Object) {
		got = append(got, l.String())
	}
	want := []string{"data", "metadata.labels.app.kubernetes.io/name", "metadata.annotations.note", "spec.empty", "spec.legacy", "spec.nested.a.b", "spec.ports", "spec.size"}
	if !slices.Equal(got, want) {
		t.Errorf("leaves:\n got %v\nwant %v", got, want)
	}
}

func TestLookupAndSame(t *testing.T) {
	obj := map[string]any{"spec": map[string]any{"size": int64(1), "name": "x"}}
	if v, found, blocked := lookup(obj, []string{"spec", "size"}); !found || blocked || !same(v, float64(1)) {
		t.Errorf("spec.size: %v %v %v", v, found, blocked)
	}
	if _, found, blocked := lookup(obj, []string{"spec", "name", "inner"}); found || !blocked {
		t.Errorf("spec.name.inner: found %v blocked %v, want blocked (a string on the way)", found, blocked)
	}
	if _, found, blocked := lookup(obj, []string{"spec", "legacy"}); found || blocked {
		t.Errorf("spec.legacy: found %v blocked %v, want absent", found, blocked)
	}
	if same([]any{"a", "b"}, []any{"b", "a"}) {
		t.Errorf("lists in another order are not the same value")
	}
	p := map[string]any{}
	set(p, []string{"spec", "legacy"}, "keep")
	set(p, []string{"metadata", "labels", "a.b"}, "c")
	if !same(p, map[string]any{"spec": map[string]any{"legacy": "keep"}, "metadata": map[string]any{"labels": map[string]any{"a.b": "c"}}}) {
		t.Errorf("set: %v", p)
	}
}

// A list whose items lost a field is the backup's list pruned: restored whole, the lost
// fields reported; any other difference is a change since the backup.
func TestPrunedFrom(t *testing.T) {
	backup := []any{map[string]any{"resource": "topic", "operation": "Read"}, map[string]any{"resource": "group", "operation": "Write"}}
	for _, tc := range []struct {
		name    string
		live    any
		ok      bool
		missing []string
	}{
		{"items lost a field", []any{map[string]any{"resource": "topic"}, map[string]any{"resource": "group"}}, true, []string{"spec.acls[0].operation", "spec.acls[1].operation"}},
		{"same", backup, true, nil},
		{"a value changed", []any{map[string]any{"resource": "topic", "operation": "Write"}, map[string]any{"resource": "group"}}, false, nil},
		{"an item more", append(slices.Clone(backup), map[string]any{"resource": "x"}), false, nil},
		{"a field added", []any{map[string]any{"resource": "topic", "operations": []any{"Read"}}, map[string]any{"resource": "group"}}, false, nil},
		{"not a list", "x", false, nil},
	} {
		var missing []string
		ok := prunedFrom(backup, tc.live, "spec.acls", &missing)
		if ok != tc.ok || (ok && !slices.Equal(missing, tc.missing)) {
			t.Errorf("%s: %v %v, want %v %v", tc.name, ok, missing, tc.ok, tc.missing)
		}
	}
}
