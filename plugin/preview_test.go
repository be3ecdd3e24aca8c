package plugin

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Golden files for preview's printed output, one per output mode and feature.
func TestPreviewGolden(t *testing.T) {
	widgetCRD, crontabCRD := td("crds", "widget.yaml"), td("crds", "crontab.yaml")
	cases := []goldenCase{
		{"preview-widgets.txt", []string{"preview", "-f", td("preview", "widgets.yaml"), "--crd-file", widgetCRD}, ExitProblems},
		{"preview-widgets.json", []string{"preview", "-f", td("preview", "widgets.yaml"), "--crd-file", widgetCRD, "-o", "json"}, ExitProblems},
		{"preview-widgets.yaml", []string{"preview", "-f", td("preview", "widgets.yaml"), "--crd-file", widgetCRD, "-o", "yaml"}, ExitProblems},
		{"preview-widgets-strict.txt", []string{"preview", "-f", td("preview", "widgets.yaml"), "--crd-file", widgetCRD, "--field-validation", "Strict"}, ExitProblems},
		{"preview-widgets-ignore.txt", []string{"preview", "-f", td("preview", "widgets.yaml"), "--crd-file", widgetCRD, "--field-validation", "ignore"}, ExitProblems},
		{"preview-widgets-diff.txt", []string{"preview", "-f", td("preview", "widgets.yaml"), "--crd-file", widgetCRD, "--diff"}, ExitProblems},
		{"preview-widget-v1beta1.txt", []string{"preview", "-f", td("preview", "widgets.yaml"), "--crd-file", widgetCRD, "--version", "v1beta1"}, ExitProblems},
		{"preview-update.txt", []string{"preview", "-f", td("preview", "widget-new.yaml"), "--old-file", td("preview", "widget-old.yaml"), "--crd-file", widgetCRD}, ExitProblems},
		{"preview-crontab-v1beta1.txt", []string{"preview", "-f", td("preview", "crontab-v1beta1.yaml"), "--crd-file", crontabCRD}, ExitOK},
		{"preview-crontab-v1beta1-as-v1.txt", []string{"preview", "-f", td("preview", "crontab-v1beta1.yaml"), "--crd-file", crontabCRD, "--version", "v1", "--diff"}, ExitOK},
		{"preview-nonstructural.txt", []string{"preview", "-f", td("preview", "foo.yaml"), "--crd-file", td("explain", "nonstructural-docs.yaml")}, ExitUsage},
	}
	runGoldenCases(t, cases)
}

// The update preview keeps the stored status (status subresource) and reports the transition
// rule; accepting the same update without changing immutableID proves the rule is what rejects.
func TestPreviewUpdate(t *testing.T) {
	crd := td("crds", "widget.yaml")
	r := run(t, "", "preview", "-f", td("preview", "widget-new.yaml"), "--old-file", td("preview", "widget-old.yaml"), "--crd-file", crd)
	mustContain(t, "stdout", r.stdout, "spec.immutableID: Invalid value: \"xyz-999\": immutableID is immutable", "verdict: rejected")
	fixed := strings.Replace(readTestFile(t, td("preview", "widget-new.yaml")), "xyz-999", "abc-123", 1)
	r = run(t, fixed, "preview", "-f", "-", "--old-file", td("preview", "widget-old.yaml"), "--crd-file", crd, "-o", "json")
	if r.code != ExitOK {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	mustContain(t, "stdout", r.stdout, `"phase": "Ready"`, `"operation": "update"`, `"verdict": "accepted"`)
	if strings.Contains(r.stdout, "Broken") {
		t.Error("the status sent with the update was kept: the status subresource must keep the stored one")
	}
}

// Bad input: one line naming the file and document, exit 2, nothing printed as a result.
func TestPreviewInputErrors(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	widgetCRD, crontabCRD := td("crds", "widget.yaml"), td("crds", "crontab.yaml")
	malformed := write("bad.yaml", "apiVersion: preview.example.com/v1\nkind: Widget\nmetadata: {name: x\n")
	other := write("pod.yaml", "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\n")
	unknownVersion := write("v9.yaml", "apiVersion: preview.example.com/v9\nkind: Widget\nmetadata: {name: x}\n")
	unserved := write("alpha.yaml", "apiVersion: stable.example.com/v1alpha1\nkind: CronTab\nmetadata: {name: x}\n")
	cases := []struct {
		name string
		args []string
		want string
	}{
		{"malformed YAML", []string{"-f", malformed, "--crd-file", widgetCRD}, "bad.yaml (document 1): malformed YAML"},
		{"not a CRD", []string{"-f", td("preview", "widgets.yaml"), "--crd-file", other}, "pod.yaml (document 1): v1 Pod is not a CustomResourceDefinition"},
		{"group and kind mismatch", []string{"-f", other, "--crd-file", widgetCRD}, "nothing to preview: 1 document skipped; the first: " + other + " (document 1): v1 Pod is not defined by any CustomResourceDefinition of --crd-file or the input"},
		{"group and kind mismatch, --strict-kinds", []string{"-f", other, "--crd-file", widgetCRD, "--strict-kinds"}, "pod.yaml (document 1): no CustomResourceDefinition in"},
		{"mismatch with a named CRD", []string{"-f", other, "--crd-file", widgetCRD, "widgets.preview.example.com"}, "v1 Pod does not belong to CustomResourceDefinition widgets.preview.example.com"},
		{"mismatch with a named CRD, --strict-kinds", []string{"-f", other, "--crd-file", widgetCRD, "widgets.preview.example.com", "--strict-kinds"}, "v1 Pod does not belong to CustomResourceDefinition widgets.preview.example.com (group preview.example.com, kind Widget; --strict-kinds)"},
		{"stdin twice", []string{"-f", "-", "--crd-file", "-"}, "both read standard input"},
		{"unknown version", []string{"-f", unknownVersion, "--crd-file", widgetCRD}, `v9.yaml (document 1): widgets.preview.example.com: version "v9" is not in spec.versions (have: v1, v1beta1)`},
		{"unserved version", []string{"-f", unserved, "--crd-file", crontabCRD}, `alpha.yaml (document 1): crontabs.stable.example.com: version "v1alpha1" is not served`},
		{"unknown --version", []string{"-f", td("preview", "widgets.yaml"), "--crd-file", widgetCRD, "--version", "v2"}, `version "v2" is not in spec.versions`},
		{"version without schema", []string{"-f", td("preview", "bar.yaml"), "--crd-file", td("preview", "noschema-crd.yaml")}, `bar.yaml (document 1): bars.docs.example.com: version "v1" has no schema`},
		{"non-structural", []string{"-f", td("preview", "foo.yaml"), "--crd-file", td("explain", "nonstructural-docs.yaml")}, `is not structural (6 violations listed above)`},
		{"bad field validation", []string{"-f", td("preview", "widgets.yaml"), "--crd-file", widgetCRD, "--field-validation", "Loud"}, `--field-validation "Loud" is not supported`},
		{"no objects", []string{"--crd-file", widgetCRD}, "give the objects to preview with -f"},
		{"old object missing", []string{"-f", td("preview", "widgets.yaml"), "--old-file", td("preview", "widget-old.yaml"), "--crd-file", widgetCRD}, `--old-file has no Widget named "invalid"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := run(t, "", append([]string{"preview"}, tc.args...)...)
			if r.code != ExitUsage {
				t.Errorf("exit code %d, want 2; stderr: %s", r.code, r.stderr)
			}
			lines := strings.Split(strings.TrimSpace(r.stderr), "\n")
			if len(lines) != 1 || !strings.HasPrefix(lines[0], "error: ") {
				t.Errorf("want one error line, got %q", r.stderr)
			}
			mustContain(t, "stderr", r.stderr, tc.want)
			// Output streams: an error in a later document comes after the earlier results.
			if strings.Contains(r.stdout, "verdict:") && tc.name != "old object missing" {
				t.Errorf("printed a result although the input is bad:\n%s", r.stdout)
			}
		})
	}
}

// From the cluster: by CRD name, and found by the objects' kind and group; the output is the
// same as offline.
func TestPreviewFromCluster(t *testing.T) {
	installCRDFile(t, td("crds", "widget.yaml"))
	offline := run(t, "", "preview", "-f", td("preview", "widgets.yaml"), "--crd-file", td("crds", "widget.yaml"))
	for _, args := range [][]string{
		{"preview", "-f", td("preview", "widgets.yaml"), "widgets.preview.example.com"},
		{"preview", "-f", td("preview", "widgets.yaml"), "wd"},
		{"preview", "-f", td("preview", "widgets.yaml")},
	} {
		r := runCluster(t, args...)
		if r.code != ExitProblems {
			t.Errorf("%v: exit %d: %s", args, r.code, r.stderr)
		}
		if r.stdout != offline.stdout {
			t.Errorf("%v: output differs from the offline preview:\n%s", args, r.stdout)
		}
	}
	r := runCluster(t, "preview", "-f", td("preview", "crontab-v1beta1.yaml"))
	if r.code != ExitUsage || !strings.Contains(r.stderr, "crontab-v1beta1.yaml (document 1): stable.example.com/v1beta1 CronTab is not defined by any CustomResourceDefinition in the input or the cluster") {
		t.Errorf("a CRD missing from the cluster: exit %d, stderr %q", r.code, r.stderr)
	}
}

func readTestFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
