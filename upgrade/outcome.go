package upgrade

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/crdver/kubectl-crdver/migrate"
	"github.com/crdver/kubectl-crdver/outcome"
	"github.com/crdver/kubectl-crdver/plan"
)

// Run plans the release, preflights it and, unless DryRun or refused, carries out its runbook.
// The error says what stopped the run (ErrRefused, ErrNotConfirmed, ErrInterrupted, access,
// the cluster); what keeps the release from being complete is in Report.Problems, and how the
// run ended — by the decision table (plan.Decisions) — in Report.Outcome.
func Run(ctx context.Context, c *migrate.Clients, o Options) (*Report, error) {
	before := c.Retries()
	rep, err := runUpgrade(ctx, c, o)
	if rep != nil {
		rep.Retries = c.Retries() - before
		if rep.Preflight.InvalidOnRecreate == nil {
			rep.Preflight.InvalidOnRecreate = []ObjectFinding{}
		}
		rep.Outcome = decide(rep, err, o)
	}
	return rep, err
}

// invalidOnRecreate lists, before the first write, the objects the release's CRDs reject on
// re-create although their writes are accepted: not a reason to refuse (decision table), but
// what the user is told now and again at the end.
func (r *runner) invalidOnRecreate() {
	pf := &r.rep.Preflight
	pf.InvalidOnRecreate = []ObjectFinding{}
	for i := range r.items {
		it := &r.items[i]
		for _, f := range it.Objects.Findings {
			if f.InvalidOnRecreate() {
				pf.InvalidOnRecreate = append(pf.InvalidOnRecreate, ObjectFinding{CRD: it.CRD, Namespace: f.Namespace, Name: f.Name, Errors: f.RecreateErrors()})
			}
		}
	}
}

// recreateDetail is what the upgrade says of the runbook's step for objects invalid on
// re-create: it is the user's, before or after the apply.
func (r *runner) recreateDetail(s *StepResult) string {
	n := 0
	for _, f := range r.rep.Preflight.InvalidOnRecreate {
		for _, c := range s.CRDs {
			if f.CRD == c {
				n++
			}
		}
	}
	return fmt.Sprintf("for you to do, before or after the apply: %s invalid on re-create (the upgrade goes on; listed at the end)", countObjects(n))
}

// verifyPlan sorts what plan of the same release finds after the apply, by the decision
// table: findings the upgrade leaves to the user (objects invalid on re-create, whether or
// not its preflight listed them) are what remains; any other finding that makes plan exit 1 is
// something this upgrade left undone.
func (r *runner) verifyPlan(v *Verify, after *plan.Report) {
	for _, it := range after.Items {
		undone := false
		for _, k := range it.Kinds {
			d := plan.DecisionFor(k)
			if d.Upgrade != plan.UpgradeLeavesToUser && d.PlanExit != 0 {
				undone = true
			}
		}
		if undone {
			v.PlanBreaking = append(v.PlanBreaking, it.CRD)
		}
		for _, f := range it.Objects.Findings {
			if !f.InvalidOnRecreate() {
				continue
			}
			of := ObjectFinding{CRD: it.CRD, Namespace: f.Namespace, Name: f.Name, Errors: f.RecreateErrors()}
			for _, p := range r.rep.Preflight.InvalidOnRecreate {
				if sameObject(p)(of) {
					of.ReportedInPreflight = true
				}
			}
			v.InvalidOnRecreate = append(v.InvalidOnRecreate, of)
		}
	}
	if len(v.PlanBreaking) > 0 {
		r.problem("plan of the same release still finds breaking changes for %s (kubectl crdver plan -f %s)", strings.Join(v.PlanBreaking, ", "), r.o.ApplyFile)
	}
}

// Consent is what the options consent to (AllowDataLoss, SkipInvalid, AllowOwnershipLoss):
// plan.Consent decides, by the decision table, which findings refuse the run.
func (o Options) Consent() plan.Consent {
	return plan.Consent{AllowDataLoss: o.AllowDataLoss, SkipInvalid: o.SkipInvalid, AllowOwnershipLoss: o.AllowOwnershipLoss, FixValues: o.FixValues}
}

// Kinds are the kinds of what the preflight found (decision table rows, most severe first),
// whether or not an option overrides them: o.Consent().Refusals(pf.Kinds()) are the ones
// that refuse a run with options o.
func (pf Preflight) Kinds() []plan.Kind {
	return pf.kinds(func(string) bool { return true }, pf.earlierLoss)
}

// KindsOf are the kinds of what the preflight found for the CRD crd (Kinds, for one CRD; a
// loss an earlier run found, which names no CRD, is not among them).
func (pf Preflight) KindsOf(crd string) []plan.Kind {
	return pf.kinds(func(c string) bool { return c == crd }, false)
}

// kinds are the kinds of the findings of the CRDs that of accepts.
func (pf Preflight) kinds(of func(crd string) bool, earlierLoss bool) []plan.Kind {
	has := func(fs []ObjectFinding) bool {
		return slices.ContainsFunc(fs, func(f ObjectFinding) bool { return of(f.CRD) })
	}
	found := map[plan.Kind]bool{
		plan.KindApplyRejected:     slices.ContainsFunc(pf.BlockedCRDs, of),
		plan.KindConversionWebhook: slices.ContainsFunc(pf.Conversion, func(c ConversionRefusal) bool { return of(c.CRD) }),
		plan.KindDataLoss:          has(pf.DataLoss) || earlierLoss,
		plan.KindRejectedWrite:     has(pf.Rejected),
		plan.KindTypeMismatch:      has(pf.TypeMismatch),
		plan.KindOwnershipLoss:     has(pf.OwnershipLoss),
		plan.KindUnknown: slices.ContainsFunc(pf.Unknown, func(u string) bool {
			crd, _, _ := strings.Cut(u, ": ")
			return of(crd)
		}),
		plan.KindInvalidOnRecreate: has(pf.InvalidOnRecreate),
	}
	var out []plan.Kind
	for _, d := range plan.Decisions() {
		if found[d.Kind] {
			out = append(out, d.Kind)
		}
	}
	return out
}

// decide is the outcome of a run by the decision table: the result, the exit status and the
// last line.
func decide(rep *Report, err error, o Options) Outcome {
	out := Outcome{Outcome: outcome.Done()}
	for _, s := range rep.Steps {
		if s.Action == plan.ActionApply && (s.State == StateDone || s.State == StateAlready) {
			out.Applied = true
		}
	}
	out.Verified = out.Applied && rep.Verify != nil && len(rep.Problems) == 0
	pf := rep.Preflight
	// What remains for the user: the objects invalid on re-create (verify's list once the
	// release is applied, the preflight's before).
	left := pf.InvalidOnRecreate
	if rep.Verify != nil {
		left = rep.Verify.InvalidOnRecreate
	}
	if len(left) > 0 {
		out.Remaining = append(out.Remaining, fmt.Sprintf("%s invalid on re-create (%s): writes are accepted, a re-create (a restore, a GitOps replace) is rejected; kubectl crdver plan -f %s lists them with the API server's errors and the runbook step that fixes them",
			countObjects(len(left)), objectNames(left), o.ApplyFile))
	}
	userExit := 0
	if len(left) > 0 {
		userExit = plan.DecisionFor(plan.KindInvalidOnRecreate).UpgradeExit
	}

	var de *migrate.DetachedError
	switch {
	case errors.As(err, &de):
		// Not done, not failed: the cluster rewrites; the same run started again goes on.
		d := de.Outcome("goes on with the next steps")
		out.Result, out.ExitCode, out.Message = ResultDetached, d.ExitCode, err.Error()
		out.Remaining = append(out.Remaining, d.Remaining...)
	case errors.Is(err, ErrRefused) && pf.Incomplete:
		// No answer, which no option accepts: could not complete (DESIGN.md), as --dry-run says.
		out.Result, out.ExitCode, out.Message = ResultRefused, 3, err.Error()
	case errors.Is(err, ErrRefused):
		out.Result, out.ExitCode = ResultRefused, 0
		for _, k := range o.Consent().Refusals(pf.Kinds()) {
			out.Refusals = append(out.Refusals, k)
			out.ExitCode = max(out.ExitCode, plan.DecisionFor(k).UpgradeExit)
		}
		if out.ExitCode == 0 {
			out.ExitCode = 1 // refused for a reason no override removes (the preflight could not complete)
		}
		out.Message = fmt.Sprintf("%v", err)
	case errors.Is(err, ErrValuesForPerson):
		// Stopped after the backup for a person (the runbook's fix-values step): running again
		// continues there.
		out.Result, out.ExitCode, out.Message = ResultNotApplied, 1, err.Error()
		out.Remaining = append(out.Remaining, err.Error())
	case err != nil:
		out.Result, out.ExitCode, out.Message = ResultStopped, 3, err.Error()
	case o.DryRun:
		out.Result = ResultDryRun
		switch {
		case pf.Refused && pf.Incomplete:
			out.ExitCode, out.Message = 3, fmt.Sprintf("the upgrade could not complete its preflight: %s (dry run: nothing was written)", pf.Reason)
		case len(pf.Unread) > 0 && len(pf.BlockedCRDs) == 0:
			// Versions stored but not served, which a dry run does not serve to read: what
			// their objects lose is unknown, a finding (exit 1, as --yes refuses on it).
			out.ExitCode, out.Message = 1, unreadDryRun(pf.Reason)
			out.Refusals = o.Consent().Refusals(pf.Kinds())
		case pf.Refused:
			out.ExitCode, out.Message = 1, fmt.Sprintf("the upgrade would be refused: %s (dry run: nothing was written)", pf.Reason)
			out.Refusals = o.Consent().Refusals(pf.Kinds())
		case valuesForPersonStep(rep) != "":
			out.Remaining = append(out.Remaining, valuesForPersonStep(rep))
			out.ExitCode, out.Message = 1, fmt.Sprintf("the upgrade would stop after the backup: %s (dry run: nothing was written)", valuesForPersonStep(rep))
		case len(left) > 0:
			out.ExitCode, out.Message = userExit, fmt.Sprintf("the upgrade would apply the release and leave %s to you (dry run: nothing was written)", strings.Join(out.Remaining, "; "))
		default:
			out.Message = "dry run: nothing was written"
		}
	case len(rep.Problems) > 0:
		out.Result, out.ExitCode = ResultNotComplete, 1
		state := "the release is not applied"
		if out.Applied {
			state = "the release is applied but not verified"
		}
		out.Message = fmt.Sprintf("the upgrade is not complete (%s): %s", state, strings.Join(rep.Problems, "; "))
	case !out.Applied:
		out.Result = ResultNotApplied
		out.Message = "the storage steps are done; the release was not applied by this command"
		for _, s := range rep.Steps {
			if (s.Action == plan.ActionApply || s.Action == plan.ActionToolApply) && s.Detail != "" {
				out.Message += ": " + s.Detail
			}
			// The apply left to the deployment tool that manages the CRDs (Helm, Flux, Argo
			// CD, OLM) is for the user to do: exit 1, as for anything else left (--no-apply
			// is asked for, and is not).
			if s.Action == plan.ActionToolApply && s.State == StateManual {
				out.ExitCode = 1
			}
		}
		if len(left) > 0 {
			out.ExitCode = max(out.ExitCode, userExit)
			out.Message += "; left for you: " + strings.Join(out.Remaining, "; ")
		}
	case len(left) > 0:
		out.Result, out.ExitCode = ResultAppliedRemaining, userExit
		out.Message = "the release is applied and verified; left for you: " + strings.Join(out.Remaining, "; ")
	default:
		out.Result, out.Message = ResultComplete, "Upgrade complete: the release is applied and verified."
	}
	return out
}

// objectNames names up to three objects (crd namespace/name) and counts the others.
func objectNames(fs []ObjectFinding) string {
	var names []string
	for i, f := range fs {
		if i == 3 {
			names = append(names, fmt.Sprintf("and %d more", len(fs)-3))
			break
		}
		n := f.Name
		if f.Namespace != "" {
			n = f.Namespace + "/" + n
		}
		names = append(names, f.CRD+" "+n)
	}
	return strings.Join(names, ", ")
}
