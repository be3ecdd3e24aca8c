package plan

import (
	"context"
	"slices"
	"strings"
	"testing"
)

// A version stored but no longer served (cert-manager 1.6's v1alpha2): the runbook serves it
// again before the backup, so the backup reads the objects as stored, and says how.
func TestRunbookServesStoredUnservedVersion(t *testing.T) {
	live := twoVersions(t, true)
	live.Spec.Versions[0].Served, live.Spec.Versions[0].Storage, live.Spec.Versions[1].Storage = false, false, true
	live.Status.StoredVersions = []string{"v1beta1", "v1"}
	next := live.DeepCopy()
	next.Spec.Versions = next.Spec.Versions[1:]
	next.Status.StoredVersions = nil
	it, err := Plan(context.Background(), live, next, nil, Options{})
	if err != nil {
		t.Fatal(err)
	}
	steps := runbookOf(t, it)
	got := actionsOf(steps)
	i, b := slices.Index(got, ActionServeStored), slices.Index(got, ActionBackup)
	if i < 0 || b < 0 || i > b {
		t.Fatalf("actions %v: want serve-stored before backup", got)
	}
	want := `kubectl patch crd widgets.plan.example.com --type=json -p '[{"op":"test","path":"/spec/versions/0/name","value":"v1beta1"},{"op":"replace","path":"/spec/versions/0/served","value":true}]'`
	if c := steps[i].Commands; len(c) != 1 || c[0] != want {
		t.Errorf("serve-stored commands %q, want %q", c, want)
	}
	if r := steps[b].Resources; !slices.Contains(r, "widgets.v1beta1.plan.example.com") {
		t.Errorf("backup resources %v lack the stored version v1beta1", r)
	}
	if strings.Contains(steps[b].Why, "not served") {
		t.Errorf("backup says a version is unreadable though the runbook serves it: %s", steps[b].Why)
	}

	// No objects: nothing to read, nothing served.
	it.Objects.Total = 0
	if got := actionsOf(runbookOf(t, it)); slices.Contains(got, ActionServeStored) {
		t.Errorf("actions %v: serve-stored without objects", got)
	}
}
