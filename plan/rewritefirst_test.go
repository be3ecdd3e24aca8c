package plan

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
)

// Back from cert-manager v1.7.3 (v1 only, conversion None) to v0.16.1 (no v1; its webhook
// converts): every object is first rewritten at v0.16.1's storage version v1alpha2 under an
// intermediate CRD that converts through v0.16.1's webhook. What that stores is the webhook's
// conversion (spec.subject.organizations becomes spec.organization), not the v1 object
// relabelled, so plan does not call spec.subject.organizations lost: it says it cannot tell,
// and upgrade's preflight round-trips every object through the webhook. With conversion None
// the same rewrite is a relabelling, and plan names the field v1alpha2's schema prunes.
func TestPlanRewriteFirstThroughTheNewWebhook(t *testing.T) {
	rel := filepath.Join("..", "testdata", "releases", "cert-manager")
	live := readCRD(t, filepath.Join(rel, "v1.7.3", "crd-certificates.yaml"))
	live.Status.StoredVersions = []string{"v1"}
	objs := readObjects(t, filepath.Join("..", "testdata", "convert", "cert-manager-v1", "resource_with_organization_v1.yaml"))
	for _, tc := range []struct {
		strategy apiextensionsv1.ConversionStrategyType
		pruned   []string
		note     string
	}{
		{apiextensionsv1.WebhookConverter, nil, "rewritten at v1alpha2 through the conversion webhook before the apply"},
		{apiextensionsv1.NoneConverter, []string{"spec.subject.organizations"}, ""},
	} {
		t.Run(string(tc.strategy), func(t *testing.T) {
			next := readCRD(t, filepath.Join(rel, "v0.16.1", "crd-certificates.yaml"))
			if tc.strategy == apiextensionsv1.NoneConverter {
				next.Spec.Conversion = &apiextensionsv1.CustomResourceConversion{Strategy: apiextensionsv1.NoneConverter}
			}
			it, err := Plan(context.Background(), live, next, &SliceSource{Objects: objs}, Options{Workers: 1})
			if err != nil {
				t.Fatal(err)
			}
			f := findingOf(it, "ca-issuer")
			var pruned, notes []string
			if f != nil {
				pruned, notes = f.PrunedOnRead, f.Notes
			}
			if !slices.Equal(pruned, tc.pruned) && len(pruned)+len(tc.pruned) > 0 {
				t.Errorf("pruned on read %v, want %v (finding %+v)", pruned, tc.pruned, f)
			}
			if tc.note != "" && !slices.ContainsFunc(notes, func(n string) bool { return strings.HasPrefix(n, tc.note) }) {
				t.Errorf("notes %q, want one that starts %q", notes, tc.note)
			}
		})
	}
}
