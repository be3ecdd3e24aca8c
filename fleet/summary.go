package fleet

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/crdver/kubectl-crdver/doctor"
	"github.com/crdver/kubectl-crdver/explain"
	"github.com/crdver/kubectl-crdver/migrate"
	"github.com/crdver/kubectl-crdver/plan"
	"github.com/crdver/kubectl-crdver/upgrade"
)

// Kind is which command's report a cluster's run printed (-o json), so Summarize reads it as
// that report.
type Kind string

// The reports a fleet row is made from.
const (
	KindPlan          Kind = "plan"           // plan.Report
	KindPlanPath      Kind = "plan-path"      // plan.PathReport (plan --via/--releases)
	KindDoctor        Kind = "doctor"         // doctor.Report
	KindVersionsAll   Kind = "versions-all"   // versions --all: {"items": [explain.Summary]}
	KindUpgrade       Kind = "upgrade"        // upgrade.Report (upgrade, upgrade --dry-run)
	KindUpgradePath   Kind = "upgrade-path"   // upgrade.PathReport (upgrade --via/--releases)
	KindUpgradeStatus Kind = "upgrade-status" // upgrade.Status
	KindMigrateStatus Kind = "migrate-status" // migrate.Status
)

// What the clusters need (Row.Need): the report groups the clusters by it.
const (
	NeedInPlace    = "nothing: the release is in place"
	NeedUpgrade    = "the upgrade"
	NeedFixObjects = "objects fixed (invalid on re-create)"
	NeedUnknown    = "an answer the plan could not get (unknown)"
	NeedBreaking   = "a fix or a decision: something live breaks (breaking)"
	NeedNoPath     = "a release between it and the target (no path)"
	NeedNothing    = "nothing"
	NeedReachable  = "a cluster that answers (unreachable)"
	NeedRunAgain   = "a run that completes (run again)"
	NeedLook       = "a look at the failed run"
	NeedRollout    = "the rollout to go on (not started)"
)

// NeedPath is what a cluster needs that reaches the target through releases between: the
// releases before the target.
func NeedPath(via []string) string { return "the path through " + strings.Join(via, ", ") }

// Summarize fills row from the cluster's single run: what it printed with -o json (out, a
// report of kind k) and its exit status. A run that printed no report (it failed before one)
// keeps the row's Error as the caller set it (the run's error line).
func Summarize(row *Row, k Kind, exit int, out []byte) error {
	row.ExitCode = exit
	if len(strings.TrimSpace(string(out))) == 0 {
		if exit > 1 {
			row.State = StateFailed
		}
		return nil
	}
	var err error
	switch k {
	case KindPlan:
		err = read(out, func(r *plan.Report) { summarizePlan(row, r) })
	case KindPlanPath:
		err = read(out, func(r *plan.PathReport) { summarizePath(row, r) })
	case KindDoctor:
		err = read(out, func(r *doctor.Report) { summarizeDoctor(row, r) })
	case KindVersionsAll:
		err = read(out, func(r *struct {
			Items []explain.Summary `json:"items"`
		}) {
			summarizeVersions(row, r.Items)
		})
	case KindUpgrade:
		err = read(out, func(r *upgrade.Report) { summarizeUpgrade(row, r) })
	case KindUpgradePath:
		err = read(out, func(r *upgrade.PathReport) { summarizeUpgradePath(row, r) })
	case KindUpgradeStatus:
		err = read(out, func(r *upgrade.Status) { summarizeStatus(row, r) })
	case KindMigrateStatus:
		err = read(out, func(r *migrate.Status) { summarizeMigrateStatus(row, r) })
	default:
		err = fmt.Errorf("no summary for reports of kind %q", k)
	}
	if err != nil {
		return fmt.Errorf("reading the %s report of cluster %s: %w", k, row.Name, err)
	}
	if exit > 1 {
		row.State = StateFailed
	}
	return nil
}

// read decodes a report of type T and hands it to fill.
func read[T any](out []byte, fill func(*T)) error {
	var r T
	if err := json.Unmarshal(out, &r); err != nil {
		return err
	}
	fill(&r)
	return nil
}

// summarizePlan: the worst verdict of the release's CRDs, its first reason, the objects with
// findings.
func summarizePlan(row *Row, r *plan.Report) {
	verdict, blocker, objects := planVerdict(r)
	row.Verdict, row.Blocker, row.Objects = verdict, blocker, objects
	row.Need = planNeed(row, verdict, nil)
}

// planVerdict is a plan's worst verdict (the decision table's), the first reason of the first
// CRD with it, and the number of objects with findings of any kind.
func planVerdict(r *plan.Report) (string, string, int64) {
	verdict := plan.VerdictSafe
	for i := range r.Items {
		verdict = plan.Worse(verdict, r.Items[i].Verdict)
	}
	var blocker string
	var objects int64
	for i := range r.Items {
		it := &r.Items[i]
		for _, f := range it.Objects.Findings {
			if len(f.Kinds) > 0 {
				objects++
			}
		}
		if blocker == "" && it.Verdict == verdict && verdict != plan.VerdictSafe {
			if reason := firstReason(it); reason != "" {
				blocker = it.CRD + ": " + reason
			}
		}
	}
	return verdict, blocker, objects
}

// firstReason is the first reason for an item's verdict.
func firstReason(it *plan.Item) string {
	var reasons []string
	switch it.Verdict {
	case plan.VerdictBreaking:
		reasons = it.BreakingReasons
	case plan.VerdictUnknown:
		reasons = it.UnknownReasons
	case plan.VerdictInvalidOnRecreate:
		reasons = it.InvalidOnRecreateReasons
	case plan.VerdictStricter:
		for _, s := range it.Stricter {
			reasons = append(reasons, fmt.Sprintf("%s %s: %s", s.Version, s.Path, s.Change))
		}
	}
	if len(reasons) == 0 {
		return ""
	}
	return reasons[0]
}

// planNeed is what a planned cluster needs: the target (or the path) when its plan is clean,
// else what its verdict asks for.
func planNeed(row *Row, verdict string, via []string) string {
	if row.InPlace != nil && *row.InPlace {
		return NeedInPlace
	}
	need := NeedUpgrade
	switch verdict {
	case plan.VerdictBreaking:
		need = NeedBreaking
	case plan.VerdictUnknown:
		need = NeedUnknown
	case plan.VerdictInvalidOnRecreate:
		need = NeedFixObjects
	}
	switch {
	case len(via) == 0:
		return need
	case need == NeedUpgrade:
		return NeedPath(via)
	}
	return NeedPath(via) + ", and " + need
}

// summarizePath: a release path's hops (Row.Path, when the cluster needs releases before the
// target), the worst verdict of the hops' plans and the first blocker, hop by hop.
func summarizePath(row *Row, r *plan.PathReport) {
	var via []string
	for _, h := range r.Hops {
		row.Path = append(row.Path, h.Release)
	}
	if len(row.Path) > 1 {
		via = row.Path[:len(row.Path)-1]
	} else {
		row.Path = nil // the target alone
	}
	if !r.Reachable {
		row.Verdict, row.Blocker, row.Need = plan.VerdictBreaking, r.Verdict, NeedNoPath
		return
	}
	verdict := plan.VerdictSafe
	hop := func(h *plan.Hop, before string) string {
		if len(r.Hops) == 1 {
			return "" // the target alone
		}
		return fmt.Sprintf("%shop %d (%s): ", before, h.Index, h.Release)
	}
	for i := range r.Hops {
		h := &r.Hops[i]
		if in := h.Instruction(); in != "" && row.Blocker == "" {
			row.Blocker = hop(h, "before ") + in
		}
		if h.Plan == nil {
			continue
		}
		v, b, n := planVerdict(h.Plan)
		if plan.Worse(verdict, v) != verdict && b != "" && (row.Blocker == "" || v != plan.VerdictStricter) {
			row.Blocker = hop(h, "") + b
		}
		verdict = plan.Worse(verdict, v)
		row.Objects = max(row.Objects, n)
	}
	row.Verdict = verdict
	row.Need = planNeed(row, verdict, via)
	if row.Need == NeedUpgrade && slices.ContainsFunc(r.Hops, func(h plan.Hop) bool { return h.Instruction() != "" }) {
		row.Need = NeedLook // a person must act before a hop (deploy a webhook)
	}
}

// summarizeDoctor: the worst severity found, the first error (or warning).
func summarizeDoctor(row *Row, r *doctor.Report) {
	row.Verdict = "ok"
	rank := map[string]int{doctor.SeverityInfo: 1, doctor.SeverityWarning: 2, doctor.SeverityError: 3}
	best := 0
	for _, it := range r.Items {
		for _, f := range it.Findings {
			if rank[f.Severity] > best {
				best, row.Verdict = rank[f.Severity], f.Severity
				row.Blocker = fmt.Sprintf("%s: %s", it.CRD, f.Message)
			}
		}
	}
	switch {
	case len(r.Summary.Incomplete) > 0:
		in := r.Summary.Incomplete[0]
		row.Verdict = "incomplete"
		row.Blocker = fmt.Sprintf("%s %s: %s", in.CRD, in.Check, in.Error)
		row.Need = NeedRunAgain
	case best == 3:
		row.Need = fmt.Sprintf("fixes (%d errors)", r.Summary.Errors)
	case best == 2:
		row.Need = fmt.Sprintf("a look (%d warnings)", r.Summary.Warnings)
	default:
		row.Need = NeedNothing
		row.Blocker = ""
	}
}

// summarizeVersions: the CRDs whose storage migration is pending (or not known).
func summarizeVersions(row *Row, items []explain.Summary) {
	var pending, unknown []string
	for _, s := range items {
		switch {
		case s.MigrationPending == nil:
			unknown = append(unknown, s.Name)
		case *s.MigrationPending:
			pending = append(pending, s.Name)
		}
	}
	row.Objects = 0
	switch {
	case len(pending) > 0:
		row.Verdict = "migration pending"
		row.Blocker = fmt.Sprintf("%d of %d CRDs: %s", len(pending), len(items), strings.Join(firstN(pending, 3), ", "))
		row.Need = "storage migrations"
	case len(unknown) > 0:
		row.Verdict = "unknown"
		row.Blocker = fmt.Sprintf("status.storedVersions not known: %s", strings.Join(firstN(unknown, 3), ", "))
		row.Need = NeedUnknown
	default:
		row.Verdict, row.Need = "no migration pending", NeedNothing
	}
}

// summarizeUpgrade: the upgrade's result (the decision table's outcome), whether the release
// is applied and verified, what stopped or remains.
func summarizeUpgrade(row *Row, r *upgrade.Report) {
	out := r.Outcome
	row.Verdict = upgradeVerdict(r)
	row.Upgraded = out.Applied && out.Verified
	if r.Plan != nil {
		_, _, row.Objects = planVerdict(r.Plan)
	}
	switch {
	case out.Result == upgrade.ResultComplete || out.Result == upgrade.ResultDryRun && out.ExitCode == 0:
	case len(out.Remaining) > 0 && out.Result != upgrade.ResultRefused && out.Result != upgrade.ResultStopped:
		row.Blocker = out.Remaining[0]
	default:
		row.Blocker = out.Message
		if first := firstPreflight(&r.Preflight); first != "" && r.Preflight.Refused {
			row.Blocker += "; first: " + first
		}
	}
	row.Need = upgradeNeed(out)
	if r.AlreadyInPlace != "" {
		t := true
		row.InPlace = &t
	}
}

// firstPreflight is the first thing a preflight found that refuses an upgrade: an object that
// loses fields, one whose write is rejected, what could not be evaluated, a CRD the API server
// rejects.
func firstPreflight(pf *upgrade.Preflight) string {
	object := func(f upgrade.ObjectFinding, what string) string {
		name := f.Name
		if f.Namespace != "" {
			name = f.Namespace + "/" + name
		}
		return fmt.Sprintf("%s %s %s", f.CRD, name, what)
	}
	switch {
	case len(pf.BlockedCRDs) > 0:
		return pf.BlockedCRDs[0] + ": the API server would reject it"
	case len(pf.DataLoss) > 0:
		return object(pf.DataLoss[0], "loses "+strings.Join(pf.DataLoss[0].Fields, ", "))
	case len(pf.Rejected) > 0 && len(pf.Rejected[0].Errors) > 0:
		return object(pf.Rejected[0], "is rejected: "+pf.Rejected[0].Errors[0])
	case len(pf.TypeMismatch) > 0:
		return object(pf.TypeMismatch[0], "holds values of another type")
	case len(pf.OwnershipLoss) > 0:
		return object(pf.OwnershipLoss[0], "loses field managers")
	case len(pf.Unknown) > 0:
		return pf.Unknown[0]
	}
	return ""
}

// upgradeVerdict is an upgrade's result; a dry run's, what the upgrade would do.
func upgradeVerdict(r *upgrade.Report) string {
	out := r.Outcome
	if out.Result != upgrade.ResultDryRun {
		return out.Result
	}
	switch {
	case r.Preflight.Refused:
		return "would be refused"
	case out.ExitCode != 0:
		return "would leave objects to you"
	}
	return "ready"
}

func upgradeNeed(out upgrade.Outcome) string {
	switch out.Result {
	case upgrade.ResultComplete:
		return NeedNothing
	case upgrade.ResultAppliedRemaining:
		return NeedFixObjects
	case upgrade.ResultDryRun:
		if out.ExitCode == 0 {
			return NeedUpgrade
		}
		return "what the upgrade would refuse for"
	case upgrade.ResultRefused:
		return "what the upgrade refused for"
	case upgrade.ResultNotApplied:
		return "the release applied (the storage steps are done)"
	}
	return NeedRunAgain
}

// summarizeUpgradePath: an upgrade along a release path: its hops, the path's outcome.
func summarizeUpgradePath(row *Row, r *upgrade.PathReport) {
	if r.Path != nil {
		for _, h := range r.Path.Hops {
			row.Path = append(row.Path, h.Release)
		}
		if len(row.Path) < 2 {
			row.Path = nil
		}
	}
	row.Verdict = r.Outcome.Result
	row.Upgraded = r.Outcome.Applied && r.Outcome.Verified
	if r.Instruction != "" {
		row.Blocker = r.Instruction
	} else if r.Outcome.Result != upgrade.ResultComplete && !(r.Outcome.Result == upgrade.ResultDryRun && r.Outcome.ExitCode == 0) {
		row.Blocker = r.Outcome.Message
	}
	row.Need = upgradeNeed(r.Outcome)
	if r.Instruction != "" {
		row.Need = NeedLook
	}
}

// summarizeStatus reads upgrade status: the release in place, a run to continue, or one that
// holds the CRDs now.
func summarizeStatus(row *Row, st *upgrade.Status) {
	in := st.Next == upgrade.NextNothing
	row.InPlace = &in
	row.Verdict = st.Next
	switch st.Next {
	case upgrade.NextNothing:
		row.Need = NeedNothing
	case upgrade.NextContinue:
		row.Need = "the upgrade continued"
		if len(st.Done) > 0 {
			row.Blocker = fmt.Sprintf("a run stopped after %d steps (last: %s)", len(st.Done), st.Done[len(st.Done)-1])
		}
	case upgrade.NextWait:
		row.Need = "the run in progress to end"
		row.Blocker = "held by " + st.HeldBy
	default:
		row.Need = NeedUpgrade
	}
	if st.Path != nil && len(st.Path.Hops) > 1 {
		row.Path = st.Path.Hops
	}
}

// summarizeMigrateStatus: a pending migration and whether a trim is known to be safe.
func summarizeMigrateStatus(row *Row, st *migrate.Status) {
	switch {
	case !st.Pending:
		row.Verdict, row.Need = "no migration pending", NeedNothing
	case st.TrimSafe:
		row.Verdict, row.Need, row.Blocker = "trim safe", "a trim", st.Reason
	default:
		row.Verdict, row.Need, row.Blocker = "migration pending", "a storage migration", st.Reason
	}
}

// NeedOf is what a row needs when its run did not say: a cluster that answers, or a run that
// completes.
func NeedOf(r *Row) string {
	switch r.State {
	case StateUnreachable:
		return NeedReachable
	case StateSkipped:
		return NeedNothing
	case StateDone:
		if r.ExitCode != 0 {
			return NeedLook
		}
		return NeedNothing
	case StateFailed:
		return NeedLook
	}
	return NeedRunAgain
}

func firstN(s []string, n int) []string {
	if len(s) <= n {
		return s
	}
	return append(append([]string{}, s[:n]...), fmt.Sprintf("and %d more", len(s)-n))
}
