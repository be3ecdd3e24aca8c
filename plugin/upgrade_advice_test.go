package plugin

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/crdver/kubectl-crdver/upgrade"
)

// TestUpgradeRefusalAdvice: a refusal names only the flags that would let the upgrade go on:
// --allow-data-loss for objects losing fields (or an unknown loss), --skip-invalid for
// rejected rewrites, neither for a CRD the API server would reject or for a preflight that
// could not complete (exit 3: no answer, which no flag accepts), none already given.
func TestUpgradeRefusalAdvice(t *testing.T) {
	loss := []upgrade.ObjectFinding{{CRD: "a", Name: "x", Fields: []string{"spec.f"}}}
	rejected := []upgrade.ObjectFinding{{CRD: "a", Name: "y", Errors: []string{"spec.size: Required value"}}}
	cases := []struct {
		name      string
		pf        upgrade.Preflight
		opts      func(*UpgradeOptions)
		code      int
		want, not []string
	}{
		{name: "loss", pf: upgrade.Preflight{DataLoss: loss}, code: ExitProblems, want: []string{"--allow-data-loss to go on anyway"}, not: []string{"--skip-invalid"}},
		{name: "unknown", pf: upgrade.Preflight{Unknown: []string{"a: webhook not reached"}}, code: ExitProblems, want: []string{"--allow-data-loss"}, not: []string{"--skip-invalid"}},
		{name: "rejected", pf: upgrade.Preflight{Rejected: rejected}, code: ExitProblems, want: []string{"(--skip-invalid to go on anyway)"}, not: []string{"--allow-data-loss"}},
		{name: "both", pf: upgrade.Preflight{DataLoss: loss, Rejected: rejected}, code: ExitProblems, want: []string{"--allow-data-loss, --skip-invalid"}},
		{name: "loss allowed, rejected", pf: upgrade.Preflight{DataLoss: loss, Rejected: rejected}, opts: func(o *UpgradeOptions) { o.AllowDataLoss = true }, code: ExitProblems, want: []string{"--skip-invalid"}, not: []string{"--allow-data-loss"}},
		{name: "blocked CRD", pf: upgrade.Preflight{BlockedCRDs: []string{"a"}, DataLoss: loss}, code: ExitProblems, not: []string{"--allow-data-loss", "--skip-invalid"}},
		{name: "could not complete", pf: upgrade.Preflight{Incomplete: true, Reason: "a: the preflight could not complete: listing a at v1beta1: the server could not find the requested resource"}, code: ExitUnavailable, want: []string{"run the same command again once the cause is fixed"}, not: []string{"--allow-data-loss", "--skip-invalid"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			o := &UpgradeOptions{}
			if c.opts != nil {
				c.opts(o)
			}
			c.pf.Refused = true
			if c.pf.Reason == "" {
				c.pf.Reason = "some reason"
			}
			rep := &upgrade.Report{Preflight: c.pf}
			err := o.runError(context.Background(), fmt.Errorf("%w: %s; nothing was written", upgrade.ErrRefused, c.pf.Reason), rep)
			if got := ExitCode(err); got != c.code {
				t.Errorf("exit %d, want %d (%v)", got, c.code, err)
			}
			line := ErrorLine(err)
			for _, w := range c.want {
				if !strings.Contains(line, w) {
					t.Errorf("%q lacks %q", line, w)
				}
			}
			for _, n := range c.not {
				if strings.Contains(line, n) {
					t.Errorf("%q names %q, which would not help", line, n)
				}
			}
		})
	}
}

// TestUpgradeCutOffAdvice: an upgrade cut off from the API server (the network, the server)
// says to run the same command again when something was written, in this run or an earlier
// one that this run resumed (its steps are then "already done", none "done"; the e2e flaky
// network test found the advice missing there), and only to check the connection when
// nothing was.
func TestUpgradeCutOffAdvice(t *testing.T) {
	cut := fmt.Errorf(`removing the conversion webhook of issuers.cert-manager.io: Patch "https://127.0.0.1:1/apis": unexpected EOF`)
	step := func(state string) upgrade.StepResult { return upgrade.StepResult{State: state} }
	cases := []struct {
		name   string
		rep    *upgrade.Report
		resume bool
	}{
		{name: "a step done in this run", rep: &upgrade.Report{Steps: []upgrade.StepResult{step(upgrade.StateDone), step(upgrade.StatePending)}}, resume: true},
		{name: "resumed, steps already done", rep: &upgrade.Report{Resumed: true, Steps: []upgrade.StepResult{step(upgrade.StateAlready), step(upgrade.StatePending)}}, resume: true},
		{name: "steps found done in the live state", rep: &upgrade.Report{Steps: []upgrade.StepResult{step(upgrade.StateAlready), step(upgrade.StatePending)}}, resume: true},
		{name: "nothing written", rep: &upgrade.Report{Steps: []upgrade.StepResult{step(upgrade.StatePending)}}},
		{name: "no report", rep: nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := (&UpgradeOptions{}).runError(context.Background(), cut, c.rep)
			line := ErrorLine(err)
			if got := ExitCode(err); got != ExitUnavailable {
				t.Errorf("exit %d, want %d (%s)", got, ExitUnavailable, line)
			}
			if got := strings.Contains(line, "run the same command again to resume"); got != c.resume {
				t.Errorf("says to run the same command again: %v, want %v: %s", got, c.resume, line)
			}
		})
	}
}
