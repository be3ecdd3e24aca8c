package plugin

import (
	"os"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericiooptions"
)

// offlineExamples are the example commands of README.md and of --help that need no cluster,
// with their documented exit codes. Each must appear word for word (README as "$ kubectl crdver
// ARGS", --help as "kubectl crdver ARGS"), so the list cannot drift from the text, and each runs
// as written from the repository root with its files from testdata/.
var offlineExamples = []struct {
	args string
	code int
}{
	{"versions -f testdata/crds/crontab.yaml", 0},
	{"versions -f testdata/crds/crontab.yaml -o wide", 0},
	{"versions -f testdata/crds/crontab-release.yaml", 0},
	{"versions -f testdata/crds/crontab-release.yaml --can-remove v1alpha1", 1},
	{"versions --sort v1 v2beta1 v1alpha1 v2", 0},
	{"versions --sort v1 v10 foo10 v2 v11alpha2 v3beta1 foo1 v12alpha1 v10beta3 v11beta2", 0},
	{"versions -f testdata/crds/crontab.yaml -o json", 0},
	{"preview -f testdata/preview/widgets.yaml --crd-file testdata/crds/widget.yaml --diff", 1},
	{"preview -f testdata/preview/widgets.yaml --crd-file testdata/crds/widget.yaml", 1},
	{"preview -f testdata/preview/widgets.yaml --crd-file testdata/crds/widget.yaml --field-validation Strict", 1},
	{"preview -f testdata/preview/widgets.yaml --crd-file testdata/crds/widget.yaml --version v1beta1 -o json", 1},
	{"preview -f testdata/preview/crontab-v1beta1.yaml --crd-file testdata/crds/crontab.yaml", 0},
	{"preview -f testdata/preview/widget-new.yaml --old-file testdata/preview/widget-old.yaml --crd-file testdata/crds/widget.yaml", 1},
	{"explain --crd-file testdata/invalid-crds/bad-cel.yaml", 2}, // README shows the refusal
	{"explain -f testdata/explain/nonstructural-docs.yaml", 1},
	{"explain -f testdata/crds/widget.yaml", 0},
	{"explain -f testdata/crds/widget.yaml spec.ports", 0},
	{"explain -f testdata/crds/crontab.yaml --compare v1beta1,v1", 0},
	{"convert --crd-file testdata/crds/crontab.yaml --to v1 -f testdata/convert/crontabs-v1beta1.yaml", 1},
	{"plan -f plan/testdata/widgets-new.yaml --old-file plan/testdata/widgets-old.yaml --objects plan/testdata/widgets-objects.yaml", 1},
}

// TestOfflineExamples runs every offline example of README.md and --help from the repository
// root: each is in the text, finds its files and ends with its documented exit code.
func TestOfflineExamples(t *testing.T) {
	readme, err := os.ReadFile(repoFile("README.md"))
	if err != nil {
		t.Fatal(err)
	}
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
	for _, ex := range offlineExamples {
		t.Run(ex.args, func(t *testing.T) {
			if !mentions(string(readme), "$ kubectl crdver "+ex.args) && !mentions(help.String(), "  kubectl crdver "+ex.args) {
				t.Fatalf("not an example of README.md or --help any more: kubectl crdver %s", ex.args)
			}
			r := run(t, "", strings.Fields(ex.args)...)
			if r.code != ex.code {
				t.Errorf("exit %d, want %d\nstdout:\n%s\nstderr:\n%s", r.code, ex.code, r.stdout, r.stderr)
			}
			if r.stdout == "" && r.code != 2 {
				t.Errorf("no output; stderr:\n%s", r.stderr)
			}
		})
	}
	// The files that --help examples name are in the repository.
	for _, line := range strings.Split(help.String(), "\n") {
		if !strings.Contains(line, "kubectl crdver ") {
			continue
		}
		for _, f := range strings.Fields(line) {
			if strings.Contains(f, "testdata/") {
				if _, err := os.Stat(f); err != nil {
					t.Errorf("--help example names a missing file: %s", strings.TrimSpace(line))
				}
			}
		}
	}
}

// mentions reports whether text holds cmd as a whole command line (followed by the end of the
// line, a blank or a semicolon).
func mentions(text, cmd string) bool {
	for rest := text; ; {
		i := strings.Index(rest, cmd)
		if i < 0 {
			return false
		}
		rest = rest[i+len(cmd):]
		if rest == "" || strings.ContainsRune("\n ;", rune(rest[0])) {
			return true
		}
	}
}
