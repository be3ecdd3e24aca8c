package plugin

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/crdver/kubectl-crdver/plan"
)

func planFile(name string) string { return repoFile("plan", "testdata", name) }

func TestPlanGolden(t *testing.T) {
	offline := []string{"plan", "-f", planFile("widgets-new.yaml"), "--old-file", planFile("widgets-old.yaml"), "--objects", planFile("widgets-objects.yaml")}
	with := func(extra ...string) []string { return append(append([]string{}, offline...), extra...) }
	runGoldenCases(t, []goldenCase{
		{golden: "plan-widgets.txt", args: offline, code: ExitProblems},
		{golden: "plan-widgets-wide.txt", args: with("-o", "wide"), code: ExitProblems},
		{golden: "plan-widgets.json", args: with("-o", "json"), code: ExitProblems},
		{golden: "plan-widgets-sample.yaml", args: with("-o", "yaml", "--sample", "3", "--workers", "1"), code: ExitProblems},
		{golden: "plan-widgets-warn.txt", args: with("--field-validation", "Warn"), code: ExitProblems},
		{golden: "plan-self.txt", args: []string{"plan", "-f", planFile("widgets-new.yaml"), "--old-file", planFile("widgets-new.yaml")}, code: ExitOK},
		{golden: "plan-certs.txt", args: certs, code: ExitProblems},
		{golden: "plan-certs-wide.txt", args: append(append([]string{}, certs...), "-o", "wide"), code: ExitProblems},
		{golden: "plan-certs.json", args: append(append([]string{}, certs...), "-o", "json"), code: ExitProblems},
		{golden: "plan-stricter.txt", args: stricter, code: ExitOK},
		{golden: "plan-stricter-fail.txt", args: append(append([]string{}, stricter...), "--fail-on", "stricter"), code: ExitProblems},
	})
}

var (
	// certs: a release that removes v1alpha2 while objects' managedFields name it (a one-time
	// create, a GitOps applier).
	certs = []string{"plan", "-f", planFile("certs-new.yaml"), "--old-file", planFile("certs-old.yaml"), "--objects", planFile("certs-objects.yaml")}
	// stricter: rules that no live object violates.
	stricter = []string{"plan", "-f", planFile("widgets-stricter.yaml"), "--old-file", planFile("widgets-old.yaml"), "--objects", planFile("widgets-objects.yaml")}
)

// TestPlanVerdicts: the gate says breaking exactly when something live breaks (server-side
// apply fails on objects whose managedFields name a removed version; a GitOps applier still
// writes it), stricter when only new objects meet stricter rules (exit 0 unless --fail-on
// stricter), and unknown when the live CRD's storedVersions are not known and a version is
// removed.
func TestPlanVerdicts(t *testing.T) {
	report := func(args ...string) (plan.Report, result) {
		t.Helper()
		r := run(t, "", append(args, "-o", "json")...)
		var rep plan.Report
		if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
			t.Fatalf("%v: %v\n%s", args, err, r.stderr)
		}
		return rep, r
	}
	rep, r := report(certs...)
	it := rep.Items[0]
	if r.code != ExitProblems || it.Verdict != plan.VerdictBreaking || rep.Summary.Verdict != plan.VerdictBreaking || rep.Summary.Breaking != 1 {
		t.Errorf("certs: exit %d, verdict %q, summary %+v", r.code, it.Verdict, rep.Summary)
	}
	mustContain(t, "certs reasons", strings.Join(it.BreakingReasons, "\n"),
		"server-side apply fails on 2 objects whose managedFields name v1alpha2",
		"kustomize-controller still writes v1alpha2 (Apply, 1 object), which the new CRD removes: its next apply fails; change the manifests of kustomize-controller to apiVersion plan.example.com/v1")
	for _, reason := range it.BreakingReasons {
		if strings.Contains(reason, "kubectl-create") {
			t.Errorf("a one-time create is called a writer: %s", reason)
		}
	}
	var created string
	for _, mv := range it.ManagedFields {
		for _, w := range mv.Writers {
			if w.Manager == "kubectl-create" {
				created = w.Summary
			}
		}
	}
	if created != "created at v1alpha2 by kubectl-create on 2025-03-01" {
		t.Errorf("kubectl-create's entry: %q", created)
	}

	rep, r = report(stricter...)
	it = rep.Items[0]
	if r.code != ExitOK || it.Verdict != plan.VerdictStricter || it.Breaking || len(it.Stricter) != 2 || len(it.Objects.Findings) != 0 {
		t.Errorf("stricter: exit %d, verdict %q, stricter %+v, findings %+v, reasons %q %q", r.code, it.Verdict, it.Stricter, it.Objects.Findings, it.BreakingReasons, it.UnknownReasons)
	}
	r = run(t, "", append(append([]string{}, stricter...), "--fail-on", "stricter")...)
	if r.code != ExitProblems || !strings.Contains(r.stderr, "applying makes rules stricter for new objects (--fail-on stricter): widgets.plan.example.com") {
		t.Errorf("--fail-on stricter: exit %d, stderr %s", r.code, r.stderr)
	}
	// Without objects, the same change cannot be judged: unknown, exit 1.
	rep, r = report("plan", "-f", planFile("widgets-stricter.yaml"), "--old-file", planFile("widgets-old.yaml"))
	if it := rep.Items[0]; r.code != ExitProblems || it.Verdict != plan.VerdictUnknown || len(it.UnknownReasons) != 1 || !strings.Contains(it.UnknownReasons[0], "the objects were not evaluated: 2 schema changes") {
		t.Errorf("no objects: exit %d, verdict %q, unknown %q", r.code, it.Verdict, it.UnknownReasons)
	}

	// storedVersions unknown (a file without status) and a version removed: unknown, not allowed.
	dir := t.TempDir()
	old, err := os.ReadFile(planFile("certs-old.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	noStatus := strings.Replace(string(old), "status:\n  storedVersions: [v1]\n", "", 1)
	if noStatus == string(old) {
		t.Fatal("certs-old.yaml has no status to drop")
	}
	if err := os.WriteFile(filepath.Join(dir, "old.yaml"), []byte(noStatus), 0o644); err != nil {
		t.Fatal(err)
	}
	rep, r = report("plan", "-f", planFile("certs-new.yaml"), "--old-file", filepath.Join(dir, "old.yaml"))
	if it := rep.Items[0]; r.code != ExitProblems || !it.Apply.Allowed || it.Verdict != plan.VerdictUnknown ||
		!strings.Contains(strings.Join(it.UnknownReasons, "\n"), "status.storedVersions of the live CRD is not known (it was read without status): if it lists v1alpha2") {
		t.Errorf("storedVersions unknown: exit %d, apply %+v, verdict %q, unknown %q", r.code, it.Apply, it.Verdict, it.UnknownReasons)
	}
	oneErrorLine(t, run(t, "", append(append([]string{}, stricter...), "--fail-on", "never")...), 2, `--fail-on "never" is not supported: use breaking or stricter`)
}

// TestPlanFits120Columns: plan's default output fits 120 columns for every golden case and for
// every corpus CRD planned against a copy that lacks its validation rules (every CEL rule, limit
// and enum then shows as a schema change).
func TestPlanFits120Columns(t *testing.T) {
	for _, args := range [][]string{certs, stricter,
		{"plan", "-f", planFile("widgets-new.yaml"), "--old-file", planFile("widgets-old.yaml"), "--objects", planFile("widgets-objects.yaml")},
		{"plan", "-f", planFile("widgets-new.yaml"), "--old-file", planFile("widgets-old.yaml"), "--objects", planFile("widgets-objects.yaml"), "--field-validation", "Warn"},
	} {
		fits(t, strings.Join(args, " "), run(t, "", args...).stdout)
	}
	goldens, _ := filepath.Glob(filepath.Join("testdata", "golden", "plan-*.txt"))
	for _, g := range goldens {
		if strings.Contains(g, "-wide") {
			continue // -o wide keeps every message on one line
		}
		b, err := os.ReadFile(g)
		if err != nil {
			t.Fatal(err)
		}
		fits(t, g, string(b))
	}
	files, _ := filepath.Glob(filepath.Join("..", "..", "shared", "corpus", "crds", "*.yaml"))
	if len(files) == 0 {
		t.Skip("corpus absent (../shared/corpus/crds)")
	}
	dir := t.TempDir()
	withChanges := 0
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		loose := filepath.Join(dir, filepath.Base(f))
		if err := os.WriteFile(loose, looser(t, b), 0o644); err != nil {
			t.Fatal(err)
		}
		r := run(t, "", "plan", "-f", f, "--old-file", loose)
		if r.code != ExitProblems && r.code != ExitOK {
			t.Errorf("%s: exit %d: %s", f, r.code, r.stderr)
		}
		if strings.Contains(r.stdout, "  Schema changes:\n") {
			withChanges++
		}
		fits(t, filepath.Base(f), r.stdout)
	}
	if withChanges < len(files)/2 {
		t.Errorf("only %d of %d corpus CRDs planned with schema changes: the width check saw too little", withChanges, len(files))
	}
}

func fits(t *testing.T, what, out string) {
	t.Helper()
	for _, line := range strings.Split(out, "\n") {
		if n := len([]rune(line)); n > 120 {
			t.Errorf("%s: line of %d columns:\n%s", what, n, line)
		}
	}
}

// looser drops every x-kubernetes-validations, maxLength, maxItems, maximum, pattern and enum
// from a CRD document.
func looser(t *testing.T, doc []byte) []byte {
	t.Helper()
	var m map[string]any
	if err := yaml.Unmarshal(doc, &m); err != nil {
		t.Fatal(err)
	}
	var strip func(v any)
	strip = func(v any) {
		switch x := v.(type) {
		case map[string]any:
			for _, k := range []string{"x-kubernetes-validations", "maxLength", "maxItems", "maximum", "pattern", "enum"} {
				if _, ok := x["type"]; ok || k == "x-kubernetes-validations" {
					delete(x, k)
				}
			}
			for _, c := range x {
				strip(c)
			}
		case []any:
			for _, c := range x {
				strip(c)
			}
		}
	}
	strip(m["spec"])
	out, err := yaml.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestPlanSeveralCRDsFromStdin: one input stream (as kustomize build prints it) with two CRDs
// and a document that is not a CRD, which is skipped.
func TestPlanSeveralCRDsFromStdin(t *testing.T) {
	var in strings.Builder
	for _, f := range []string{"widgets-new.yaml", "gizmos.yaml"} {
		b, err := os.ReadFile(planFile(f))
		if err != nil {
			t.Fatal(err)
		}
		in.Write(b)
		in.WriteString("---\n")
	}
	in.WriteString("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n")
	r := run(t, in.String(), "plan", "-f", "-", "--old-file", planFile("widgets-old.yaml"), "-o", "json")
	if r.code != ExitProblems {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	var rep plan.Report
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Fatal(err)
	}
	if len(rep.Items) != 2 || rep.Items[0].CRD != "widgets.plan.example.com" || rep.Items[0].Operation != "update" ||
		rep.Items[1].CRD != "gizmos.plan.example.com" || rep.Items[1].Operation != "create" || rep.Items[1].Breaking {
		t.Errorf("items: %+v", rep.Items)
	}
	mustContain(t, "stderr", r.stderr, "skipped 1 document that is not a CustomResourceDefinition")
	golden(t, "plan-several.txt", run(t, in.String(), "plan", "-f", "-", "--old-file", planFile("widgets-old.yaml")).stdout)
}

func TestPlanUsage(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"plan"}, "give the new CRDs with -f"},
		{[]string{"plan", "-f", planFile("widgets-new.yaml"), "--objects", planFile("widgets-objects.yaml")}, "--objects is for offline plans"},
		{[]string{"plan", "-f", planFile("widgets-new.yaml"), "--field-validation", "loose"}, `--field-validation "loose" is not supported`},
		{[]string{"plan", "-f", planFile("widgets-objects.yaml")}, "no CustomResourceDefinition found: the first of 7 documents is"},
		{[]string{"plan", "-f", planFile("widgets-new.yaml"), "-o", "name"}, `--output "name" is not supported`},
		{[]string{"plan", "-f", planFile("widgets-new.yaml"), "--sample", "-1"}, "--sample must be 0"},
		{[]string{"plan", "-f", planFile("widgets-new.yaml"), "-f", planFile("widgets-new.yaml")}, "widgets.plan.example.com is defined 2 times, in " + planFile("widgets-new.yaml") + " (document 1) and " + planFile("widgets-new.yaml") + " (document 1): pass only one file that defines it"},
		{[]string{"plan", "some-crd"}, "unknown command"},
		{[]string{"plan", "-f", planFile("widgets-new.yaml"), "--webhook", "127.0.0.1:9443"}, `--webhook "127.0.0.1:9443": give https://HOST:PORT[/PATH] or NAMESPACE/SERVICE[:PORT]`},
		{[]string{"plan", "-f", planFile("widgets-new.yaml"), "--webhook", "http://127.0.0.1:9443/convert"}, "a webhook URL is https://HOST:PORT[/PATH]"},
		{[]string{"plan", "-f", planFile("widgets-new.yaml"), "--webhook", "sandbox/hook:https"}, `the port "https" is not a number from 1 to 65535`},
		{[]string{"plan", "-f", planFile("widgets-new.yaml"), "--old-file", planFile("widgets-old.yaml"), "--webhook", "sandbox/hook"}, "--webhook round-trips the live objects: plan against the cluster, without --old-file"},
	} {
		r := run(t, "", tc.args...)
		if r.code != ExitUsage || !strings.Contains(r.stderr, tc.want) || strings.Count(strings.TrimSpace(r.stderr), "\n") != 0 {
			t.Errorf("%v: exit %d, stderr %q; want exit 2 and %q", tc.args, r.code, r.stderr, tc.want)
		}
	}
}

// TestNoCRDFoundWordedOnce: input without a CustomResourceDefinition gets the same error from
// every command that reads CRDs from files (one helper, crdsource.NoCRDFound).
func TestNoCRDFoundWordedOnce(t *testing.T) {
	objects := planFile("widgets-objects.yaml")
	want := "error: " + objects + ": no CustomResourceDefinition found: the first of 7 documents is " + objects + " (document 1): plan.example.com/v1 Widget is not a CustomResourceDefinition\n"
	for _, args := range [][]string{
		{"versions", "-f", objects},
		{"explain", "-f", objects},
		{"preview", "-f", objects, "--crd-file", objects},
		{"plan", "-f", objects},
		{"plan", "-f", objects, "--old-file", objects},
	} {
		if r := run(t, "", args...); r.code != ExitUsage || r.stderr != want {
			t.Errorf("%v: exit %d\n%s\nwant exit 2 and\n%s", args, r.code, r.stderr, want)
		}
	}
}

// TestPlanInterrupted: a cancelled context (Ctrl-C) ends the plan with exit 3.
func TestPlanInterrupted(t *testing.T) {
	streams, _, out, errOut := genericiooptions.NewTestIOStreams()
	root := NewRootCmd(streams)
	root.SetArgs([]string{"plan", "-f", planFile("widgets-new.yaml"), "--old-file", planFile("widgets-old.yaml"), "--objects", planFile("widgets-objects.yaml")})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err := root.ExecuteContext(ctx)
	if ExitCode(err) != ExitUnavailable || !strings.Contains(ErrorLine(err), "interrupted") {
		t.Errorf("exit %d, %v; stdout %s stderr %s", ExitCode(err), err, out, errOut)
	}
}
