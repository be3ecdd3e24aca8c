package plugin

import (
	"strings"
	"testing"

	"k8s.io/cli-runtime/pkg/genericiooptions"
)

// TestHelpGroupsCommands: kubectl crdver --help lists the commands by what they are for, as
// kubectl does, the release upgrade first ("start here"); every command is in a group but
// version, help and completion (cobra's "Additional Commands").
func TestHelpGroupsCommands(t *testing.T) {
	r := run(t, "", "--help")
	if r.code != 0 {
		t.Fatalf("--help: exit %d\n%s", r.code, r.stderr)
	}
	first := strings.Index(r.stdout, "(start here):\n")
	if first < 0 || strings.Index(r.stdout, "\n  plan ") < first {
		t.Fatalf("--help does not begin its commands with the group to start with:\n%s", r.stdout)
	}
	for _, c := range NewRootCmd(genericiooptions.NewTestIOStreamsDiscard()).Commands() {
		switch c.Name() {
		case "version", "help", "completion":
			continue
		}
		if c.GroupID == "" {
			t.Errorf("%s is in no group of --help", c.Name())
		}
	}
	group := r.stdout[first:]
	group = group[:strings.Index(group, "\n\n")]
	for _, c := range []string{"plan", "upgrade", "doctor"} {
		if !strings.Contains(group, "\n  "+c+" ") {
			t.Errorf("the start-here group lacks %s:\n%s", c, group)
		}
	}
}
