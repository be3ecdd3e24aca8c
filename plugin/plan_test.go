package plugin

import (
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"

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
	})
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
	mustContain(t, "stderr", r.stderr, "skipped 1 documents that are not CustomResourceDefinitions")
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
		{[]string{"plan", "-f", planFile("widgets-objects.yaml")}, "no CustomResourceDefinitions found (7 other documents)"},
		{[]string{"plan", "-f", planFile("widgets-new.yaml"), "-o", "name"}, `--output "name" is not supported`},
		{[]string{"plan", "-f", planFile("widgets-new.yaml"), "--sample", "-1"}, "--sample must be 0"},
		{[]string{"plan", "-f", planFile("widgets-new.yaml"), "-f", planFile("widgets-new.yaml")}, "is already defined"},
		{[]string{"plan", "some-crd"}, "unknown command"},
		{[]string{"plan", "-f", planFile("widgets-new.yaml"), "--webhook-address", "127.0.0.1:9443"}, "--webhook-address is for --convert-sample"},
		{[]string{"plan", "-f", planFile("widgets-new.yaml"), "--convert-sample", "-2"}, "--convert-sample must be 0"},
	} {
		r := run(t, "", tc.args...)
		if r.code != ExitUsage || !strings.Contains(r.stderr, tc.want) || strings.Count(strings.TrimSpace(r.stderr), "\n") != 0 {
			t.Errorf("%v: exit %d, stderr %q; want exit 2 and %q", tc.args, r.code, r.stderr, tc.want)
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
