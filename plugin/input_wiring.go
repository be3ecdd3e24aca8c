package plugin

import (
	"context"
	"errors"
	"io"

	"github.com/crdver/kubectl-crdver/manifest"
)

// Reading input documents is package manifest's; this file wires it to the commands: the
// types under their plugin names, and manifest's typed errors turned into exit codes and worded
// with the flags (-f, -R).

type (
	// Document is one input document (manifest.Document).
	Document = manifest.Document
	// InputOptions tune how documents are read (manifest.Options).
	InputOptions = manifest.Options
	// InputProgress counts what has been read (manifest.Progress).
	InputProgress = manifest.Progress
)

// EachDocument is manifest.EachDocument with its errors given exit codes and flag wording; an
// error of fn is returned as it is.
func EachDocument(ctx context.Context, paths []string, opts InputOptions, fn func(Document) error) error {
	return inputError(manifest.EachDocument(ctx, paths, opts, fn))
}

// ReadDocuments is manifest.ReadDocuments with its errors given exit codes and flag wording.
func ReadDocuments(paths []string, stdin io.Reader) ([]Document, error) {
	docs, err := manifest.ReadDocuments(paths, stdin)
	return docs, inputError(err)
}

// Interrupted is the error of a command stopped by Ctrl-C or SIGTERM: exit 3.
func Interrupted(ctx context.Context) error {
	return Unavailable(&manifest.InterruptedError{Cause: context.Cause(ctx)})
}

// inputError gives manifest's errors their exit code (2 for the input, 3 otherwise) and words
// the ones about flags; errors that already carry an exit code are returned as they are.
func inputError(err error) error {
	var (
		ee  *ExitError
		ed  *manifest.EmptyDirError
		ie  *manifest.InputError
		ue  *manifest.UnavailableError
		ire *manifest.InterruptedError
	)
	switch {
	case err == nil || errors.As(err, &ee):
		return err
	case errors.Is(err, manifest.ErrNoStdin):
		return UsageErrorf("-f -: no standard input")
	case errors.As(err, &ed) && !ed.Recursive:
		return UsageErrorf("%s: directory has no .yaml, .yml or .json files (-R reads its subdirectories)", ed.Path)
	case errors.As(err, &ie):
		return Usage(err)
	case errors.As(err, &ue), errors.As(err, &ire):
		return Unavailable(err)
	}
	return err
}
