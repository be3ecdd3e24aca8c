package upgrade

import (
	"strings"
	"testing"

	"github.com/crdver/kubectl-crdver/plan"
	"github.com/crdver/kubectl-crdver/preflight"
)

// hopWith is a hop whose plan found f on widgets.example.com.
func hopWith(index int, release string, f ...plan.Finding) plan.Hop {
	return plan.Hop{Index: index, Release: release, Plan: &plan.Report{Items: []plan.Item{{CRD: "widgets.example.com", Objects: plan.Objects{Findings: f}}}}}
}

// TestPathRefusal: which hop's findings refuse the path before any write, under which
// consent (plan.Consent), and what the refusal names. A first hop's own refusals are its
// upgrade's (deeper preflight); a later hop's refuse the path.
func TestPathRefusal(t *testing.T) {
	rejected := plan.Finding{Namespace: "default", Name: "w-big", Kinds: []plan.Kind{plan.KindRejectedWrite}, UpdateErrors: []string{"spec.size: Invalid value: 300: must be <= 100"}}
	lost := plan.Finding{Namespace: "default", Name: "w-legacy", Kinds: []plan.Kind{plan.KindDataLoss}, PrunedOnRead: []string{"spec.legacy"}}
	mistyped := plan.Finding{Namespace: "default", Name: "w-typed", Kinds: []plan.Kind{plan.KindTypeMismatch}, TypeMismatches: []preflight.TypeMismatch{{Error: ".spec.size: expected numeric"}}}
	for _, tc := range []struct {
		name    string
		hops    []plan.Hop
		consent plan.Consent
		want    []string // in the refusal; nil: none
	}{
		{"hop 1 only: its upgrade's", []plan.Hop{hopWith(1, "v0.2.0", rejected), hopWith(2, "v0.3.0")}, plan.Consent{}, nil},
		{"hop 2 rejected", []plan.Hop{hopWith(1, "v0.2.0"), hopWith(2, "v0.3.0", rejected)}, plan.Consent{},
			[]string{"hop 2 (v0.3.0): 1 object would be rejected on their next write: widgets.example.com default/w-big (spec.size: Invalid value: 300: must be <= 100) (--skip-invalid goes on)"}},
		{"hop 2 rejected, skip-invalid", []plan.Hop{hopWith(1, "v0.2.0"), hopWith(2, "v0.3.0", rejected)}, plan.Consent{SkipInvalid: true}, nil},
		{"hop 1 and hop 3 lose fields", []plan.Hop{hopWith(1, "v0.2.0", lost), hopWith(2, "v0.3.0"), hopWith(3, "v0.4.0", lost)}, plan.Consent{},
			[]string{"hop 1 (v0.2.0): 1 object would lose fields: widgets.example.com default/w-legacy (spec.legacy)", "; hop 3 (v0.4.0): 1 object"}},
		{"hop 2 type mismatch: no consent goes on", []plan.Hop{hopWith(1, "v0.2.0"), hopWith(2, "v0.3.0", mistyped)}, plan.Consent{AllowDataLoss: true, SkipInvalid: true, AllowOwnershipLoss: true},
			[]string{"hop 2 (v0.3.0): 1 object hold values whose type does not fit", "w-typed (.spec.size: expected numeric)"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			hps := pathPreflight(&plan.PathReport{Hops: tc.hops}, tc.consent)
			if len(hps) != len(tc.hops) {
				t.Fatalf("%d hop preflights for %d hops", len(hps), len(tc.hops))
			}
			got := pathRefusal(hps)
			if tc.want == nil {
				if got != "" {
					t.Errorf("refused: %s", got)
				}
				return
			}
			for _, w := range tc.want {
				if !strings.Contains(got, w) {
					t.Errorf("the refusal does not say %q:\n%s", w, got)
				}
			}
		})
	}
	// Objects invalid on re-create at a hop are listed, never refused.
	recreate := plan.Finding{Namespace: "default", Name: "w-odd", CreateErrors: []string{"spec.size: Required value"}}
	hps := pathPreflight(&plan.PathReport{Hops: []plan.Hop{hopWith(1, "v0.2.0"), hopWith(2, "v0.3.0", recreate)}}, plan.Consent{})
	if !recreate.InvalidOnRecreate() {
		t.Fatal("the fixture is not invalid on re-create by plan's rule")
	}
	if len(hps[1].InvalidOnRecreate) != 1 || len(hps[1].Refusals) != 0 || pathRefusal(hps) != "" {
		t.Errorf("hop 2 invalid on re-create: %+v, refusals %v", hps[1].InvalidOnRecreate, hps[1].Refusals)
	}
}
