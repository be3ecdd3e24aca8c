package upgrade

import "github.com/crdver/kubectl-crdver/plan"

// PreflightTotals counts the objects of each list of a Preflight when more were found than the
// list holds: plan lists its first findings of a CRD (plan.DefaultMaxFindings) and counts
// them all, the preflight check lists its first ones (plan.DefaultMaxFindings) and counts
// them all, so that a release of a million objects keeps its memory. Where plan and the check
// both count objects of a CRD, the larger count is taken (they are mostly the same objects):
// a total is then "at least".
type PreflightTotals struct {
	DataLoss          int64 `json:"dataLoss"`
	Rejected          int64 `json:"rejected"`
	TypeMismatch      int64 `json:"typeMismatch"`
	OwnershipLoss     int64 `json:"ownershipLoss"`
	InvalidOnRecreate int64 `json:"invalidOnRecreate"`
}

// Count is the number of objects found with a finding of kind k: the list's length, or its
// total when the list holds fewer.
func (pf Preflight) Count(k plan.Kind) int {
	var list []ObjectFinding
	var total int64
	t := pf.Totals
	if t == nil {
		t = &PreflightTotals{}
	}
	switch k {
	case plan.KindDataLoss:
		list, total = pf.DataLoss, t.DataLoss
	case plan.KindRejectedWrite:
		list, total = pf.Rejected, t.Rejected
	case plan.KindTypeMismatch:
		list, total = pf.TypeMismatch, t.TypeMismatch
	case plan.KindOwnershipLoss:
		list, total = pf.OwnershipLoss, t.OwnershipLoss
	case plan.KindInvalidOnRecreate:
		list, total = pf.InvalidOnRecreate, t.InvalidOnRecreate
	}
	return max(len(list), int(total))
}

// countFound records what the preflight check of a CRD counted (its lists hold the first).
func (r *runner) countFound(crd string, k plan.Kind, n int64) {
	if r.checked == nil {
		r.checked = map[string]map[plan.Kind]int64{}
	}
	if r.checked[crd] == nil {
		r.checked[crd] = map[plan.Kind]int64{}
	}
	r.checked[crd][k] += n
}

// totals sets pf.Totals when a list holds fewer objects than plan or the check found (see
// PreflightTotals).
func (r *runner) totals() {
	pf := &r.rep.Preflight
	pf.Totals = nil
	found := map[plan.Kind]int64{}
	for i := range r.items {
		it := &r.items[i]
		per := map[plan.Kind]int64{
			plan.KindDataLoss:          it.LosingObjects(),
			plan.KindRejectedWrite:     it.CountObjects(plan.KindRejectedWrite),
			plan.KindTypeMismatch:      it.CountObjects(plan.KindTypeMismatch),
			plan.KindInvalidOnRecreate: it.CountObjects(plan.KindInvalidOnRecreate),
			plan.KindOwnershipLoss:     it.CountObjects(plan.KindOwnershipLoss),
		}
		for k, n := range r.checked[it.CRD] {
			per[k] = max(per[k], n)
		}
		for k, n := range per {
			found[k] += n
		}
	}
	t := &PreflightTotals{DataLoss: found[plan.KindDataLoss], Rejected: found[plan.KindRejectedWrite], TypeMismatch: found[plan.KindTypeMismatch],
		OwnershipLoss: found[plan.KindOwnershipLoss], InvalidOnRecreate: found[plan.KindInvalidOnRecreate]}
	if t.DataLoss > int64(len(pf.DataLoss)) || t.Rejected > int64(len(pf.Rejected)) || t.TypeMismatch > int64(len(pf.TypeMismatch)) ||
		t.OwnershipLoss > int64(len(pf.OwnershipLoss)) || t.InvalidOnRecreate > int64(len(pf.InvalidOnRecreate)) {
		pf.Totals = t
	}
}
