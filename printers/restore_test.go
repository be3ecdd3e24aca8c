package printers

import "testing"

func TestCompactPaths(t *testing.T) {
	got := compactPaths([]string{"spec.acls[0].operation", "spec.acls[1].operation", "spec.legacy", "spec.ports[3].name"})
	if want := "spec.acls[*].operation (2), spec.legacy, spec.ports[3].name"; got != want {
		t.Errorf("compactPaths = %q, want %q", got, want)
	}
}
