package explain

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	"github.com/crdver/kubectl-crdver/internal/testcrd"
)

func TestAnalyzeVersionsSafeToRemove(t *testing.T) {
	c := testcrd.New("g.example.com", "Thing", testcrd.Versions("v1beta1", "v1", "v1alpha1", "v0alpha1"), testcrd.Storage("v1"), testcrd.Unserved("v1alpha1", "v0alpha1"), testcrd.Stored("v1beta1", "v1"))
	c.Spec.Versions[0].Deprecated = true
	r := AnalyzeVersions(c, "")
	type row struct {
		Name string
		Rank int
		Safe bool
		Last string
	}
	var got []row
	for _, v := range r.Versions {
		got = append(got, row{v.Name, v.Rank, v.SafeToRemove, v.Notes[len(v.Notes)-1]})
	}
	want := []row{
		{"v1", 1, false, "not safe to remove: storage version"},
		{"v1beta1", 2, false, "not safe to remove: in status.storedVersions (migrate first)"},
		{"v1alpha1", 3, true, "safe to remove"},
		{"v0alpha1", 4, true, "safe to remove"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("rows (-want +got):\n%s", diff)
	}
	if r.MigrationPending == nil || !*r.MigrationPending || r.PreferredVersion != "v1" || r.StorageVersion != "v1" {
		t.Errorf("pending=%v preferred=%q storage=%q, want true, v1, v1", r.MigrationPending, r.PreferredVersion, r.StorageVersion)
	}
}

func TestAnalyzeVersionsOnlyServedAndStoredNotServed(t *testing.T) {
	c := testcrd.New("g.example.com", "Thing", testcrd.Versions("v1", "v1beta1", "v1alpha1"), testcrd.Storage("v1"), testcrd.Unserved("v1", "v1alpha1"), testcrd.Stored("v1alpha1", "v1"))
	c.Spec.Versions[0].Deprecated = true
	r := AnalyzeVersions(c, "")
	notes := map[string]string{}
	for _, v := range r.Versions {
		notes[v.Name] = strings.Join(v.Notes, "; ")
	}
	want := map[string]string{
		"v1":       "stored but not served; deprecated storage version; not safe to remove: storage version",
		"v1beta1":  "not safe to remove: only served version",
		"v1alpha1": "stored but not served; migration pending; not safe to remove: in status.storedVersions (serve it again, then migrate)",
	}
	if diff := cmp.Diff(want, notes); diff != "" {
		t.Errorf("notes (-want +got):\n%s", diff)
	}
	if r.PreferredVersion != "v1beta1" {
		t.Errorf("preferred = %q, want v1beta1 (the only served version)", r.PreferredVersion)
	}
}

func TestAnalyzeVersionsPreferredFromAnotherCRD(t *testing.T) {
	c := testcrd.New("g.example.com", "Thing", testcrd.Versions("v1beta1", "v1"), testcrd.Storage("v1beta1"), testcrd.Unserved("v1"), testcrd.Stored("v1beta1"))
	r := AnalyzeVersions(c, "v1")
	if len(r.Notes) != 1 || !strings.Contains(r.Notes[0], "kubectl uses v1beta1 for this resource") {
		t.Errorf("notes = %q, want one saying kubectl uses v1beta1", r.Notes)
	}
}

// Without status.storedVersions (a CRD from a release manifest) nothing is called safe to remove
// on the assumption that only the storage version was ever stored.
func TestAnalyzeVersionsStoredVersionsUnknown(t *testing.T) {
	c := testcrd.New("g.example.com", "Thing", testcrd.Versions("v1", "v1beta1", "v1alpha1"), testcrd.Storage("v1"), testcrd.Unserved("v1alpha1"))
	r := AnalyzeVersions(c, "")
	if r.StoredVersionsKnown || r.StoredVersions != nil || r.MigrationPending != nil {
		t.Errorf("known=%v stored=%v pending=%v, want false, nil, nil", r.StoredVersionsKnown, r.StoredVersions, r.MigrationPending)
	}
	if len(r.Notes) != 1 || r.Notes[0] != StoredVersionsUnknownNote {
		t.Errorf("notes = %q, want the unknown note", r.Notes)
	}
	for _, v := range r.Versions {
		last := v.Notes[len(v.Notes)-1]
		switch {
		case v.SafeToRemove:
			t.Errorf("%s called safe to remove", v.Name)
		case v.Storage && (v.Stored == nil || !*v.Stored):
			t.Errorf("storage version %s: stored = %v, want true", v.Name, v.Stored)
		case !v.Storage && v.Stored != nil:
			t.Errorf("%s: stored = %v, want unknown (nil)", v.Name, *v.Stored)
		case !v.Storage && !strings.HasPrefix(last, "unknown: "):
			t.Errorf("%s: last note %q, want unknown: …", v.Name, last)
		}
	}
	sum := Summarize([]*apiextensionsv1.CustomResourceDefinition{c})
	if sum[0].StoredVersionsKnown || sum[0].StoredVersions != nil || sum[0].MigrationPending != nil {
		t.Errorf("summary %+v, want storedVersions unknown", sum[0])
	}
}
