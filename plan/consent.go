package plan

import (
	"slices"

	"github.com/crdver/kubectl-crdver/preflight"
)

// Consent is what a run that writes (upgrade, migrate, migrate --all, retire) was told to
// accept: the decision table's overrides (Decision.Override) given on its command line. It is
// the one answer to "does this finding stop the run before its first write, and which option
// would let it go on": every command asks it, none decides it again.
type Consent struct {
	// AllowDataLoss: objects may lose fields, or what they lose may be unknown
	// (--allow-data-loss; OverrideAllowDataLoss).
	AllowDataLoss bool
	// SkipInvalid: objects whose next write is rejected are left as they are (--skip-invalid;
	// OverrideSkipInvalid).
	SkipInvalid bool
	// AllowOwnershipLoss: a rewrite may drop field managers (--allow-ownership-loss;
	// OverrideAllowOwnershipLoss). AllowDataLoss is no consent to it.
	AllowOwnershipLoss bool
	// FixValues: values whose type does not fit the new storage version's typed schema are
	// converted by the run, after its backup (--fix-values; OverrideFixValues).
	FixValues bool
}

// gives reports whether the consent gives override (an Override* constant); "" (no override)
// is never given.
func (c Consent) gives(override string) bool {
	switch override {
	case OverrideAllowDataLoss:
		return c.AllowDataLoss
	case OverrideSkipInvalid:
		return c.SkipInvalid
	case OverrideAllowOwnershipLoss:
		return c.AllowOwnershipLoss
	case OverrideFixValues:
		return c.FixValues
	}
	return false
}

// Refuses reports whether a finding of kind k stops the run before its first write: the
// decision table's row refuses and its override, if it has one, is not given.
func (c Consent) Refuses(k Kind) bool {
	d := DecisionFor(k)
	return d.Upgrade == UpgradeRefuses && !c.gives(d.Override)
}

// Refusals are the kinds among found that stop the run (Refuses), each once, most severe
// first (the decision table's order).
func (c Consent) Refusals(found []Kind) []Kind {
	var out []Kind
	for _, d := range decisions {
		if slices.Contains(found, d.Kind) && c.Refuses(d.Kind) {
			out = append(out, d.Kind)
		}
	}
	return out
}

// OverrideFlag is the command-line option that overrides a refusal for kind k
// ("--skip-invalid"), "" when no option does (the finding must be fixed).
func OverrideFlag(k Kind) string {
	if o := DecisionFor(k).Override; o != "" {
		return "--" + o
	}
	return ""
}

// OverrideFlags are the options that would let a run refused for kinds go on, each once, in
// the order of kinds; kinds no option overrides add none.
func OverrideFlags(kinds []Kind) []string {
	var out []string
	for _, k := range kinds {
		if f := OverrideFlag(k); f != "" && !slices.Contains(out, f) {
			out = append(out, f)
		}
	}
	return out
}

// PreflightKinds are the kinds of what a rewrite's preflight (package preflight: migrate,
// migrate --all, retire) found, by the decision table: objects that lose fields (data-loss),
// what could not be evaluated (unknown), writes it rejects (rejected-write), field managers
// the rewrite drops (ownership-loss).
func PreflightKinds(r *preflight.Report) []Kind {
	var out []Kind
	if r.LossCount > 0 {
		out = append(out, KindDataLoss)
	}
	if len(r.Unknown) > 0 {
		out = append(out, KindUnknown)
	}
	if r.RejectedCount > 0 {
		out = append(out, KindRejectedWrite)
	}
	if r.OwnershipLossCount > 0 {
		out = append(out, KindOwnershipLoss)
	}
	return out
}
