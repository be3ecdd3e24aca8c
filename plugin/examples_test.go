package plugin

import (
	"os"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericiooptions"
)

// The console examples of README.md and docs/ are run, and their output checked, by
// TestExamples in docs/ (make docs regenerates them). Here: the examples of --help.

// TestHelpExamplesNameRealFiles: every file of the repository a --help example names (under
// testdata/) exists, so that the example runs as written from the repository root.
func TestHelpExamplesNameRealFiles(t *testing.T) {
	var help strings.Builder
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		help.WriteString(c.Example + "\n")
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(NewRootCmd(genericiooptions.NewTestIOStreamsDiscard()))
	t.Chdir("..")
	n := 0
	for _, line := range strings.Split(help.String(), "\n") {
		if !strings.Contains(line, "kubectl crdver ") {
			continue
		}
		for _, f := range strings.Fields(line) {
			if strings.Contains(f, "testdata/") {
				n++
				if _, err := os.Stat(f); err != nil {
					t.Errorf("--help example names a missing file: %s", strings.TrimSpace(line))
				}
			}
		}
	}
	if n == 0 {
		t.Error("no --help example names a file of testdata/: is the walk broken?")
	}
}
