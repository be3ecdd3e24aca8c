// Package outcome is how a run of a command ended: its kind (and so its exit code, the same
// for every command: DESIGN.md), the line that ends the run and what is left for the user.
// Every library that carries out a command (migrate, migrate.All, retire, restore, convert,
// plan, upgrade) fills one at the end of its run; package plugin prints it and exits with its
// code, deciding nothing itself.
package outcome

import (
	"errors"
	"fmt"
)

// Kind is how a run ended.
type Kind string

// Kinds of an end, with their exit codes (docs/exit-codes.md).
const (
	// OK: the run did what it was asked, nothing is left (exit 0).
	OK Kind = "ok"
	// Findings: the run found what the user must act on, or refused on it (exit 1).
	Findings Kind = "findings"
	// Usage: the input (arguments, flags, files) is wrong (exit 2).
	Usage Kind = "usage"
	// Incomplete: the run could not complete: the cluster or a webhook unreachable, forbidden,
	// not confirmed, interrupted (exit 3).
	Incomplete Kind = "incomplete"
)

// kinds are the kinds by exit code.
var kinds = []Kind{OK, Findings, Usage, Incomplete}

// ExitCode is the process exit code of a run that ended as k.
func (k Kind) ExitCode() int {
	for code, x := range kinds {
		if x == k {
			return code
		}
	}
	return Incomplete.ExitCode() // not a kind: the run cannot say it completed
}

// Outcome is how a run ended. Its JSON form is part of upgrade's report (outcome.remaining,
// exitCode, message).
type Outcome struct {
	// Remaining: what the user must still do, one sentence each, with the command to see it.
	Remaining []string `json:"remaining"`
	// ExitCode is the command's exit status: its Kind's code.
	ExitCode int `json:"exitCode"`
	// Message is the line that ends the run ("" when nothing needs saying: the report said it).
	Message string `json:"message"`
}

// New is the outcome of kind k ending with the line format, args.
func New(k Kind, format string, args ...any) Outcome {
	return Outcome{ExitCode: k.ExitCode(), Message: fmt.Sprintf(format, args...), Remaining: []string{}}
}

// Done is the outcome of a run that did what it was asked (exit 0, no last line).
func Done() Outcome { return Outcome{Remaining: []string{}} }

// Kind is how the run ended, from its exit code.
func (o Outcome) Kind() Kind {
	if o.ExitCode >= 0 && o.ExitCode < len(kinds) {
		return kinds[o.ExitCode]
	}
	return Incomplete
}

// Error is an error that ends a run with its outcome: what a library or a caller's hook
// returns to stop a run with a given kind and line (a preflight's refusal, values left for a
// person), and what the library running the command then reports as its outcome (Of).
type Error struct {
	Outcome Outcome
	// Err is the error it wraps (nil for none): errors.Is and errors.As see it.
	Err error
}

func (e *Error) Error() string { return e.Outcome.Message }
func (e *Error) Unwrap() error { return e.Err }

// Errorf is an *Error of kind k with the line format, args.
func Errorf(k Kind, format string, args ...any) error {
	return &Error{Outcome: New(k, format, args...)}
}

// Wrap is err as an *Error of kind k: its line is err's.
func Wrap(k Kind, err error) error {
	return &Error{Outcome: New(k, "%v", err), Err: err}
}

// Of is the outcome err carries (an *Error in its chain), if it carries one.
func Of(err error) (Outcome, bool) {
	var e *Error
	if errors.As(err, &e) {
		return e.Outcome, true
	}
	return Outcome{}, false
}

// OfError is the outcome of a run that err stopped: the one err carries, else kind k (the
// library's judgement of its own error) with err as the line.
func OfError(err error, k Kind) Outcome {
	if o, ok := Of(err); ok {
		return o
	}
	return New(k, "%v", err)
}
