package plan

import (
	"fmt"
	"strings"

	"github.com/crdver/kubectl-crdver/outcome"
)

// Outcome is how a plan of r ended, by the decision table (docs/decision-table.md): its exit
// code (ExitCode) and, when the user must act, the CRDs by verdict in the table's words
// (failOnStricter: stricter rules for new objects count too).
func (r *Report) Outcome(failOnStricter bool) outcome.Outcome {
	if r.ExitCode(failOnStricter) == 0 {
		return outcome.Done()
	}
	byVerdict := map[string][]string{}
	for _, it := range r.Items {
		if ExitCode(it.Verdict, failOnStricter) != 0 {
			byVerdict[it.Verdict] = append(byVerdict[it.Verdict], it.CRD)
		}
	}
	var parts []string
	if n := append(byVerdict[VerdictBreaking], byVerdict[VerdictUnknown]...); len(n) > 0 {
		parts = append(parts, "applying would break, or the plan cannot tell: "+strings.Join(n, ", "))
	}
	if n := byVerdict[VerdictInvalidOnRecreate]; len(n) > 0 {
		parts = append(parts, "objects are invalid on re-create (the release applies; fix them, the runbook says how): "+strings.Join(n, ", "))
	}
	if n := byVerdict[VerdictStricter]; len(n) > 0 {
		parts = append(parts, "applying makes rules stricter for new objects (--fail-on stricter): "+strings.Join(n, ", "))
	}
	out := outcome.New(outcome.Findings, "%s (see above)", strings.Join(parts, "; "))
	out.ExitCode = r.ExitCode(failOnStricter) // the decision table's
	return out
}

// Outcome is how plan of the path ended: its exit code (ExitCode) and the line that ends the
// run: the verdict when the target is not reachable, else what to do before each hop and the
// findings of each hop whose plan exits 1.
func (r *PathReport) Outcome() outcome.Outcome {
	if r.ExitCode == 0 {
		return outcome.Done()
	}
	if !r.Reachable {
		return outcome.New(outcome.Findings, "%s", r.Verdict)
	}
	var why []string
	for i := range r.Hops {
		h := &r.Hops[i]
		if in := h.Instruction(); in != "" {
			why = append(why, fmt.Sprintf("before hop %d (%s): %s", h.Index, h.Release, in))
		}
		if h.Plan != nil && h.Plan.ExitCode(false) != 0 {
			why = append(why, fmt.Sprintf("hop %d (%s): %s", h.Index, h.Release, h.Plan.Outcome(false).Message))
		}
	}
	return outcome.New(outcome.Findings, "%s", strings.Join(why, "; "))
}
