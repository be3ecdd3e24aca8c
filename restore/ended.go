package restore

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/crdver/kubectl-crdver/manifest"
	"github.com/crdver/kubectl-crdver/outcome"
)

// Ended is how a Run with these options ended (ctx its context, rep and err what it returned):
// a refusal before the first write (field managers the writes would drop, a backup of another
// cluster: findings), not confirmed with something to write, interrupted, the cluster
// (could not complete), a backup that cannot be read as one (usage); when it ran to its end (or
// was not confirmed with nothing to write: the dry run is the answer), what of the backup is
// not in the cluster, and a dry run's writes that would drop field managers without consent,
// are for the user to act on.
func (o Options) Ended(ctx context.Context, rep *Report, err error) outcome.Outcome {
	var oe *OwnershipLossError
	switch {
	case errors.Is(err, ErrNotConfirmed) && rep != nil && rep.Writes() == 0:
		err = nil // nothing to write: the dry run is the answer
	case errors.As(err, &oe), errors.Is(err, ErrOtherCluster):
		return outcome.New(outcome.Findings, "%v", err)
	case errors.Is(err, ErrNotConfirmed), ctx.Err() != nil && err != nil:
		return outcome.New(outcome.Incomplete, "%v", err)
	case errors.As(err, new(*manifest.InputError)):
		return outcome.New(outcome.Usage, "%v", err)
	case err != nil:
		return outcome.New(outcome.Incomplete, "%v", err)
	}
	if n := rep.Incomplete(); n > 0 {
		return outcome.New(outcome.Findings, "%s", notComplete(rep))
	}
	if rep.LostOwnership > 0 && o.DryRun && !o.AllowOwnershipLoss {
		return outcome.New(outcome.Findings, "%v (listed above); the restore refuses this without --allow-ownership-loss: re-apply them from each manager's source afterwards, or fix what the API server cannot type first", &OwnershipLossError{Objects: rep.OwnershipLosses(), Count: rep.LostOwnership})
	}
	return outcome.Done()
}

// notComplete says what of the backup the restore leaves out of the cluster, and what to do.
func notComplete(rep *Report) string {
	var parts []string
	for _, left := range []struct {
		n    int
		what string
	}{
		{rep.Counts[StateConflict], "changed since the backup (look at them; --force overwrites their fields)"},
		{rep.Counts[StateMissing], "deleted since the backup (--recreate re-creates them)"},
		{rep.NotHeldObjects, "with fields no served version holds (apply a release whose CRDs hold them, e.g. kubectl crdver upgrade -f OLD-RELEASE, then restore again)"},
		{rep.Counts[StateFailed], "failed (reasons above)"},
	} {
		switch {
		case left.n == 1:
			parts = append(parts, "1 object "+left.what)
		case left.n > 1:
			parts = append(parts, fmt.Sprintf("%d objects %s", left.n, left.what))
		}
	}
	what := "the restore is not complete"
	if rep.DryRun {
		what = "the restore would not be complete"
	}
	return what + ": " + strings.Join(parts, "; ")
}
