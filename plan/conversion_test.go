package plan

import (
	"slices"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	"github.com/crdver/kubectl-crdver/internal/testcrd"
)

// pairsCRD is a CRD of group pairs.example.com with versions "name" (served), "name*"
// (served, storage), "name-" (not served) and "name*-" (storage, not served), the given
// stored versions, converting through a webhook at url.
func pairsCRD(url string, stored []string, versions ...string) *apiextensionsv1.CustomResourceDefinition {
	opts := []testcrd.Option{testcrd.Webhook(url, nil), testcrd.Stored(stored...)}
	for _, v := range versions {
		name, unserved := strings.CutSuffix(v, "-")
		name, storage := strings.CutSuffix(name, "*")
		opts = append(opts, testcrd.Version(name, !unserved, storage, nil))
	}
	return testcrd.New("pairs.example.com", "Widget", opts...)
}

// Each trigger of a conversion check other than the storage switch, alone: the pairs the
// new CRD's conversion must make for the stored objects and why; and releases that need none.
func TestConversionPairs(t *testing.T) {
	const hook, other = "https://hook.example.com/convert", "https://hook-v2.example.com/convert"
	for _, tc := range []struct {
		name       string
		live, next *apiextensionsv1.CustomResourceDefinition
		// want: "from->to: a part of why", in the order conversionPairs gives them.
		want     []string
		unlisted []string
	}{{
		name: "the storage switch",
		live: pairsCRD(hook, []string{"v1beta1"}, "v1beta1*", "v1"),
		next: pairsCRD(hook, nil, "v1beta1", "v1*"),
		want: []string{"v1beta1->v1: are written at v1 (the new storage version"},
	}, {
		// v1 no longer served: v1beta1 becomes the preferred version; the storage version
		// and what is served otherwise stay.
		name: "a new preferred version",
		live: pairsCRD(hook, []string{"v1alpha1"}, "v1alpha1*", "v1beta1", "v1"),
		next: pairsCRD(hook, nil, "v1alpha1*", "v1beta1", "v1-"),
		want: []string{"v1alpha1->v1beta1: are read at v1beta1 (the new preferred version"},
	}, {
		// v1alpha1 served again; v1 stays the preferred version.
		name: "a newly served version",
		live: pairsCRD(hook, []string{"v1beta1"}, "v1alpha1-", "v1beta1*", "v1"),
		next: pairsCRD(hook, nil, "v1alpha1", "v1beta1*", "v1"),
		want: []string{"v1beta1->v1alpha1: are read at v1alpha1 (a version the release starts serving)"},
	}, {
		// Objects still stored at v1alpha1, which the release stops serving: every served
		// version reads them (v1beta1, the storage version, writes them).
		name: "a stored version no longer served",
		live: pairsCRD(hook, []string{"v1alpha1", "v1beta1"}, "v1alpha1", "v1beta1*", "v1"),
		next: pairsCRD(hook, nil, "v1alpha1-", "v1beta1*", "v1"),
		want: []string{
			"v1alpha1->v1: are read at v1 (the new CRD no longer serves v1alpha1)",
			"v1alpha1->v1beta1: are written at v1beta1 (the new storage version",
		},
	}, {
		name: "a change of the conversion itself",
		live: pairsCRD(hook, []string{"v1beta1"}, "v1beta1*", "v1"),
		next: pairsCRD(other, nil, "v1beta1*", "v1"),
		want: []string{"v1beta1->v1: are read at v1 (the conversion changes: webhook endpoint " + hook + " → " + other},
	}, {
		name: "nothing that needs a check (same versions, same conversion)",
		live: pairsCRD(hook, []string{"v1beta1"}, "v1beta1*", "v1"),
		next: pairsCRD(hook, nil, "v1beta1*", "v1"),
	}, {
		// A stored version the live CRD does not serve is listed apart (not readable as
		// stored); one the new CRD removes is the apply-rejected finding's, not a pair.
		name:     "stored versions not served, or removed",
		live:     pairsCRD(hook, []string{"v1alpha1", "v1beta1", "v1"}, "v1alpha1-", "v1beta1", "v1*"),
		next:     pairsCRD(hook, nil, "v1alpha1-", "v1*"),
		unlisted: []string{"v1alpha1"},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			pairs, unlisted := conversionPairs(tc.live, tc.next)
			var got []string
			for _, p := range pairs {
				got = append(got, p.From+"->"+p.To+": "+p.why)
			}
			ok := len(got) == len(tc.want)
			for i := 0; ok && i < len(got); i++ {
				from, why, _ := strings.Cut(tc.want[i], ": ")
				ok = strings.HasPrefix(got[i], from+": objects stored at "+strings.Split(from, "->")[0]+" "+why)
			}
			if !ok {
				t.Errorf("pairs:\n  %s\nwant:\n  %s", strings.Join(got, "\n  "), strings.Join(tc.want, "\n  "))
			}
			if !slices.Equal(unlisted, tc.unlisted) {
				t.Errorf("unlisted %v, want %v", unlisted, tc.unlisted)
			}
		})
	}
}
