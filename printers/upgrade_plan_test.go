package printers

import (
	"bytes"
	"strings"
	"testing"

	"github.com/crdver/kubectl-crdver/outcome"
	"github.com/crdver/kubectl-crdver/plan"
	"github.com/crdver/kubectl-crdver/upgrade"
)

// TestUpgradePlanSaysWhatEachDoes: the upgrade's table says, per CRD, what a plain apply of
// the release does and what the upgrade does, so that it agrees with the exit status: a CRD a
// plain apply breaks is carried out (exit 0), refused for the kinds that refuse the run
// (exit 1), or stopped with the release when another CRD refuses it.
func TestUpgradePlanSaysWhatEachDoes(t *testing.T) {
	items := func() *plan.Report {
		return &plan.Report{Items: []plan.Item{
			{CRD: "gateways.example.com", Operation: "update", Verdict: plan.VerdictBreaking},
			{CRD: "routes.example.com", Operation: "update", Verdict: plan.VerdictBreaking},
			{CRD: "grants.example.com", Operation: "create", Verdict: plan.VerdictSafe},
		}}
	}
	loss := []upgrade.ObjectFinding{{CRD: "routes.example.com", Namespace: "default", Name: "r", Fields: []string{"spec.x"}}}
	for _, c := range []struct {
		name string
		rep  *upgrade.Report
		want map[string]string // CRD -> the end of its row
	}{
		{"carried out", &upgrade.Report{Plan: items(), Preflight: upgrade.Preflight{BlockedCRDs: []string{}}, Outcome: upgrade.Outcome{Result: upgrade.ResultDryRun}},
			map[string]string{"gateways.example.com": "breaks        carries it out", "routes.example.com": "breaks        carries it out", "grants.example.com": "safe          carries it out"}},
		{"refused", &upgrade.Report{Plan: items(), Preflight: upgrade.Preflight{DataLoss: loss, Refused: true},
			Outcome: upgrade.Outcome{Result: upgrade.ResultRefused, Outcome: outcome.Outcome{ExitCode: 1}, Refusals: []plan.Kind{plan.KindDataLoss}}},
			map[string]string{"gateways.example.com": "breaks        refused with the release", "routes.example.com": "breaks        refuses: data-loss", "grants.example.com": "safe          refused with the release"}},
		{"loss accepted", &upgrade.Report{Plan: items(), Preflight: upgrade.Preflight{DataLoss: loss}, Outcome: upgrade.Outcome{Result: upgrade.ResultDryRun}},
			map[string]string{"routes.example.com": "breaks        carries it out"}},
		{"objects left", &upgrade.Report{Plan: items(), Preflight: upgrade.Preflight{InvalidOnRecreate: loss}, Outcome: upgrade.Outcome{Result: upgrade.ResultDryRun, Outcome: outcome.Outcome{ExitCode: 1}}},
			map[string]string{"routes.example.com": "breaks        carries it out; objects left to you"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			var b bytes.Buffer
			if err := printUpgradePlan(&b, c.rep, false); err != nil {
				t.Fatal(err)
			}
			lines := strings.Split(b.String(), "\n")
			if !strings.HasSuffix(strings.TrimSpace(lines[0]), "PLAIN APPLY   UPGRADE") {
				t.Errorf("header %q", lines[0])
			}
			for crd, end := range c.want {
				found := false
				for _, l := range lines {
					if strings.HasPrefix(l, crd+" ") {
						found = true
						if !strings.HasSuffix(strings.TrimRight(l, " "), end) {
							t.Errorf("row of %s:\n%s\nwant it to end with %q", crd, l, end)
						}
					}
				}
				if !found {
					t.Errorf("no row for %s:\n%s", crd, b.String())
				}
			}
		})
	}
}
