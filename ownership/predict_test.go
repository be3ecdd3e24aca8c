package ownership

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/crdver/kubectl-crdver/kubeversion"
)

// TestPredictRewrite: what a rewrite at v2 does to managedFields, by the entries it leaves and
// what the field manager makes of their versions; nothing on a server that keeps the live
// entries of a failed update, and unknown where the answer is not known offline.
func TestPredictRewrite(t *testing.T) {
	const g = "example.com"
	entry := func(m, v, fields string) metav1.ManagedFieldsEntry {
		return metav1.ManagedFieldsEntry{Manager: m, Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: g + "/" + v, FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte(fields)}}
	}
	target := map[string]any{"spec": map[string]any{"a": "1"}}
	movable := entry("gitops", "v1", `{"f:spec":{"f:a":{}}}`)
	stale := entry("gitops", "v1", `{"f:spec":{"f:gone":{}}}`) // needs a read at v1 to move
	current := entry("editor", "v2", `{"f:spec":{"f:a":{}}}`)
	noRead := func(string) (map[string]any, bool) { return nil, false }
	fails := func(why string, known bool) func(string) (string, bool) {
		return func(string) (string, bool) { return why, known }
	}
	for _, c := range []struct {
		name     string
		entries  []metav1.ManagedFieldsEntry
		fails    func(string) (string, bool)
		dropsAll bool
		lost     int
		unknown  bool
	}{
		{"moved", []metav1.ManagedFieldsEntry{movable, current}, fails("no such version", true), true, 0, false},
		{"left, does not convert", []metav1.ManagedFieldsEntry{stale, current}, fails("no such version", true), true, 2, false},
		{"left, converts", []metav1.ManagedFieldsEntry{stale, current}, fails("", true), true, 0, false},
		{"left, webhook", []metav1.ManagedFieldsEntry{stale, current}, fails("needs the webhook", false), true, 0, true},
		{"left, 1.37 keeps them", []metav1.ManagedFieldsEntry{stale, current}, fails("no such version", true), false, 0, false},
		{"none of another version", []metav1.ManagedFieldsEntry{current}, fails("no such version", true), true, 0, false},
	} {
		r := PredictRewrite(c.entries, g, "v2", target, noRead, c.fails, c.dropsAll)
		if len(r.Lost) != c.lost || (r.Unknown != "") != c.unknown || (c.lost > 0) != (r.Because != "") {
			t.Errorf("%s: %+v", c.name, r)
		}
	}
	if !FailedUpdateDropsAll(kubeversion.Version{Major: 1, Minor: 36}) || FailedUpdateDropsAll(kubeversion.Version{Major: 1, Minor: 37}) || FailedUpdateDropsAll(kubeversion.Version{}) {
		t.Errorf("FailedUpdateDropsAll: up to 1.36 (and not for the newest, the zero version)")
	}
}
