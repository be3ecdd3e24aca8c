package plugin

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/crdver/kubectl-crdver/explain"
)

// Golden files for explain's printed output.
func TestExplainGolden(t *testing.T) {
	widgetCRD := td("crds", "widget.yaml")
	docs := td("explain", "nonstructural-docs.yaml")
	cases := []goldenCase{
		{"explain-widget.txt", []string{"explain", "--crd-file", widgetCRD}, ExitOK},
		{"explain-widget-spec.txt", []string{"explain", "--crd-file", widgetCRD, "spec"}, ExitOK},
		{"explain-widget-recursive.txt", []string{"explain", "--crd-file", widgetCRD, "widgets.preview.example.com", "spec", "-r"}, ExitOK},
		{"explain-widget-ports.json", []string{"explain", "--crd-file", widgetCRD, "spec.ports", "-o", "json"}, ExitOK},
		{"explain-widget-ports.yaml", []string{"explain", "--crd-file", widgetCRD, "spec.ports", "-o", "yaml"}, ExitOK},
		{"explain-widget-v1beta1.txt", []string{"explain", "--crd-file", widgetCRD, "--version", "v1beta1", "-r"}, ExitOK},
		{"explain-nonstructural.txt", []string{"explain", "--crd-file", docs}, ExitProblems},
		{"explain-nonstructural.json", []string{"explain", "--crd-file", docs, "-o", "json"}, ExitProblems},
		{"explain-compare.txt", []string{"explain", "--crd-file", widgetCRD, "--compare", "v1beta1,v1"}, ExitOK},
		{"explain-compare.json", []string{"explain", "--crd-file", widgetCRD, "--compare", "v1beta1,v1", "-o", "json"}, ExitOK},
		{"explain-compare-crontab.txt", []string{"explain", "--crd-file", td("crds", "crontab.yaml"), "--compare", "v1beta1,v1"}, ExitOK},
	}
	runGoldenCases(t, cases)
}

// The docs' non-structural example: every listed violation with its rule, in JSON.
func TestExplainNonStructuralRules(t *testing.T) {
	r := run(t, "", "explain", "--crd-file", td("explain", "nonstructural-docs.yaml"), "-o", "json")
	var e explain.Explanation
	if err := json.Unmarshal([]byte(r.stdout), &e); err != nil {
		t.Fatalf("%v\n%s", err, r.stdout)
	}
	rules := map[int]int{}
	for _, v := range e.Structural.Versions[0].Violations {
		rules[v.Rule]++
	}
	if want := map[int]int{1: 2, 2: 1, 3: 2, 4: 1}; !equalCounts(rules, want) {
		t.Errorf("violations per rule %v, want %v", rules, want)
	}
	if e.Structural.Structural {
		t.Error("reported structural")
	}
}

func equalCounts(a, b map[int]int) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

func TestExplainErrors(t *testing.T) {
	widgetCRD := td("crds", "widget.yaml")
	cases := []struct {
		name string
		args []string
		want string
	}{
		{"unknown field", []string{"--crd-file", widgetCRD, "spec.nope"}, `field "spec.nope" does not exist: spec has description, extra`},
		{"unknown version", []string{"--crd-file", widgetCRD, "--version", "v3"}, `widgets.preview.example.com: version "v3" is not in spec.versions (have: v1, v1beta1)`},
		{"bad compare", []string{"--crd-file", widgetCRD, "--compare", "v1"}, "--compare takes two different versions"},
		{"compare unknown version", []string{"--crd-file", widgetCRD, "--compare", "v1,v9"}, `version "v9" is not in spec.versions`},
		{"no CRD", []string{}, "name a CRD"},
		{"not a CRD file", []string{"--crd-file", td("preview", "widgets.yaml")}, "is not a CustomResourceDefinition"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := run(t, "", append([]string{"explain"}, tc.args...)...)
			if r.code != ExitUsage {
				t.Errorf("exit %d, want 2; stderr %s", r.code, r.stderr)
			}
			mustContain(t, "stderr", r.stderr, tc.want)
			if n := strings.Count(strings.TrimSpace(r.stderr), "\n"); n != 0 {
				t.Errorf("want one error line, got %q", r.stderr)
			}
		})
	}
}

// explain reads the CRD from the cluster the same way as from a file.
func TestExplainFromCluster(t *testing.T) {
	installCRDFile(t, td("crds", "crontab.yaml"))
	offline := run(t, "", "explain", "--crd-file", td("crds", "crontab.yaml"), "spec", "-r")
	r := runCluster(t, "explain", "ct", "spec", "-r")
	if r.code != ExitOK || r.stdout != offline.stdout {
		t.Errorf("exit %d; cluster output differs from the file's:\n%s\nwant:\n%s", r.code, r.stdout, offline.stdout)
	}
}
