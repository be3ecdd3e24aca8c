package printers

import (
	"bytes"
	"slices"
	"strings"
	"testing"

	"github.com/crdver/kubectl-crdver/plan"
	"github.com/crdver/kubectl-crdver/upgrade"
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

// The path's preflight: one row per object and finding, with its hop and whether it refuses.
func TestPathPreflightPrinter(t *testing.T) {
	hops := []upgrade.HopPreflight{
		{Hop: 1, Release: "v0.2.0"},
		{Hop: 2, Release: "v0.3.0", Refusals: []plan.Kind{plan.KindDataLoss}, Preflight: upgrade.Preflight{
			DataLoss:          []upgrade.ObjectFinding{{CRD: "widgets.example.com", Namespace: "default", Name: "w-legacy", Fields: []string{"spec.legacy"}}},
			InvalidOnRecreate: []upgrade.ObjectFinding{{CRD: "widgets.example.com", Namespace: "default", Name: "w-odd", Errors: []string{"spec.size: Invalid value: 300: must be <= 100"}}},
		}},
	}
	var b bytes.Buffer
	if err := PathPreflight(&b, hops, false); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	if len(lines) < 4 {
		t.Fatalf("want a heading, a header and 2 rows:\n%s", b.String())
	}
	for i, want := range [][]string{
		{"HOP", "RELEASE", "OBJECT", "FINDING", "REFUSES", "DETAIL"},
		{"2", "v0.3.0", "widgets.example.com", "default/w-legacy", "data-loss", "yes", "spec.legacy"},
		{"2", "v0.3.0", "widgets.example.com", "default/w-odd", "invalid-on-recreate", "no", "spec.size:"},
	} {
		if got := strings.Fields(lines[i+1]); !slices.Equal(got[:len(want)-1], want[:len(want)-1]) || !strings.Contains(lines[i+1], want[len(want)-1]) {
			t.Errorf("line %d: %q, want %q", i+2, lines[i+1], want)
		}
	}
	b.Reset()
	if err := PathPreflight(&b, hops[:1], false); err != nil || b.Len() != 0 {
		t.Errorf("nothing found: printed %q (%v)", b.String(), err)
	}
}

// upgrade status along a path: the hops and their one checkpoint, the hop it is at, what a
// person must do first, before the hop's own status (its steps, in the same checkpoint).
func TestUpgradeStatusPath(t *testing.T) {
	st := &upgrade.Status{Checkpoint: "/tmp/cp.json", Found: true, Done: []string{"backup|widgets.example.com||"}, Next: upgrade.NextContinue,
		CRDs:    []upgrade.StatusCRD{{CRD: "widgets.example.com", Exists: true, StorageVersion: "v2", StoredVersions: []string{"v2"}, Extra: []string{"v1"}}},
		Command: "kubectl crdver upgrade -f v0.3.0/ --via v0.2.0/ --yes",
		Path: &upgrade.PathStatus{Checkpoint: "/tmp/cp.json", Found: true, Hops: []string{"v0.2.0", "v0.3.0"}, Hop: 2, Release: "v0.3.0", HopCheckpoint: "/tmp/cp.json",
			Instruction: "before hop 2 (v0.3.0): deploy its operator"}}
	var b bytes.Buffer
	if err := UpgradeStatus(st).PrintHuman(&b, Human{}); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{
		"path: v0.2.0 → v0.3.0 (checkpoint /tmp/cp.json)\nhop: 2 of 2, v0.3.0 (its steps below)\nwaiting: before hop 2 (v0.3.0): deploy its operator\n",
		"checkpoint: /tmp/cp.json: the recorded run stopped before its end; 1 steps done\n  done: backup widgets.example.com",
		"next: run the same command again to continue\n  kubectl crdver upgrade -f v0.3.0/ --via v0.2.0/ --yes",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("missing %q in:\n%s", want, out)
		}
	}
	if strings.Index(out, "path:") > strings.Index(out, "CRD") {
		t.Errorf("the path comes first:\n%s", out)
	}
	st.Path = &upgrade.PathStatus{Checkpoint: "/tmp/cp.json", Found: true, Hops: []string{"v0.2.0", "v0.3.0"}, Complete: true}
	b.Reset()
	if err := UpgradeStatus(st).PrintHuman(&b, Human{}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "hop: every hop applied; the release below is the last") {
		t.Errorf("complete path:\n%s", b.String())
	}
}
