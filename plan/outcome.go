package plan

import (
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
