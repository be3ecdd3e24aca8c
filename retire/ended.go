package retire

import (
	"errors"
	"strings"

	"github.com/crdver/kubectl-crdver/migrate"
	"github.com/crdver/kubectl-crdver/outcome"
)

// end is how Run ended, by its error or, when it ran to its end, by its result: a refusal of
// PreWrite (its *outcome.Error), the arguments (ErrUsage: usage), anything else that stopped
// it (could not complete: not confirmed, interrupted, the cluster, the rewrite's
// StorageVersionMigration left running: detached); a dry run says it all in its plan; what
// keeps the version from being dropped safely is for the user to act on.
func end(o Options, res *Result, err error) outcome.Outcome {
	var de *migrate.DetachedError
	switch {
	case errors.As(err, &de):
		return de.Outcome("goes on with the steps after it")
	case err != nil:
		if out, ok := outcome.Of(err); ok {
			out.Message = o.CRD + ": " + out.Message
			return out
		}
		if errors.Is(err, ErrUsage) {
			return outcome.New(outcome.Usage, "%v", err)
		}
		return outcome.New(outcome.Incomplete, "%v", err)
	case res.DryRun:
		return outcome.Done()
	case len(res.Problems) > 0:
		return outcome.New(outcome.Findings, "%s: %s cannot be dropped safely yet: %s", o.CRD, o.Version, strings.Join(res.Problems, "; "))
	}
	return outcome.Done()
}
