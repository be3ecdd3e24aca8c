package convert

// bisect.go: when the webhook fails a request as a whole, smaller requests find the objects
// to blame, as a fuzzer's minimizer does.

import (
	"context"
)

// DefaultBisectRequests bounds the extra requests of a run's bisections.
const DefaultBisectRequests = 64

// Bisection is the search for the objects that make the webhook fail a request as a whole.
type Bisection struct {
	Request   string `json:"request"`   // the request that failed, e.g. "request #1 (40 objects)"
	Direction string `json:"direction"` // e.g. "v1beta1 -> v1"
	Check     string `json:"check"`     // how it failed: http-status or result-status
	// Objects are the minimal failing objects: each fails a request on its own, or (when two
	// halves only fail together) the smallest group found that fails.
	Objects []string `json:"objects"`
	// Detail is what the webhook answered for the first of them.
	Detail string `json:"detail"`
	// Requests is the number of extra requests sent.
	Requests int `json:"requests"`
	// Complete is false when the request budget, an interrupt or an unreachable webhook
	// stopped the search: Objects is then the smallest failing set found so far.
	Complete bool `json:"complete"`

	// Culprits are the failing objects as they were given (for --keep).
	Culprits []FailedObject `json:"-"`
}

// bisectable: the whole-request failures that may depend on the objects sent.
func bisectable(check string) bool {
	return check == CheckHTTPStatus || check == CheckResultStatus
}

// bisect splits the items of x in halves and sends each half again, recursing into the halves
// that fail, until single objects (or a group whose halves pass alone) are left. It sends at
// most r.bisectLeft requests in all, one at a time, and stops when ctx is done.
func (r *runner) bisect(ctx context.Context, x *exchange) Bisection {
	b := Bisection{Request: batchName(x), Direction: x.from + " -> " + x.to, Check: x.whole.Check, Complete: true, Objects: []string{}}
	blame := func(set []*item, detail string) {
		if b.Detail == "" {
			b.Detail = detail
		}
		for _, it := range set {
			b.Objects = append(b.Objects, it.source)
			b.Culprits = append(b.Culprits, FailedObject{Source: it.source, Object: it.inputObject()})
		}
	}
	var search func(set []*item, detail string)
	search = func(set []*item, detail string) {
		if len(set) == 1 || !b.Complete {
			blame(set, detail)
			return
		}
		halves := [2][]*item{set[:len(set)/2], set[len(set)/2:]}
		var failing [2]*Finding
		for h, half := range halves {
			if ctx.Err() != nil || r.stop || r.bisectLeft <= 0 {
				b.Complete = false
				break
			}
			r.bisectLeft--
			b.Requests++
			f, ok := r.try(ctx, half, x.to, x.from)
			if !ok {
				b.Complete = false
				break
			}
			failing[h] = f
		}
		if failing[0] == nil && failing[1] == nil {
			// Neither half fails alone (or the search stopped): the set is the smallest found.
			blame(set, detail)
			return
		}
		for h, f := range failing {
			if f != nil {
				search(halves[h], f.Detail)
			}
		}
	}
	search(x.items, x.whole.Detail)
	return b
}

// try sends items in one request and runs the whole-request checks. ok is false when no
// answer came (unreachable, timeout, interrupted); f is the failure, nil when the request
// passed as a whole.
func (r *runner) try(ctx context.Context, items []*item, to, from string) (f *Finding, ok bool) {
	x := r.post(ctx, items, to, from)
	if x.err != nil || x.buildErr != nil {
		return nil, false
	}
	_, f = r.checkRequest(x, newTally())
	if f != nil && !bisectable(f.Check) {
		// A failure of another kind (malformed answer, wrong uid): not the one searched for.
		return nil, false
	}
	return f, true
}
