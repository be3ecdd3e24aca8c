package plugin

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// writeTemp writes content to name in a fresh temporary directory and returns its path.
func writeTemp(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// oneErrorLine checks that r failed with code and one "error: " line on stderr holding want
// (and no Go type names), with nothing on stdout.
func oneErrorLine(t *testing.T, r result, code int, want string) {
	t.Helper()
	if r.code != code {
		t.Errorf("exit code %d, want %d; stderr: %s", r.code, code, r.stderr)
	}
	if r.stdout != "" {
		t.Errorf("stdout not empty: %q", r.stdout)
	}
	lines := strings.Split(strings.TrimSpace(r.stderr), "\n")
	if len(lines) != 1 || !strings.HasPrefix(lines[0], "error: ") {
		t.Errorf("stderr is not one error line: %q", r.stderr)
	}
	for _, bad := range []string{"; ;", "Go value", "json.RawMessage", "\t"} {
		if strings.Contains(r.stderr, bad) {
			t.Errorf("stderr holds %q: %q", bad, r.stderr)
		}
	}
	mustContain(t, "stderr", r.stderr, want)
}

// TestErrorPolish: issue 9's error polish list, one clear line each with the right exit code.
func TestErrorPolish(t *testing.T) {
	list := writeTemp(t, "list.yaml", "- a\n- b\n")
	for _, tc := range []struct {
		name  string
		stdin string
		args  []string
		code  int
		want  string
	}{
		{"did you mean", "", []string{"verions"}, 2, `unknown command "verions" for "kubectl crdver"; did you mean "versions" or "version"?`},
		{"YAML list as CRD file", "", []string{"versions", "-f", list}, 2, list + " (document 1): not a Kubernetes object: it is a YAML list, want a mapping with apiVersion and kind"},
		{"YAML list as explain CRD file", "", []string{"explain", "--crd-file", list}, 2, list + " (document 1): not a Kubernetes object: it is a YAML list"},
		{"YAML list as objects", "", []string{"preview", "-f", list, "--crd-file", crontabFile}, 2, list + " (document 1): not a Kubernetes object: it is a YAML list"},
		{"stdin twice, preview", "x: 1\n", []string{"preview", "-f", "-", "--crd-file", "-"}, 2, "-f - and --crd-file - both read standard input, which can be read only once"},
		{"stdin twice, convert", "x: 1\n", []string{"convert", "-f", "-", "--crd-file", "-", "--to", "v1"}, 2, "-f - and --crd-file - both read standard input"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			oneErrorLine(t, run(t, tc.stdin, tc.args...), tc.code, tc.want)
		})
	}
	t.Run("unknown context", func(t *testing.T) {
		oneErrorLine(t, runCluster(t, "versions", "crontabs.stable.example.com", "--context", "nope"), 2, `context "nope" does not exist`)
	})
}
