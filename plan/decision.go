package plan

import "strings"

// The decision table: for each kind of finding, plan's verdict and exit status, the runbook
// step it produces, what `kubectl crdver upgrade` does about it and upgrade's exit status.
// Plan's gate (judge), the runbook, upgrade's outcome and the command's exit code all read it
// here; docs/decision-table.md is the same table for people.

// Kind is what a finding is about: the first column of the decision table.
type Kind string

// Finding kinds, most severe first.
const (
	// KindApplyRejected: the API server rejects the new CRD itself (CRD validation, the
	// storedVersions rule when no step removes the cause).
	KindApplyRejected Kind = "apply-rejected"
	// KindConversionWebhook: the conversion the new CRD relies on to read or write the stored
	// objects at another version cannot do it: its webhook is not running, not reachable, or
	// fails the API server's checks on objects, or the new CRD drops the webhook conversion
	// they need. Applied as it is, reads and writes of those objects fail (or convert them to
	// something else). No option makes an upgrade go on: deploy or fix the webhook first.
	KindConversionWebhook Kind = "conversion-webhook"
	// KindDataLoss: objects lose fields on read and from etcd on their next write (a field
	// removed from the schema, a lossy conversion), without consent.
	KindDataLoss Kind = "data-loss"
	// KindRejectedWrite: an object's next write (the rewrite of a storage migration, a
	// controller's update) is rejected by the new schema even with ratcheting.
	KindRejectedWrite Kind = "rejected-write"
	// KindTypeMismatch: stored values whose type or shape (scalar, list, map) does not fit the
	// typed schema of the version they are read at: server-side apply fails on the objects, a
	// rewrite cannot keep their field ownership, a re-create as read is rejected.
	KindTypeMismatch Kind = "type-mismatch"
	// KindManagedFields: server-side apply fails on objects whose managedFields name a version
	// the release removes, or an applier (GitOps) still writes a version that goes away.
	KindManagedFields Kind = "managed-fields"
	// KindOwnershipLoss: the rewrite drops field managers of objects: plan predicts it from
	// their managedFields (entries the rewrite cannot move, whose version the API server
	// cannot convert the object to, on servers before 1.37: ownershiploss.go), and the
	// preflight of migrate, retire and upgrade finds it by a server dry run of the rewrite,
	// before their first write.
	KindOwnershipLoss Kind = "ownership-loss"
	// KindUnknown: the plan cannot tell whether something live breaks (status.storedVersions
	// not known, objects not evaluated, a webhook unreachable, the encoding version unknown).
	KindUnknown Kind = "unknown"
	// KindInvalidOnRecreate: the object's writes are accepted (the API server ratchets fields
	// that do not change), but re-creating it as it is (a restore, a GitOps replace) is
	// rejected by the new schema. The user fixes it, before or after the apply.
	KindInvalidOnRecreate Kind = "invalid-on-recreate"
	// KindStricter: rules get stricter for new objects and changes only; no live object
	// violates them.
	KindStricter Kind = "stricter"
)

// Verdicts of an Item (and of a Report: its worst item's), from best to worst.
const (
	// VerdictSafe: nothing live breaks and no rule gets stricter.
	VerdictSafe = "safe"
	// VerdictStricter: rules get stricter for new objects and changes (Item.Stricter), and no
	// evaluated live object violates them.
	VerdictStricter = "stricter"
	// VerdictInvalidOnRecreate: live objects violate the new schema: their writes are
	// accepted (ratcheting), a re-create of them is rejected (Item.InvalidOnRecreateReasons).
	// Not breaking: the release applies and upgrades; the user must fix the objects.
	VerdictInvalidOnRecreate = "invalid-on-recreate"
	// VerdictUnknown: the plan cannot tell whether something live breaks (Item.UnknownReasons);
	// it is never taken as safe.
	VerdictUnknown = "unknown"
	// VerdictBreaking: something live breaks or loses data (Item.BreakingReasons).
	VerdictBreaking = "breaking"
)

// verdictOrder is the verdicts from best to worst.
var verdictOrder = []string{VerdictSafe, VerdictStricter, VerdictInvalidOnRecreate, VerdictUnknown, VerdictBreaking}

// verdictRank orders verdicts from best to worst.
func verdictRank(v string) int {
	for i, x := range verdictOrder {
		if x == v {
			return i
		}
	}
	return 0
}

// Worse is the worse of two verdicts.
func Worse(a, b string) string {
	if verdictRank(b) > verdictRank(a) {
		return b
	}
	return a
}

// What kubectl crdver upgrade does about a finding (Decision.Upgrade).
const (
	// UpgradeRefuses: it stops before the first write (exit 1), unless Decision.Override is
	// given.
	UpgradeRefuses = "refuses"
	// UpgradeCarriesOut: its runbook steps deal with the finding (e.g. retire moves the
	// managedFields entries); it ends applied and verified.
	UpgradeCarriesOut = "carries-out"
	// UpgradeLeavesToUser: it goes on, applies and verifies the release, and ends listing the
	// finding as what remains for the user.
	UpgradeLeavesToUser = "leaves-to-user"
	// UpgradeGoesOn: nothing to do.
	UpgradeGoesOn = "goes-on"
)

// Overrides of a refusal (Decision.Override): the upgrade options that make it go on.
const (
	OverrideAllowDataLoss = "allow-data-loss"
	OverrideSkipInvalid   = "skip-invalid"
	// OverrideAllowOwnershipLoss: the rewrite may drop field managers (managedFields entries)
	// that its server dry run shows lost; --allow-data-loss does not consent to that.
	OverrideAllowOwnershipLoss = "allow-ownership-loss"
	// OverrideFixValues: the upgrade converts, after its backup, the values whose type does
	// not fit the new storage version's typed schema (those with no lossless conversion stop
	// it for a person, after the backup).
	OverrideFixValues = "fix-values"
)

// Decision is one row of the decision table.
type Decision struct {
	Kind Kind `json:"kind"`
	// Verdict is plan's verdict for a CRD with this finding (the worst of its findings wins).
	Verdict string `json:"verdict"`
	// PlanExit is plan's exit status for it (with the default --fail-on breaking).
	PlanExit int `json:"planExit"`
	// Runbook are the runbook actions it produces (Action* constants), in the order they come.
	Runbook []string `json:"runbook"`
	// Manual: the runbook's step for it is for a person.
	Manual bool `json:"manual"`
	// Upgrade is what kubectl crdver upgrade does (Upgrade* constants).
	Upgrade string `json:"upgrade"`
	// Override is the option that makes a refusing upgrade go on ("" none).
	Override string `json:"override,omitempty"`
	// UpgradeExit is upgrade's exit status when this finding is what it ends on: refused (1),
	// applied and verified with the finding left for the user (1), or complete (0).
	UpgradeExit int `json:"upgradeExit"`
	// UpgradeExitOverridden is upgrade's exit status when Override was given.
	UpgradeExitOverridden int `json:"upgradeExitOverridden,omitempty"`
	// Consent is the option the runbook's retire and migrate commands for the CRD carry, after
	// the backup step, so that a user who accepts the loss has a runnable command ("" none).
	Consent string `json:"consent,omitempty"`
}

// decisions is the decision table, most severe first.
var decisions = []Decision{
	// (When the cause is a removed version still stored, the retire steps remove it and the
	// upgrade goes on: analyse's blocked is false.)
	{Kind: KindApplyRejected, Verdict: VerdictBreaking, PlanExit: 1, Runbook: []string{ActionFixCRDs, ActionRetire}, Manual: true,
		Upgrade: UpgradeRefuses, UpgradeExit: 1},
	{Kind: KindConversionWebhook, Verdict: VerdictBreaking, PlanExit: 1, Runbook: []string{ActionDeployWebhook, ActionFixConversion}, Manual: true,
		Upgrade: UpgradeRefuses, UpgradeExit: 1},
	{Kind: KindDataLoss, Verdict: VerdictBreaking, PlanExit: 1, Runbook: []string{ActionConvertObjects, ActionBackup}, Manual: true,
		Upgrade: UpgradeRefuses, Override: OverrideAllowDataLoss, UpgradeExit: 1, UpgradeExitOverridden: 0, Consent: OverrideAllowDataLoss},
	{Kind: KindRejectedWrite, Verdict: VerdictBreaking, PlanExit: 1, Runbook: []string{ActionFixObjects}, Manual: true,
		Upgrade: UpgradeRefuses, Override: OverrideSkipInvalid, UpgradeExit: 1, UpgradeExitOverridden: 1},
	{Kind: KindTypeMismatch, Verdict: VerdictBreaking, PlanExit: 1, Runbook: []string{ActionFixValues, ActionMigrate}, Manual: true,
		Upgrade: UpgradeRefuses, Override: OverrideFixValues, UpgradeExit: 1, UpgradeExitOverridden: 0},
	{Kind: KindManagedFields, Verdict: VerdictBreaking, PlanExit: 1, Runbook: []string{ActionRetire, ActionChangeWriters},
		Upgrade: UpgradeCarriesOut, UpgradeExit: 0},
	{Kind: KindOwnershipLoss, Verdict: VerdictBreaking, PlanExit: 1, Runbook: []string{ActionRetire, ActionMigrate},
		Upgrade: UpgradeRefuses, Override: OverrideAllowOwnershipLoss, UpgradeExit: 1, UpgradeExitOverridden: 0, Consent: OverrideAllowOwnershipLoss},
	{Kind: KindUnknown, Verdict: VerdictUnknown, PlanExit: 1, Runbook: []string{ActionBackup},
		Upgrade: UpgradeRefuses, Override: OverrideAllowDataLoss, UpgradeExit: 1, UpgradeExitOverridden: 0, Consent: OverrideAllowDataLoss},
	{Kind: KindInvalidOnRecreate, Verdict: VerdictInvalidOnRecreate, PlanExit: 1, Runbook: []string{ActionFixRecreate}, Manual: true,
		Upgrade: UpgradeLeavesToUser, UpgradeExit: 1},
	{Kind: KindStricter, Verdict: VerdictStricter, PlanExit: 0, Upgrade: UpgradeGoesOn, UpgradeExit: 0},
}

// Decisions is the decision table, most severe first (a copy).
func Decisions() []Decision {
	out := make([]Decision, len(decisions))
	for i, d := range decisions {
		d.Runbook = append([]string{}, d.Runbook...)
		out[i] = d
	}
	return out
}

// DecisionFor is the row of kind k (the stricter row for a kind not in the table, which
// cannot happen for the Kind constants).
func DecisionFor(k Kind) Decision {
	for _, d := range decisions {
		if d.Kind == k {
			return d
		}
	}
	return decisions[len(decisions)-1]
}

// ExitCode is plan's exit status for a verdict: 1 when the user must act (breaking, unknown,
// invalid on re-create; stricter too when failOnStricter), 0 otherwise.
func ExitCode(verdict string, failOnStricter bool) int {
	if verdict == VerdictStricter && failOnStricter {
		return 1
	}
	for _, d := range decisions {
		if d.Verdict == verdict && d.PlanExit != 0 {
			return d.PlanExit
		}
	}
	return 0
}

// ExitCode is plan's exit status for the whole report: its worst item's.
func (r *Report) ExitCode(failOnStricter bool) int {
	code := 0
	for i := range r.Items {
		code = max(code, ExitCode(r.Items[i].Verdict, failOnStricter))
	}
	return code
}

// MustAct lists the CRDs whose verdict makes plan exit 1 (failOnStricter: stricter ones too).
func (r *Report) MustAct(failOnStricter bool) []string {
	var out []string
	for i := range r.Items {
		if ExitCode(r.Items[i].Verdict, failOnStricter) != 0 {
			out = append(out, r.Items[i].CRD)
		}
	}
	return out
}

// VerdictText is a verdict in words, as people read it ("invalid on re-create").
func VerdictText(v string) string {
	switch v {
	case VerdictInvalidOnRecreate:
		return "invalid on re-create"
	case VerdictStricter:
		return "stricter for new objects; nothing live breaks"
	}
	return v
}

// Kinds is what the finding is about, by the decision table: data-loss (fields pruned on
// read), unknown (fields pruned if encoded at another version), rejected-write (the no-op
// update is rejected), type-mismatch (values that do not fit the read version's typed schema),
// invalid-on-recreate (only a re-create is rejected, for a reason other
// than the fields it loses).
func (f *Finding) kinds() []Kind {
	var out []Kind
	if len(f.PrunedOnRead) > 0 {
		out = append(out, KindDataLoss)
	}
	if len(f.PossiblyPrunedOnRead) > 0 {
		out = append(out, KindUnknown)
	}
	if len(f.TypeMismatches) > 0 {
		out = append(out, KindTypeMismatch)
	}
	if f.ManagersLost != nil && f.ManagersLost.Unknown == "" {
		out = append(out, KindOwnershipLoss)
	}
	switch {
	case len(f.UpdateErrors) > 0:
		out = append(out, KindRejectedWrite)
	case len(f.RecreateErrors()) > 0:
		out = append(out, KindInvalidOnRecreate)
	}
	return out
}

// RecreateErrors are the create errors that make the object invalid on re-create: those of the
// re-create as listed, except the strict decoding error of an object that loses fields (that
// error names the fields the new schema lacks: the data loss, not the object's content, is the
// finding; once the loss is accepted the live object no longer holds them), then those of the
// re-create as the new storage version holds it that the first did not give.
func (f *Finding) RecreateErrors() []string {
	lossy := len(f.PrunedOnRead)+len(f.PossiblyPrunedOnRead) > 0
	if !lossy && len(f.CreateErrorsAfterLoss) == 0 {
		return f.CreateErrors
	}
	var out []string
	given := map[string]bool{}
	for _, e := range f.CreateErrors {
		if !lossy || !unknownFieldError(e) {
			out, given[e] = append(out, e), true
		}
	}
	for _, e := range f.CreateErrorsAfterLoss {
		if !given[e] {
			out = append(out, e)
		}
	}
	return out
}

// unknownFieldError reports whether a create error is the strict decoding error that names
// fields the schema lacks.
func unknownFieldError(e string) bool {
	return strings.Contains(e, "strict decoding error: unknown field")
}

// onlyUnknownFields reports whether every error is the strict decoding error of unknown fields.
func onlyUnknownFields(errs []string) bool {
	for _, e := range errs {
		if !unknownFieldError(e) {
			return false
		}
	}
	return len(errs) > 0
}

// InvalidOnRecreate reports whether the object's own finding is "invalid on re-create": a
// re-create is rejected while its writes are accepted.
func (f *Finding) InvalidOnRecreate() bool {
	return len(f.UpdateErrors) == 0 && len(f.RecreateErrors()) > 0
}
