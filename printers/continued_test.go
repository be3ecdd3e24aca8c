package printers

import (
	"strings"
	"testing"
)

// TestContinuedKeepsWords: a runbook command longer than the line is continued with a
// backslash between words only: the serve-stored step's JSON patch (one quoted word longer
// than a line) stays whole, so the command pasted into a shell is the same command.
func TestContinuedKeepsWords(t *testing.T) {
	patch := `'[{"op":"test","path":"/spec/versions/0/name","value":"v1alpha1"},{"op":"replace","path":"/spec/versions/0/served","value":true}]'`
	cmd := "kubectl patch crd things.refused.unserved.example.com --type=json -p " + patch
	got := continued(cmd, 111, "         ")
	if !strings.Contains(got, patch) {
		t.Errorf("the JSON patch was cut:\n%s", got)
	}
	if joined := strings.Join(strings.Fields(strings.ReplaceAll(got, "\\\n", " ")), " "); joined != cmd {
		t.Errorf("joined back by the shell: %q, want %q", joined, cmd)
	}
}

// TestContinuedKeepsQuotedSpaces: a quoted JSON patch whose values hold spaces (the fix-values
// step's test of a YAML string) is not broken at those spaces.
func TestContinuedKeepsQuotedSpaces(t *testing.T) {
	patch := `'[{"op":"test","path":"/spec/config","value":"retention: 7d\npartitions: 3\n"},{"op":"replace","path":"/spec/config","value":{"partitions":3,"retention":"7d"}}]'`
	cmd := "kubectl patch brokers.v2.typechange.example.com text-config -n default --type=json -p " + patch
	got := continued(cmd, 60, "  ")
	if !strings.Contains(got, patch) {
		t.Errorf("the JSON patch was cut:\n%s", got)
	}
}
