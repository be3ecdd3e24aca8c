package outcome

import (
	"errors"
	"fmt"
	"testing"
)

// The exit codes of DESIGN.md, one per kind: what every command exits with.
func TestKindExitCodes(t *testing.T) {
	for _, c := range []struct {
		kind Kind
		code int
	}{{OK, 0}, {Findings, 1}, {Usage, 2}, {Incomplete, 3}, {Kind("unheard-of"), 3}} {
		if got := c.kind.ExitCode(); got != c.code {
			t.Errorf("%s: exit code %d, want %d", c.kind, got, c.code)
		}
		out := New(c.kind, "line %d", 1)
		if out.ExitCode != c.code || out.Message != "line 1" || out.Remaining == nil {
			t.Errorf("New(%s): %+v", c.kind, out)
		}
		if c.kind != "unheard-of" && out.Kind() != c.kind {
			t.Errorf("New(%s).Kind() = %s", c.kind, out.Kind())
		}
	}
	if d := Done(); d.ExitCode != 0 || d.Kind() != OK || d.Message != "" {
		t.Errorf("Done() = %+v", d)
	}
}

// An outcome carried by an error survives wrapping; an error that carries none takes the
// kind its library judges it by, with its own words.
func TestOutcomeOfError(t *testing.T) {
	sentinel := errors.New("values to change first")
	refusal := Errorf(Findings, "refusing before any write: %d objects", 2)
	wrapped := Wrap(Findings, fmt.Errorf("%w: widgets", sentinel))
	for _, c := range []struct {
		name string
		err  error
		kind Kind
		line string
	}{
		{"refusal, wrapped by a step", fmt.Errorf("widgets: pre-write: %w", refusal), Findings, "refusing before any write: 2 objects"},
		{"a sentinel wrapped with its kind", fmt.Errorf("step: %w", wrapped), Findings, "values to change first: widgets"},
		{"no outcome", errors.New("connection refused"), Incomplete, "connection refused"},
	} {
		out := OfError(c.err, Incomplete)
		if out.Kind() != c.kind || out.Message != c.line {
			t.Errorf("%s: %+v, want %s %q", c.name, out, c.kind, c.line)
		}
	}
	if !errors.Is(wrapped, sentinel) {
		t.Errorf("Wrap hides the error it wraps from errors.Is")
	}
	if _, ok := Of(errors.New("plain")); ok {
		t.Errorf("Of found an outcome in a plain error")
	}
}
