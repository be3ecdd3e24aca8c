package plan

import (
	"slices"
	"testing"

	"github.com/crdver/kubectl-crdver/preflight"
)

// TestConsent: which finding refuses a run with which options, as the decision table says
// (docs/decision-table.md): each override goes on past its own findings only —
// --allow-data-loss is no consent to a rejected write or to field managers lost, nor to values
// of the wrong type (--fix-values has them converted); nothing goes on past a CRD the API
// server rejects; what upgrade carries out or leaves to the user never refuses.
func TestConsent(t *testing.T) {
	none := Consent{}
	loss := Consent{AllowDataLoss: true}
	skip := Consent{SkipInvalid: true}
	owners := Consent{AllowOwnershipLoss: true}
	fix := Consent{FixValues: true}
	all := Consent{AllowDataLoss: true, SkipInvalid: true, AllowOwnershipLoss: true, FixValues: true}
	for _, c := range []struct {
		kind Kind
		// goesOn are the consents that let the run go on past the finding.
		goesOn []Consent
		flag   string
	}{
		{KindApplyRejected, nil, ""},
		{KindDataLoss, []Consent{loss, all}, "--allow-data-loss"},
		{KindUnknown, []Consent{loss, all}, "--allow-data-loss"},
		{KindRejectedWrite, []Consent{skip, all}, "--skip-invalid"},
		{KindTypeMismatch, []Consent{fix, all}, "--fix-values"},
		{KindOwnershipLoss, []Consent{owners, all}, "--allow-ownership-loss"},
		{KindManagedFields, []Consent{none, loss, skip, owners, fix, all}, ""},
		{KindInvalidOnRecreate, []Consent{none, loss, skip, owners, fix, all}, ""},
		{KindStricter, []Consent{none, loss, skip, owners, fix, all}, ""},
	} {
		for _, consent := range []Consent{none, loss, skip, owners, fix, all} {
			want := !slices.Contains(c.goesOn, consent)
			if got := consent.Refuses(c.kind); got != want {
				t.Errorf("%s with %+v: refuses %v, want %v", c.kind, consent, got, want)
			}
		}
		if got := OverrideFlag(c.kind); got != c.flag {
			t.Errorf("%s: override %q, want %q", c.kind, got, c.flag)
		}
	}

	found := []Kind{KindUnknown, KindInvalidOnRecreate, KindRejectedWrite, KindDataLoss, KindTypeMismatch}
	if got, want := none.Refusals(found), []Kind{KindDataLoss, KindRejectedWrite, KindTypeMismatch, KindUnknown}; !slices.Equal(got, want) {
		t.Errorf("refusals without consent %v, want %v (most severe first)", got, want)
	}
	if got, want := loss.Refusals(found), []Kind{KindRejectedWrite, KindTypeMismatch}; !slices.Equal(got, want) {
		t.Errorf("refusals with --allow-data-loss %v, want %v", got, want)
	}
	if got, want := OverrideFlags(none.Refusals(found)), []string{"--allow-data-loss", "--skip-invalid", "--fix-values"}; !slices.Equal(got, want) {
		t.Errorf("override flags %v, want %v (each once)", got, want)
	}
}

// TestPreflightKinds: a rewrite's preflight report by the decision table's kinds.
func TestPreflightKinds(t *testing.T) {
	for _, c := range []struct {
		name string
		r    preflight.Report
		want []Kind
	}{
		{"safe", preflight.Report{}, nil},
		{"loss", preflight.Report{LossCount: 2}, []Kind{KindDataLoss}},
		{"unknown", preflight.Report{Unknown: []string{"v1alpha1 is not served"}}, []Kind{KindUnknown}},
		{"rejected", preflight.Report{RejectedCount: 1}, []Kind{KindRejectedWrite}},
		{"owners", preflight.Report{OwnershipLossCount: 1}, []Kind{KindOwnershipLoss}},
		{"all", preflight.Report{LossCount: 1, RejectedCount: 1, OwnershipLossCount: 1, Unknown: []string{"x"}}, []Kind{KindDataLoss, KindUnknown, KindRejectedWrite, KindOwnershipLoss}},
	} {
		if got := PreflightKinds(&c.r); !slices.Equal(got, c.want) {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}
