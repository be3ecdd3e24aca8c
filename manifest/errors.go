package manifest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
)

// InputError is an input that is wrong: a path that does not exist, a malformed document, a
// document past the size limit, a URL its server refuses (4xx). Fixing the input fixes it.
type InputError struct{ Err error }

func (e *InputError) Error() string { return e.Err.Error() }
func (e *InputError) Unwrap() error { return e.Err }

// UnavailableError is an input that could not be read to the end for a reason outside it: a URL
// whose server does not answer in time, answers 5xx or cannot be reached.
type UnavailableError struct{ Err error }

func (e *UnavailableError) Error() string { return e.Err.Error() }
func (e *UnavailableError) Unwrap() error { return e.Err }

// InterruptedError is a read stopped because its context was done; Cause is the context's cause.
type InterruptedError struct{ Cause error }

func (e *InterruptedError) Error() string {
	if e.Cause == nil || errors.Is(e.Cause, context.Canceled) {
		return "interrupted"
	}
	return fmt.Sprintf("interrupted: %v", e.Cause)
}
func (e *InterruptedError) Unwrap() error { return e.Cause }

// ErrNoStdin is the error (inside an InputError) for the path "-" when Options.Stdin is nil.
var ErrNoStdin = errors.New("-: no standard input")

// EmptyDirError is a directory with no input files (.yaml, .yml, .json); Recursive says whether
// its subdirectories were searched.
type EmptyDirError struct {
	Path      string
	Recursive bool
}

func (e *EmptyDirError) Error() string {
	if !e.Recursive {
		return e.Path + ": directory has no .yaml, .yml or .json files (its subdirectories were not read)"
	}
	return e.Path + ": directory tree has no .yaml, .yml or .json files"
}

func inputErrorf(format string, args ...any) error {
	return &InputError{Err: fmt.Errorf(format, args...)}
}

func inputError(err error) error {
	if err == nil {
		return nil
	}
	return &InputError{Err: err}
}

func unavailable(err error) error {
	if err == nil {
		return nil
	}
	return &UnavailableError{Err: err}
}

func interrupted(ctx context.Context) error {
	return &InterruptedError{Cause: context.Cause(ctx)}
}

// classified is true for the errors this package words: they are returned as they are.
func classified(err error) bool {
	var ie *InputError
	var ue *UnavailableError
	return errors.As(err, &ie) || errors.As(err, &ue)
}

// notAnObject words a document that is not a YAML mapping (a list, a string, a number) without
// the decoder's Go types: where it is, what it is, and what was expected.
func notAnObject(where string, js []byte) error {
	what := "a scalar"
	switch t := bytes.TrimSpace(js); {
	case len(t) > 0 && t[0] == '[':
		what = "a YAML list"
	case len(t) > 0 && t[0] == '"':
		what = "a string"
	}
	return inputErrorf("%s: not a Kubernetes object: it is %s, want a mapping with apiVersion and kind", where, what)
}

// StripComments drops whole-line YAML comments, so that a document holding only comments is
// empty once trimmed.
func StripComments(b []byte) []byte { return stripComments(b) }

// YAMLErrorText is a YAML conversion error without the converter's prefix.
func YAMLErrorText(err error) string { return trimYAMLError(err) }

// PathErrorText is an *os.PathError's cause alone (the caller names the path).
func PathErrorText(err error) error { return unwrapPathError(err) }
