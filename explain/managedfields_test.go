package explain

import (
	"strings"
	"testing"

	"github.com/crdver/kubectl-crdver/internal/testcrd"
	"github.com/crdver/kubectl-crdver/ownership"
)

// TestManagedFieldsSafety: a version safe to remove by storedVersions stays safe only when the
// census counted no object with managedFields entries of it; entries make it not safe (with the
// retire command), and a census that could not be taken makes it unknown, never safe.
func TestManagedFieldsSafety(t *testing.T) {
	c := testcrd.New("g.example.com", "Thing", testcrd.Versions("v1alpha1", "v1beta1", "v1"), testcrd.Storage("v1"), testcrd.Unserved("v1beta1"), testcrd.Stored("v1"))
	verdict := func(r VersionsReport, name string) (bool, string) {
		for _, v := range r.Versions {
			if v.Name == name {
				return v.SafeToRemove, v.Notes[len(v.Notes)-1]
			}
		}
		t.Fatalf("no row for %s", name)
		return false, ""
	}
	base := AnalyzeVersions(c, "")
	if safe, _ := verdict(base, "v1alpha1"); !safe {
		t.Fatal("v1alpha1 is not safe to remove by storedVersions: the test's premise is wrong")
	}
	for name, tc := range map[string]struct {
		census   *ownership.Census
		counted  bool
		safe     bool
		wantNote string
	}{
		"entries of v1alpha1": {&ownership.Census{Objects: 5, Versions: []ownership.VersionCount{{Version: "v1", Objects: 5}, {Version: "v1alpha1", Objects: 2}}}, true, false,
			"not safe to remove: 2 object(s) hold managedFields entries of it (run `kubectl crdver retire things.g.example.com v1alpha1 --to v1`)"},
		"no entries of it": {&ownership.Census{Objects: 5, Versions: []ownership.VersionCount{{Version: "v1", Objects: 5}}}, true, true, "safe to remove"},
		"nothing listed":   {nil, true, true, "safe to remove"},
		"not counted":      {nil, false, false, "unknown: the objects' managedFields could not be counted"},
	} {
		r := AnalyzeVersions(c, "")
		ManagedFieldsSafety(c, &r, tc.census, tc.counted)
		safe, note := verdict(r, "v1alpha1")
		if safe != tc.safe || note != tc.wantNote {
			t.Errorf("%s: safe %v, note %q; want %v, %q", name, safe, note, tc.safe, tc.wantNote)
		}
		if safe, note := verdict(r, "v1"); safe || !strings.HasPrefix(note, "not safe to remove: storage version") {
			t.Errorf("%s: the storage version became %v, %q", name, safe, note)
		}
	}
}

// TestManagedFieldsNotes: the census line, then a note for each version on its way out that
// still has entries, and for entries of a version no longer in spec.versions.
func TestManagedFieldsNotes(t *testing.T) {
	c := testcrd.New("g.example.com", "Thing", testcrd.Versions("v1alpha1", "v1"), testcrd.Storage("v1"), testcrd.Stored("v1"))
	notes := ManagedFieldsNotes(c, &ownership.Census{Objects: 4, Versions: []ownership.VersionCount{
		{Version: "v0", Objects: 1}, {Version: "v1", Objects: 4}, {Version: "v1alpha1", Objects: 3},
	}})
	want := []string{
		"objects holding managedFields entries, per version: v0 1, v1 4, v1alpha1 3 (of 4 objects)",
		`1 of 4 objects hold managedFields entries of v0, which is no longer in spec.versions: server-side apply of them fails with "request to convert CR to an invalid group/version" (kubernetes#111937)`,
		"3 of 4 objects hold managedFields entries of v1alpha1: move them before removing v1alpha1 (kubectl crdver retire things.g.example.com v1alpha1 --to v1)",
	}
	if strings.Join(notes, "\n") != strings.Join(want, "\n") {
		t.Errorf("notes:\n%s\nwant:\n%s", strings.Join(notes, "\n"), strings.Join(want, "\n"))
	}
	if n := ManagedFieldsNotes(c, &ownership.Census{}); n != nil {
		t.Errorf("no objects: %q, want none", n)
	}
}
