package plan

import (
	"fmt"
	"strings"

	"github.com/crdver/kubectl-crdver/outcome"
	"github.com/crdver/kubectl-crdver/preflight"
)

// Refusal is how a rewrite ends that reps' findings refuse with consent c (migrate, migrate
// --all, retire): an *outcome.Error of kind Findings whose line lists what would be lost or
// rejected and, per finding, what to do, with cmd (the command line to run again) and the
// flag that consents; nil when c allows every finding.
func (c Consent) Refusal(reps []*preflight.Report, cmd string) error {
	of := func(names []string) string {
		if len(reps) == 1 {
			return ""
		}
		return " of " + strings.Join(names, ", ")
	}
	var losing, rejecting, unknown, owning []string
	var lost, rejected, owners int64
	for _, r := range reps {
		for _, k := range c.Refusals(PreflightKinds(r)) {
			switch k {
			case KindDataLoss:
				losing = append(losing, r.CRD)
				lost += r.LossCount
			case KindUnknown:
				unknown = append(unknown, r.CRD)
			case KindOwnershipLoss:
				owning = append(owning, r.CRD)
				owners += r.OwnershipLossCount
			case KindRejectedWrite:
				rejecting = append(rejecting, r.CRD)
				rejected += r.RejectedCount
			}
		}
	}
	if len(losing)+len(rejecting)+len(unknown)+len(owning) == 0 {
		return nil
	}
	var what, then []string
	if lost > 0 {
		what = append(what, fmt.Sprintf("%s%s would lose fields", plural(int(lost), "object"), of(losing)))
		then = append(then, "back up and convert them as said above, or accept the loss with "+cmd+" "+OverrideFlag(KindDataLoss))
	}
	if len(unknown) > 0 {
		what = append(what, fmt.Sprintf("what the rewrite%s loses is unknown", of(unknown)))
		if lost == 0 {
			then = append(then, "make it evaluable as said above, or accept the risk with "+cmd+" "+OverrideFlag(KindUnknown))
		}
	}
	if rejected > 0 {
		what = append(what, fmt.Sprintf("%s%s would be rejected by the rewrite", plural(int(rejected), "object"), of(rejecting)))
		then = append(then, "fix them as said above, or leave them unrewritten with "+cmd+" "+OverrideFlag(KindRejectedWrite)+" (status.storedVersions then keeps the old versions)")
	}
	if owners > 0 {
		what = append(what, fmt.Sprintf("%s%s would lose field managers (their managedFields entries) through the rewrite", plural(int(owners), "object"), of(owning)))
		then = append(then, "fix what the API server cannot type as said above, or accept that those managers lose their ownership with "+cmd+" "+OverrideFlag(KindOwnershipLoss)+" ("+OverrideFlag(KindDataLoss)+" does not)")
	}
	return outcome.Errorf(outcome.Findings, "refusing before any write: %s (listed above); nothing was written: %s",
		strings.Join(what, "; "), strings.Join(then, "; "))
}
