package plugin

import (
	"bytes"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/crdver/kubectl-crdver/doctor"
	"github.com/crdver/kubectl-crdver/plan"
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
	if err := (markdownPrinter{}).PrintReport(&b, doctorSample()); err != nil {
		t.Fatal(err)
	}
	golden(t, "doctor.md", b.String())
}

// bigPlan is a breaking plan of one CRD whose n objects each have a finding.
func bigPlan(n int) *plan.Report {
	it := plan.Item{CRD: "widgets.example.com", Operation: plan.OperationUpdate, Verdict: plan.VerdictBreaking, Breaking: true,
		Apply: plan.Apply{Allowed: true}, BreakingReasons: []string{fmt.Sprintf("%d objects lose data on read", n)}}
	it.StorageVersion = plan.StorageChange{Before: "v1", After: "v2"}
	it.Objects.Total, it.Objects.Evaluated = int64(n), int64(n)
	for i := 0; i < n; i++ {
		it.Objects.Findings = append(it.Objects.Findings, plan.Finding{Namespace: "default", Name: fmt.Sprintf("widget-%05d", i), PrunedOnRead: []string{"spec.size", "spec.color"}})
	}
	r := &plan.Report{Items: []plan.Item{it}}
	r.Summarize()
	return r
}

// TestMarkdownCap: a plan too long for one comment is cut to GitHub's limit: the verdict and
// the reasons stay, the findings table stops, every <details> is closed, and the comment says
// how many lines were cut.
func TestMarkdownCap(t *testing.T) {
	for _, n := range []int{10, 5000} {
		var b bytes.Buffer
		if err := (markdownPrinter{}).PrintReport(&b, bigPlan(n)); err != nil {
			t.Fatal(err)
		}
		out := b.String()
		if len(out) > markdownLimit {
			t.Errorf("%d findings: %d bytes, over the %d limit", n, len(out), markdownLimit)
		}
		if !strings.HasPrefix(out, "## kubectl crdver plan: **breaking**") {
			t.Errorf("%d findings: the verdict is not first:\n%.200s", n, out)
		}
		mustContain(t, "comment", out, fmt.Sprintf("%d objects lose data on read", n))
		if o, c := strings.Count(out, "<details>"), strings.Count(out, "</details>"); o != c || o == 0 {
			t.Errorf("%d findings: %d <details> and %d </details>", n, o, c)
		}
		rows := strings.Count(out, "| pruned on read |")
		cut := strings.Contains(out, "lines cut to keep this comment within GitHub's 65,536-character limit")
		switch {
		case n == 10 && (rows != 20 || cut):
			t.Errorf("10 findings: %d rows (want 20), cut note %v", rows, cut)
		case n == 5000 && (rows >= 10000 || !cut):
			t.Errorf("5000 findings: %d rows, cut note %v; want fewer than 10000 and the note", rows, cut)
		}
		if n == 5000 {
			var shown int
			fmt.Sscanf(out[strings.LastIndex(out, "\n_")+2:], "%d", &shown)
			if shown+rows < 10000 {
				t.Errorf("5000 findings: %d rows shown + %d cut < 10000 rows", rows, shown)
			}
		}
	}
}

// TestMarkdownRendersEveryFindingKind: every list of an object's finding and every *Reasons
// list of a plan item appears in the comment, found by reflection over the report's types: a
// kind added to the report is printed without a change to the printer (and this test covers
// it without a change either).
func TestMarkdownRendersEveryFindingKind(t *testing.T) {
	it := plan.Item{CRD: "x.example.com", Operation: plan.OperationUpdate, Verdict: plan.VerdictBreaking, Apply: plan.Apply{Allowed: true}}
	f := plan.Finding{Name: "obj"}
	var want []string
	fill := func(v reflect.Value, keep func(string) bool) {
		for i := 0; i < v.NumField(); i++ {
			field := v.Type().Field(i)
			key, _, _ := strings.Cut(field.Tag.Get("json"), ",")
			if !field.IsExported() || field.Type.Kind() != reflect.Slice || field.Type.Elem().Kind() != reflect.String || !keep(key) {
				continue
			}
			marker := "marker-" + key
			s := reflect.MakeSlice(field.Type, 1, 1)
			s.Index(0).SetString(marker)
			v.Field(i).Set(s)
			want = append(want, marker)
		}
	}
	fill(reflect.ValueOf(&it).Elem(), func(k string) bool { return strings.HasSuffix(k, "Reasons") })
	fill(reflect.ValueOf(&f).Elem(), func(k string) bool { return k != "kinds" })
	it.Objects.Findings = []plan.Finding{f}
	r := &plan.Report{Items: []plan.Item{it}}
	r.Summarize()
	var b bytes.Buffer
	if err := (markdownPrinter{}).PrintReport(&b, r); err != nil {
		t.Fatal(err)
	}
	if len(want) < 6 {
		t.Fatalf("found %d lists to fill, want the reasons and the finding kinds", len(want))
	}
	mustContain(t, "comment", b.String(), want...)
}
