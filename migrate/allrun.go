package migrate

import (
	"context"
	"errors"
	"fmt"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	ended "github.com/crdver/kubectl-crdver/outcome"
)

// StepRefused is the step of All.Run at which its Refuse hook refused the run (nothing was
// written).
const StepRefused Step = "refused"

// AllReport is what a migration of every pending CRD did, F what All.PreWrite finds for a CRD
// (package preflight's report for the command). Its JSON form is the -o json|yaml output of
// `kubectl crdver migrate --all`: fields may be added, never renamed or removed.
type AllReport[F any] struct {
	Plans       []*Plan   `json:"plans"`
	DryRun      bool      `json:"dryRun"`
	Items       []AllItem `json:"items"`
	Interrupted bool      `json:"interrupted"`
	// Preflight is what All.PreWrite found for each pending CRD, in the plans' order, before
	// anything was written (nil without it).
	Preflight []F `json:"preflight,omitempty"`

	// CRDs is how many CRDs Run was given (the pending ones are among them).
	CRDs int `json:"-"`
	// Objects is how many objects the plans count.
	Objects int64 `json:"-"`
	// Outcome is how the run ended (set by Run, also when it returns an error).
	Outcome AllOutcome `json:"-"`
}

// AllOutcome is how a run of All ended: the worst outcome of its CRDs, and the run's outcome
// (its exit code and last line).
type AllOutcome struct {
	// Worst is the worst outcome of the items (OutcomeDone when none ran).
	Worst string
	// NotDone lists the CRDs that did not end done, as "name (outcome)", in the plans' order.
	NotDone []string
	// ManagersLost lists the CRDs whose rewrite dropped field managers without consent
	// (All.OwnershipLossConsented), as "name (N objects)".
	ManagersLost []string
	// Outcome: exit 0 every pending CRD done, nothing pending, or a dry run; 1 refused before
	// any write (Refuse's line), objects failed, a trim not safe, field managers lost without
	// consent; 3 could not complete (planning, the preflight, your rights, not confirmed, a
	// CRD failed, interrupted).
	ended.Outcome
}

// All migrates every CRD whose status.storedVersions lists a version other than its storage
// version, with the safety rules of Migrator over the whole set:
//
//  1. the pending CRDs are planned (each at its storage version), then Planned is called
//     (also on a dry run and when nothing is pending);
//  2. every pending CRD is checked (PreWrite) before anything is written, and one refusal
//     (Refuse, over all of them) stops the whole run;
//  3. nothing is written on a dry run, nor before your rights on every CRD are checked, nor
//     before Confirm says yes;
//  4. the CRDs are migrated one after another (RunAll): a CRD that fails does not stop the
//     others, a cancelled context does; each resumes from its own checkpoint.
//
// Run returns the report even when it stops early; the error says which step stopped it (a
// *StepError: StepPlan, StepPreWrite, StepRefused, StepAccess, StepConfirm). How the run ended
// is in Report.Outcome either way. F is what PreWrite finds for a CRD (package preflight's
// report for the command).
type All[F any] struct {
	Clients *Clients
	// DryRun stops after the preflight: nothing is written.
	DryRun bool
	// NoTrim leaves status.storedVersions as they are after the rewrites.
	NoTrim bool
	// Rewrite is the budget of the whole run (see AllOptions.Rewrite); Rewrite.ChunkSize is
	// also the page size of the plans' counts.
	Rewrite RewriteOptions
	// Checkpoint gives the checkpoint file of a CRD (nil: DefaultCheckpointPath).
	Checkpoint func(crd string) (string, error)

	// Planned is called with the report holding the plans, before anything is written.
	Planned func(r *AllReport[F])
	// PreWrite, when set, is called for each pending CRD after Planned, before anything is
	// written: a check of what rewriting its objects at its storage version would lose or be
	// refused (package preflight). What it returns is kept in Report.Preflight; an error stops
	// the run (StepPreWrite).
	PreWrite func(ctx context.Context, crd *apiextensionsv1.CustomResourceDefinition) (F, error)
	// Refuse, when set, is called with what PreWrite found for every pending CRD: an error
	// refuses the whole run before anything is written (StepRefused), also on a dry run.
	Refuse func(found []F) error
	// Confirm is asked before the first write; false stops the run with ErrNotConfirmed. nil
	// means yes.
	Confirm func(ctx context.Context, r *AllReport[F]) (bool, error)
	// Progress is called when the rewrites start, with the number of objects planned and the
	// live counts of every CRD so far; the function it returns is called when they end.
	Progress func(total int64, counts func() Counts) (stop func())
	// OwnershipLossConsented says whether the field managers an item's rewrite dropped were
	// consented to (found is what PreWrite returned for that CRD, F's zero value without it).
	// nil: never.
	OwnershipLossConsented func(item AllItem, found F) bool
}

// Run migrates every pending CRD among crds (the cluster's CRDs, as read by the caller; each
// is read again before its rewrite).
func (a *All[F]) Run(ctx context.Context, crds []*apiextensionsv1.CustomResourceDefinition) (*AllReport[F], error) {
	rep, err := a.run(ctx, crds)
	rep.Outcome = a.outcome(rep, err)
	return rep, err
}

func (a *All[F]) run(ctx context.Context, crds []*apiextensionsv1.CustomResourceDefinition) (*AllReport[F], error) {
	c := a.Clients
	trim := !a.NoTrim
	rep := &AllReport[F]{Plans: []*Plan{}, DryRun: a.DryRun, Items: []AllItem{}, CRDs: len(crds)}
	pending := Pending(crds)
	for _, crd := range pending {
		p, err := BuildPlan(ctx, c, crd, "", a.Rewrite.ChunkSize, trim)
		if err != nil {
			return rep, &StepError{Step: StepPlan, CRD: crd.Name, Err: err}
		}
		rep.Plans = append(rep.Plans, p)
		rep.Objects += p.Objects
	}
	if a.Planned != nil {
		a.Planned(rep)
	}
	if a.PreWrite != nil {
		for _, crd := range pending {
			found, err := a.PreWrite(ctx, crd)
			if err != nil {
				return rep, &StepError{Step: StepPreWrite, CRD: crd.Name, Err: err}
			}
			rep.Preflight = append(rep.Preflight, found)
		}
	}
	if a.Refuse != nil {
		if err := a.Refuse(rep.Preflight); err != nil {
			return rep, &StepError{Step: StepRefused, Err: err}
		}
	}
	if a.DryRun || len(rep.Plans) == 0 {
		return rep, nil
	}

	var needed []Access
	for _, crd := range pending {
		needed = append(needed, NeededAccess(crd, false, trim)...)
	}
	if err := CheckAccess(ctx, c, needed); err != nil {
		return rep, &StepError{Step: StepAccess, Err: err}
	}
	if a.Confirm != nil {
		ok, err := a.Confirm(ctx, rep)
		if err != nil {
			return rep, &StepError{Step: StepConfirm, Err: err}
		}
		if !ok {
			return rep, &StepError{Step: StepConfirm, Err: ErrNotConfirmed}
		}
	}

	progress := &AllProgress{}
	stop := func() {}
	if a.Progress != nil {
		stop = a.Progress(rep.Objects, progress.Progress)
	}
	res := RunAll(ctx, c, rep.Plans, AllOptions{Rewrite: a.Rewrite, Checkpoint: a.Checkpoint, Trim: trim, OnRewrite: progress.Start})
	stop()
	rep.Items, rep.Interrupted = res.Items, res.Interrupted
	return rep, nil
}

// outcome sorts how the run ended: by the error that stopped it, else by its items.
func (a *All[F]) outcome(rep *AllReport[F], err error) AllOutcome {
	out := AllOutcome{Worst: OutcomeDone, Outcome: ended.Done()}
	if err != nil {
		kind := ended.Incomplete
		var se *StepError
		if errors.As(err, &se) && se.Step == StepRefused {
			kind = ended.Findings // Refuse's line, with its kind when it carries one
		}
		out.Outcome = ended.OfError(err, kind)
		return out
	}
	for i, it := range rep.Items {
		var found F
		if i < len(rep.Preflight) {
			found = rep.Preflight[i]
		}
		if it.Result != nil && it.Result.ManagedFieldsLost > 0 && (a.OwnershipLossConsented == nil || !a.OwnershipLossConsented(it, found)) {
			out.ManagersLost = append(out.ManagersLost, fmt.Sprintf("%s (%d objects)", it.CRD, it.Result.ManagedFieldsLost))
		}
		if it.Outcome != OutcomeDone {
			out.NotDone = append(out.NotDone, it.CRD+" ("+it.Outcome+")")
		}
		if allRank(it.Outcome) > allRank(out.Worst) {
			out.Worst = it.Outcome
		}
	}
	notDone := strings.Join(out.NotDone, ", ")
	switch {
	case rep.Interrupted:
		out.Outcome = ended.New(ended.Incomplete, "interrupted: %s; progress is saved per CRD: run kubectl crdver migrate --all again to resume", notDone)
	case allRank(out.Worst) == 2:
		out.Outcome = ended.New(ended.Incomplete, "some migrations could not complete: %s (see the summary)", notDone)
	case out.Worst == OutcomeProblems:
		out.Outcome = ended.New(ended.Findings, "some migrations found problems: %s (see the summary)", notDone)
	case len(out.ManagersLost) > 0:
		out.Outcome = ended.New(ended.Findings, "objects lost field managers through their rewrite: %s (-o json lists them); re-apply them from their source to restore ownership", strings.Join(out.ManagersLost, ", "))
	}
	return out
}

// allRank orders the outcomes for the exit code: done, problems, then the ones that could not
// complete (failed, interrupted, not run).
func allRank(outcome string) int {
	switch outcome {
	case OutcomeDone:
		return 0
	case OutcomeProblems:
		return 1
	}
	return 2
}
