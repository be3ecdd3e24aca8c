package upgrade

import (
	"fmt"
	"slices"
	"strings"

	"github.com/crdver/kubectl-crdver/plan"
)

// HopPreflight is what the objects would suffer at one hop of the path, as plan judges them
// there before any write: at the first hop as they are, at each later hop as the hops before
// leave them (their consented losses gone; plan.Path). The first hop's upgrade checks its
// objects again, deeper (the preflight package's dry runs), before its first write.
type HopPreflight struct {
	Hop     int    `json:"hop"`
	Release string `json:"release"`
	Preflight
	// Refusals are the finding kinds of this hop the consent given does not override.
	Refusals []plan.Kind `json:"refusals"`
}

// pathPreflight judges every hop of p from plan's findings with consent c.
func pathPreflight(p *plan.PathReport, c plan.Consent) []HopPreflight {
	out := []HopPreflight{}
	for _, h := range p.Hops {
		hp := HopPreflight{Hop: h.Index, Release: h.Release, Refusals: []plan.Kind{}}
		hp.Preflight = Preflight{DataLoss: []ObjectFinding{}, Rejected: []ObjectFinding{}, Unknown: []string{}, BlockedCRDs: []string{}, InvalidOnRecreate: []ObjectFinding{}}
		if h.Plan != nil {
			for i := range h.Plan.Items {
				planFindings(&h.Plan.Items[i], h.Plan.Runbook, &hp.Preflight)
			}
			for _, s := range h.Plan.Runbook {
				if s.Action == plan.ActionFixCRDs {
					hp.BlockedCRDs = append(hp.BlockedCRDs, s.CRDs...)
				}
			}
		}
		if r := c.Refusals(hp.Kinds()); r != nil {
			hp.Refusals = r
		}
		out = append(out, hp)
	}
	return out
}

// reason says why the hop refuses, one clause per kind, naming the objects and the option
// that goes on.
func (hp HopPreflight) reason() string {
	var why []string
	for _, k := range hp.Refusals {
		var what string
		switch k {
		case plan.KindApplyRejected:
			what = fmt.Sprintf("the API server would reject %s (see the plan's apply errors)", strings.Join(hp.BlockedCRDs, ", "))
		case plan.KindConversionWebhook:
			what = conversionRefusal(hp.Conversion)
		case plan.KindDataLoss, plan.KindUnknown:
			what = fmt.Sprintf("%s would lose fields: %s", countObjects(len(hp.DataLoss)), findingList(hp.DataLoss, true))
		case plan.KindRejectedWrite:
			what = fmt.Sprintf("%s would be rejected on their next write: %s", countObjects(len(hp.Rejected)), findingList(hp.Rejected, false))
		case plan.KindTypeMismatch:
			what = fmt.Sprintf("%s hold values whose type does not fit the storage version's typed schema: %s", countObjects(len(hp.TypeMismatch)), findingList(hp.TypeMismatch, false))
		default:
			what = string(k)
		}
		if f := plan.OverrideFlag(k); f != "" {
			what += " (" + f + " goes on)"
		}
		why = append(why, what)
	}
	return fmt.Sprintf("hop %d (%s): %s", hp.Hop, hp.Release, strings.Join(why, "; "))
}

// findingList names the objects (at most 5) with their fields or first error.
func findingList(fs []ObjectFinding, fields bool) string {
	var out []string
	for i, f := range fs {
		if i == 5 {
			out = append(out, fmt.Sprintf("and %d more", len(fs)-5))
			break
		}
		n := f.CRD + " " + f.Name
		if f.Namespace != "" {
			n = f.CRD + " " + f.Namespace + "/" + f.Name
		}
		switch {
		case fields && len(f.Fields) > 0:
			n += " (" + strings.Join(f.Fields, ", ") + ")"
		case !fields && len(f.Errors) > 0:
			n += " (" + f.Errors[0] + ")"
		}
		out = append(out, n)
	}
	return strings.Join(out, ", ")
}

// pathRefusal is the path's refusal before any write, "" when none: every hop's refusals, when
// a hop after the first refuses or any hop's CRDs would be rejected (the first hop's other
// refusals are its upgrade's, which checks its objects deeper before its first write).
func pathRefusal(hps []HopPreflight) string {
	refuse := false
	var why []string
	for i, hp := range hps {
		if len(hp.Refusals) == 0 {
			continue
		}
		if i > 0 || slices.Contains(hp.Refusals, plan.KindApplyRejected) {
			refuse = true
		}
		why = append(why, hp.reason())
	}
	if !refuse {
		return ""
	}
	return "the path's preflight (every hop, each object as the hops before leave it): " + strings.Join(why, "; ")
}
