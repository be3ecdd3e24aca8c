package plugin

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/crdver/kubectl-crdver/outcome"
)

// Exit codes, the same for every command (docs/exit-codes.md): those of the outcome kinds.
var (
	ExitOK          = outcome.OK.ExitCode()         // all good
	ExitProblems    = outcome.Findings.ExitCode()   // the check ran and found problems
	ExitUsage       = outcome.Usage.ExitCode()      // bad flags, arguments or input files
	ExitUnavailable = outcome.Incomplete.ExitCode() // could not complete: cluster or webhook unreachable, forbidden, interrupted
)

// end is how a command whose library ran ends: with the library's outcome out, its exit code
// and its last line (nil for exit 0). line, when not nil, words the library's error with this
// command's flags (advice); the exit code is out's all the same. Commands whose library fills
// an outcome (migrate, migrate --all, retire, restore, convert, plan, upgrade) decide no exit
// code of their own after it ran (TestOneHomeForTheExitCode).
func end(out outcome.Outcome, line error) error {
	if out.ExitCode == ExitOK {
		return nil
	}
	if line == nil {
		line = errors.New(out.Message)
	}
	return &ExitError{Code: out.ExitCode, Err: line}
}

// ExitError carries the exit code for an error. Code 1 errors usually follow a report that has
// already been printed; their message is a one-line summary.
type ExitError struct {
	Code int
	Err  error
}

func (e *ExitError) Error() string { return e.Err.Error() }
func (e *ExitError) Unwrap() error { return e.Err }

// UsageErrorf reports bad input (flags, arguments, files): exit code 2.
func UsageErrorf(format string, args ...any) error {
	return &ExitError{Code: ExitUsage, Err: fmt.Errorf(format, args...)}
}

// Usage marks err as bad input: exit code 2.
func Usage(err error) error {
	if err == nil {
		return nil
	}
	return &ExitError{Code: ExitUsage, Err: err}
}

// ProblemsFound reports that a check found problems: exit code 1.
func ProblemsFound(format string, args ...any) error {
	return &ExitError{Code: ExitProblems, Err: fmt.Errorf(format, args...)}
}

// Unavailable marks err as "could not complete": exit code 3.
func Unavailable(err error) error {
	if err == nil {
		return nil
	}
	return &ExitError{Code: ExitUnavailable, Err: err}
}

// ExitCode maps an error returned by the root command to the process exit code.
func ExitCode(err error) int {
	if err == nil {
		return ExitOK
	}
	var ee *ExitError
	if errors.As(err, &ee) {
		return ee.Code
	}
	// Every command's own errors carry a code (see runE), so this is one of cobra's: an
	// unknown command or flag, or the wrong number of arguments.
	return ExitUsage
}

// ErrorLine renders err as the one line printed on stderr, kubectl style: "error: ...".
func ErrorLine(err error) string {
	msg := strings.TrimSpace(err.Error())
	// cobra's suggestions come as "...\n\nDid you mean this?\n\tversions\n\tversion\n".
	if i := strings.Index(msg, "\n\nDid you mean this?\n"); i >= 0 {
		var names []string
		for _, n := range strings.Fields(msg[i+len("\n\nDid you mean this?\n"):]) {
			names = append(names, strconv.Quote(n))
		}
		msg = msg[:i]
		if len(names) > 0 {
			msg += "; did you mean " + strings.Join(names, " or ") + "?"
		}
	}
	var parts []string
	for _, line := range strings.Split(msg, "\n") {
		if line = strings.TrimSpace(line); line != "" {
			parts = append(parts, line)
		}
	}
	return "error: " + strings.Join(parts, "; ")
}

// clusterError turns an error from talking to the API server into one that says what to do
// (clusterText), with exit code 3.
func clusterError(what string, err error) error {
	return Unavailable(clusterText(what, err))
}

// clusterText words an error from talking to the API server: what failed and what to do.
func clusterText(what string, err error) error {
	switch {
	case err == nil:
		return nil
	case apierrors.IsForbidden(err):
		return fmt.Errorf("%s: %s (check your RBAC rights, or --as)", what, statusMessage(err))
	case apierrors.IsUnauthorized(err):
		return fmt.Errorf("%s: unauthorized: check your credentials for this context (kubectl auth whoami)", what)
	case errors.Is(err, context.DeadlineExceeded), apierrors.IsTimeout(err), apierrors.IsServerTimeout(err):
		return fmt.Errorf("%s: timed out talking to the API server: %w", what, err)
	}
	var ue *url.Error
	var ne net.Error
	if errors.As(err, &ue) || errors.As(err, &ne) {
		return fmt.Errorf("%s: cannot reach the API server: %w (check --kubeconfig and --context)", what, err)
	}
	return fmt.Errorf("%s: %w", what, err)
}

func statusMessage(err error) string {
	var s apierrors.APIStatus
	if errors.As(err, &s) {
		return s.Status().Message
	}
	return err.Error()
}

func isNotFound(err error) bool { return apierrors.IsNotFound(err) }
