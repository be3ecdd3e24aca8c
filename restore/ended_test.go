package restore

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/crdver/kubectl-crdver/manifest"
	"github.com/crdver/kubectl-crdver/outcome"
)

// TestEnded: how a restore ends, by what Run returned (pure logic; the runs themselves are
// tested on the real API server in plugin/restore_test.go).
func TestEnded(t *testing.T) {
	live, cancelled := context.Background(), func() context.Context {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		return ctx
	}()
	toWrite := &Report{DryRun: true, Counts: map[string]int{StateRestored: 2}}
	nothing := &Report{DryRun: true, Counts: map[string]int{StateUnchanged: 2}}
	left := &Report{Counts: map[string]int{StateConflict: 1, StateMissing: 2}, incomplete: 3}
	losses := &Report{DryRun: true, Counts: map[string]int{StateRestored: 1}, LostOwnership: 1, losses: []Outcome{{Kind: "Widget", Name: "a"}}}
	for _, c := range []struct {
		name string
		ctx  context.Context
		o    Options
		rep  *Report
		err  error
		kind outcome.Kind
		line string
	}{
		{"restored", live, Options{}, &Report{Counts: map[string]int{StateRestored: 2}}, nil, outcome.OK, ""},
		{"not confirmed, nothing to write: the dry run is the answer", live, Options{}, nothing, ErrNotConfirmed, outcome.OK, ""},
		{"not confirmed", live, Options{}, toWrite, ErrNotConfirmed, outcome.Incomplete, "not confirmed"},
		{"objects left out", live, Options{}, left, nil, outcome.Findings, "the restore is not complete: 1 object changed since the backup (look at them; --force overwrites their fields); 2 objects deleted since the backup (--recreate"},
		{"field managers dropped: refused", live, Options{}, losses, &OwnershipLossError{Objects: losses.losses}, outcome.Findings, "drop the field managers"},
		{"field managers dropped: dry run", live, Options{DryRun: true}, losses, nil, outcome.Findings, "the restore refuses this without --allow-ownership-loss"},
		{"field managers dropped: dry run, accepted", live, Options{DryRun: true, AllowOwnershipLoss: true}, losses, nil, outcome.OK, ""},
		{"another cluster", live, Options{}, nil, &OtherClusterError{File: "b.yaml"}, outcome.Findings, ""},
		{"a bad backup", live, Options{}, nil, &manifest.InputError{Err: errors.New("b.yaml: not YAML")}, outcome.Usage, "not YAML"},
		{"a bad backup read when interrupted", cancelled, Options{}, nil, &manifest.InputError{Err: context.Canceled}, outcome.Incomplete, ""},
		{"the cluster", live, Options{}, toWrite, fmt.Errorf("listing: %w", errors.New("connection refused")), outcome.Incomplete, "connection refused"},
	} {
		out := c.o.Ended(c.ctx, c.rep, c.err)
		if out.Kind() != c.kind || !strings.Contains(out.Message, c.line) || (c.kind == outcome.OK) != (out.Message == "") {
			t.Errorf("%s: %+v, want %s with %q", c.name, out, c.kind, c.line)
		}
	}
}
