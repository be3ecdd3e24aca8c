package convert

import (
	"context"
	"fmt"
	"strings"

	"github.com/crdver/kubectl-crdver/outcome"
)

// Ended is how a conversion run that produced r ended (ctx its context): interrupted or the
// webhook unreachable (could not complete), a failed check, or a warning with strict (findings
// for the user).
func (r *Report) Ended(ctx context.Context, strict bool) outcome.Outcome {
	errs, warns := r.Problems(), r.Warnings()
	switch {
	case ctx.Err() != nil:
		return outcome.New(outcome.Incomplete, "%s: interrupted after %d objects: nothing was written", r.CRD, r.Objects)
	case r.Unreachable != "":
		return outcome.New(outcome.Incomplete, "%s: cannot reach the conversion webhook: %s", r.CRD, r.Unreachable)
	case errs > 0:
		return outcome.New(outcome.Findings, "%s: %d failed check(s), %d warning(s) converting to %s", r.CRD, errs, warns, r.To)
	case warns > 0 && strict:
		return outcome.New(outcome.Findings, "%s: %d warning(s) converting to %s, and --strict makes warnings fail", r.CRD, warns, r.To)
	}
	return outcome.Done()
}

// Ended is how a run of Write or Check that produced r ended (ctx its context): interrupted
// or a conversion webhook unreachable (could not complete), files not converted, or, for
// Check, files still to convert (findings for the user).
func (r *WriteReport) Ended(ctx context.Context) outcome.Outcome {
	crd, why := r.Unreachable()
	n := r.Problems()
	switch {
	case ctx.Err() != nil && r.InterruptedListing != "":
		return outcome.New(outcome.Incomplete, "interrupted while the result of %s was printed: that file was done, the files after it were left as they were", r.InterruptedListing)
	case ctx.Err() != nil && r.Interrupted != "":
		return outcome.New(outcome.Incomplete, "interrupted: %s was left as it was", r.Interrupted)
	case ctx.Err() != nil:
		return outcome.New(outcome.Incomplete, "interrupted after every file was done: the report above may be cut short")
	case why != "":
		return outcome.New(outcome.Incomplete, "%s: cannot reach the conversion webhook: %s: the files with its objects from there on were not written (listed above); rerun when it answers", crd, why)
	case n > 0 && r.Mode == "check":
		return outcome.New(outcome.Findings, "%s: %d file(s) with objects still at a version other than their target: convert them with --write", r.CRD, n)
	case n > 0:
		return outcome.New(outcome.Findings, "%s: %d file(s) not converted (listed above); nothing in them was changed", r.CRD, n)
	}
	return outcome.Done()
}

// Ended is how a load run that produced r ended: the webhook unreachable (could not
// complete), or a size over the API server's budget (findings).
func (r *LoadReport) Ended() outcome.Outcome {
	switch {
	case r.Unreachable != "":
		return outcome.New(outcome.Incomplete, "%s: cannot reach the conversion webhook: %s", r.CRD, r.Unreachable)
	case r.Over():
		var over []string
		for _, s := range r.Sizes {
			if s.Verdict == VerdictOver || s.Verdict == VerdictFailed {
				over = append(over, fmt.Sprintf("%d object(s) %s", s.Objects, s.Verdict))
			}
		}
		return outcome.New(outcome.Findings, "%s: the conversion webhook does not meet the API server's budget: %s", r.CRD, strings.Join(over, ", "))
	}
	return outcome.Done()
}
