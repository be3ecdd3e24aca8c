package printers

import (
	"bytes"
	"strings"
	"testing"

	"github.com/crdver/kubectl-crdver/plan"
)

func pathReport() *plan.PathReport {
	return &plan.PathReport{Target: "v0.3.0", Reachable: true, Verdict: "2 hops to v0.3.0: hop 1 v0.2.0 first",
		CRDs: []plan.PathCRD{{CRD: "crontabs.path.example.com", StoredVersions: []string{"v1beta1"}, Via: []string{"v0.2.0"}, Reason: "the target's webhook does not know v1beta1"}},
		Hops: []plan.Hop{
			{Index: 1, Release: "v0.2.0", File: "v0.2.0/", CRDs: []string{"crontabs.path.example.com"}, Live: true,
				Plan:     &plan.Report{Summary: plan.Summary{Verdict: plan.VerdictSafe}, Runbook: []plan.RunbookStep{{Phase: "storage", Action: plan.ActionMigrate, Why: "rewrite at v1", Commands: []string{"kubectl crdver migrate crontabs.path.example.com"}}}},
				Rewrites: []plan.PathRewrite{{CRD: "crontabs.path.example.com", From: []string{"v1beta1"}, To: "v1", Conversion: "webhook service ops/conv:443/convert", Release: "v0.2.0", Checked: true, Problem: "HTTP 500"}}},
			{Index: 2, Release: "v0.3.0", File: "v0.3.0/", Plan: &plan.Report{Summary: plan.Summary{Verdict: plan.VerdictSafe}},
				Rewrites: []plan.PathRewrite{{CRD: "crontabs.path.example.com", From: []string{"v1"}, To: "v2", Conversion: "None", Release: "v0.3.0", Answers: true}}},
		}}
}

// A hop whose webhook did not answer is the person's first, with the instruction; every hop's
// runbook follows.
func TestPathPrinter(t *testing.T) {
	var b bytes.Buffer
	if err := Path(&b, pathReport(), false); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	flat := strings.Join(strings.Fields(out), " ") // the table and the lines are wrapped
	for _, want := range []string{"WHO DOES IT", "you (webhook), then crdver", "you (webhook), then crdver v1beta1 → v1",
		"Before hop 1 (v0.2.0): webhook service ops/conv:443/convert must convert crontabs.path.example.com from v1beta1 to v1, and now: HTTP 500; deploy release v0.2.0's operator",
		"Hop 1: v0.2.0 (kubectl crdver upgrade -f v0.2.0/):", "$ kubectl crdver migrate crontabs.path.example.com"} {
		if !strings.Contains(out, want) && !strings.Contains(flat, want) {
			t.Errorf("missing %q in:\n%s", want, out)
		}
	}
	if strings.Contains(out, "Before hop 2") {
		t.Errorf("hop 2 converts with None: nothing for a person:\n%s", out)
	}
	md := PathMarkdown(pathReport())
	for _, want := range []string{"| hop | release | CRDs | verdict | who does it | what happens |", "| 1 | v0.2.0 |", "**Before hop 1 (v0.2.0):**", "<details><summary>Hop 1: v0.2.0 runbook</summary>"} {
		if !strings.Contains(md, want) {
			t.Errorf("markdown: missing %q in:\n%s", want, md)
		}
	}
}
