package plugin

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/crdver/kubectl-crdver/doctor"
	"github.com/crdver/kubectl-crdver/printers"
)

// TestMarkdownGolden: -o markdown of plan and versions --all, run offline (the exit code is the
// command's, as with any other -o).
func TestMarkdownGolden(t *testing.T) {
	with := func(base []string, extra ...string) []string { return append(append([]string{}, base...), extra...) }
	offline := []string{"plan", "-f", planFile("widgets-new.yaml"), "--old-file", planFile("widgets-old.yaml"), "--objects", planFile("widgets-objects.yaml")}
	runGoldenCases(t, []goldenCase{
		{golden: "plan-widgets.md", args: with(offline, "-o", "markdown"), code: ExitProblems},
		{golden: "plan-certs.md", args: with(certs, "-o", "markdown"), code: ExitProblems},
		{golden: "plan-stricter.md", args: with(stricter, "-o", "markdown"), code: ExitOK},
		{golden: "plan-stricter-fail.md", args: with(stricter, "-o", "markdown", "--fail-on", "stricter"), code: ExitProblems},
		{golden: "plan-self.md", args: []string{"plan", "-f", planFile("widgets-new.yaml"), "--old-file", planFile("widgets-new.yaml"), "-o", "markdown"}, code: ExitOK},
		{golden: "versions-all-files.md", args: append([]string{"versions", "--all", "-o", "markdown"}, fileArgs(versionsFiles)...), code: ExitOK},
		{golden: "versions-all-release.md", args: []string{"versions", "--all", "-o", "markdown", "-f", releaseFile + "," + td("crds", "widget.yaml")}, code: ExitOK},
	})
}

// TestMarkdownUsage: -o markdown is for reports a pull request comment can hold.
func TestMarkdownUsage(t *testing.T) {
	for _, args := range [][]string{
		{"versions", "-f", crontabFile, "-o", "markdown"},
		{"plan", "-f", planFile("widgets-new.yaml"), "--old-file", planFile("widgets-old.yaml"), "-o", "markdown", "--no-headers"},
		{"explain", "-f", crontabFile, "-o", "markdown"},
	} {
		r := run(t, "", args...)
		if r.code != ExitUsage || !strings.HasPrefix(r.stderr, "error: ") {
			t.Errorf("%v: exit %d, stderr %q; want exit 2 with one error line", args, r.code, r.stderr)
		}
	}
}

// doctorSample is a doctor report with each severity, an incomplete check and a CRD without
// findings (doctor's own tests run it against the API server; this is the printer's input).
func doctorSample() *doctor.Report {
	return &doctor.Report{
		KubernetesVersion: "1.37",
		Items: []doctor.Item{
			{CRD: "clean.example.com"},
			{CRD: "crontabs.stable.example.com", Findings: []doctor.Finding{
				{Check: doctor.CheckStorage, Severity: doctor.SeverityError, Message: "storedVersions lists v1beta1 | v1: a migration is pending", Fix: "kubectl crdver migrate crontabs.stable.example.com --to v1"},
				{Check: doctor.CheckSchema, Severity: doctor.SeverityInfo, Message: "v1 has 3 CEL rules\nwithin the cost limit"},
			}},
			{CRD: "widgets.example.com", Findings: []doctor.Finding{
				{Check: doctor.CheckWebhook, Severity: doctor.SeverityWarning, Message: "the serving certificate expires in 10 days", Fix: "renew the certificate of service widgets/conv"},
			}},
		},
		Summary: doctor.Summary{CRDs: 3, Errors: 1, Warnings: 1, Infos: 1, Incomplete: []doctor.Incomplete{{CRD: "gadgets.example.com", Check: doctor.CheckWebhook, Error: "timed out"}}},
	}
}

func TestMarkdownDoctorGolden(t *testing.T) {
	var b bytes.Buffer
	if err := (markdownPrinter{}).PrintReport(&b, printers.Doctor(doctorSample())); err != nil {
		t.Fatal(err)
	}
	golden(t, "doctor.md", b.String())
}

// TestPlanBadObjectsFile: a malformed --objects file is bad input (exit 2, one error line naming
// the file and document), not a failure to complete.
func TestPlanBadObjectsFile(t *testing.T) {
	bad := filepath.Join(t.TempDir(), "objects.yaml")
	if err := os.WriteFile(bad, []byte("apiVersion: plan.example.com/v1\nkind: Widget\nmetadata: [unclosed\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r := run(t, "", "plan", "-f", planFile("widgets-new.yaml"), "--old-file", planFile("widgets-old.yaml"), "--objects", bad, "-o", "markdown")
	if r.code != ExitUsage || !strings.Contains(r.stderr, "objects.yaml (document 1): malformed YAML") {
		t.Errorf("exit %d, stderr %q; want exit 2 naming objects.yaml (document 1)", r.code, r.stderr)
	}
}

// TestOutputErrorOffersWhatWorks: every format the -o error offers without a condition works in
// the form of the command that got the error, for one CRD and for --all (versions takes -o
// markdown with --all only, and -o wide for one CRD only: the error says so).
func TestOutputErrorOffersWhatWorks(t *testing.T) {
	for _, base := range [][]string{
		{"versions", "-f", crontabFile},
		{"versions", "--all", "-f", crontabFile},
	} {
		r := run(t, "", append(append([]string{}, base...), "-o", "nonsense")...)
		_, offered, ok := strings.Cut(strings.TrimSpace(r.stderr), "use one of ")
		if r.code != ExitUsage || !ok {
			t.Fatalf("%v -o nonsense: exit %d, %q", base, r.code, r.stderr)
		}
		for _, f := range strings.Split(offered, ", ") {
			name, _, conditional := strings.Cut(f, " (")
			if conditional { // for another form of the command
				continue
			}
			if got := run(t, "", append(append([]string{}, base...), "-o", name)...); got.code != ExitOK {
				t.Errorf("%v -o %s: exit %d (%s), but the -o error offers it", base, name, got.code, strings.TrimSpace(got.stderr))
			}
		}
	}
}
