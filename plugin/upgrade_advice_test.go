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
