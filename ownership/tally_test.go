package ownership

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestTally: entries are counted per version (by name within the group, by apiVersion
// otherwise), per manager, operation and subresource, once per object, with the latest write.
func TestTally(t *testing.T) {
	at := func(day int) *metav1.Time {
		tm := metav1.NewTime(time.Date(2026, 1, day, 0, 0, 0, 0, time.UTC))
		return &tm
	}
	tl := NewTally("example.com")
	tl.Add([]metav1.ManagedFieldsEntry{
		{Manager: "kubectl-create", Operation: "Update", APIVersion: "example.com/v1beta1", Time: at(1)},
		{Manager: "ctrl", Operation: "Update", APIVersion: "example.com/v1", Time: at(3), Subresource: "status"},
	})
	tl.Add([]metav1.ManagedFieldsEntry{
		{Manager: "kubectl-create", Operation: "Update", APIVersion: "example.com/v1beta1", Time: at(2)},
		{Manager: "flux", Operation: "Apply", APIVersion: "example.com/v1beta1", Time: at(5)},
		{Manager: "other", Operation: "Update", APIVersion: "other.io/v1"},
	})
	want := &Census{Objects: 2, Versions: []VersionCount{
		{Version: "other.io/v1", Objects: 1, Managers: []Writer{{Manager: "other", Operation: "Update", Objects: 1}}},
		{Version: "v1", Objects: 1, Managers: []Writer{{Manager: "ctrl", Operation: "Update", Subresource: "status", Objects: 1, LastWrite: at(3)}}},
		{Version: "v1beta1", Objects: 2, Managers: []Writer{
			{Manager: "flux", Operation: "Apply", Objects: 1, LastWrite: at(5)},
			{Manager: "kubectl-create", Operation: "Update", Objects: 2, LastWrite: at(2)},
		}},
	}}
	if d := cmp.Diff(want, tl.Census()); d != "" {
		t.Errorf("census (-want +got):\n%s", d)
	}
	for _, c := range []struct {
		manager, op string
		want        Role
	}{
		{"kubectl", "Apply", RoleApplier}, {"kustomize-controller", "Update", RoleApplier}, {"kubectl-client-side-apply", "Update", RoleApplier},
		{"kubectl-create", "Update", RoleOneTime}, {"kubectl-label", "Update", RoleOneTime}, {"cert-manager", "Update", RoleController},
	} {
		if got := RoleOf(c.manager, c.op); got != c.want {
			t.Errorf("RoleOf(%q, %q) = %q, want %q", c.manager, c.op, got, c.want)
		}
	}
}

// TestTallyOrderWithoutTime: managers whose entries carry no time (an apply's may have none)
// come after those with one, by name, whatever the order the tally met them in: the census is
// the same on every run (the plan's field-manager table and the pages made from it).
func TestTallyOrderWithoutTime(t *testing.T) {
	tm := metav1.NewTime(time.Date(2026, 1, 2, 0, 0, 0, 0, time.UTC))
	entries := []metav1.ManagedFieldsEntry{
		{Manager: "argocd-controller", Operation: "Apply", APIVersion: "example.com/v1"},
		{Manager: "kubectl-create", Operation: "Update", APIVersion: "example.com/v1", Time: &tm},
		{Manager: "flux", Operation: "Apply", APIVersion: "example.com/v1"},
		{Manager: "editor", Operation: "Update", APIVersion: "example.com/v1", Time: &tm},
	}
	want := []string{"editor", "kubectl-create", "argocd-controller", "flux"}
	for i := range 50 { // the tally's map order differs from one tally to the next
		tl := NewTally("example.com")
		tl.Add(append(entries[i%len(entries):], entries[:i%len(entries)]...))
		var got []string
		for _, w := range tl.Census().Versions[0].Managers {
			got = append(got, w.Manager)
		}
		if d := cmp.Diff(want, got); d != "" {
			t.Fatalf("managers in the census (-want +got):\n%s", d)
		}
	}
}
