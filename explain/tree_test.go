package explain

import (
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/crdver/kubectl-crdver/internal/testenv"
)

// TestFieldTreeIsExplainsField: FieldTree (what plan compares) is the Field of Explain, field
// for field and error for error, for every version of every bundled CRD, at the root
// (recursive), one level under spec, and at a path that does not exist.
func TestFieldTreeIsExplainsField(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(testenv.CRDFile(t, "crontab.yaml"), "..", "*.yaml"))
	if err != nil || len(files) < 5 {
		t.Fatalf("bundled CRDs: %v %v", files, err)
	}
	compared := 0
	for _, f := range files {
		for _, crd := range testenv.ReadCRDs(t, f) {
			for _, v := range crd.Spec.Versions {
				for _, q := range []struct {
					path      string
					recursive bool
				}{{"", true}, {"spec", false}, {"spec.noSuchField", false}} {
					e, errE := Explain(crd, v.Name, q.path, q.recursive)
					tree, errT := FieldTree(crd, v.Name, q.path, q.recursive)
					if (errE == nil) != (errT == nil) || (errE != nil && errE.Error() != errT.Error()) {
						t.Errorf("%s %s %q: Explain error %v, FieldTree error %v", crd.Name, v.Name, q.path, errE, errT)
						continue
					}
					if errE != nil {
						continue
					}
					if diff := cmp.Diff(e.Field, tree); diff != "" {
						t.Errorf("%s %s %q: FieldTree differs from Explain's Field (-Explain +FieldTree):\n%s", crd.Name, v.Name, q.path, diff)
					}
					compared++
				}
			}
		}
	}
	if compared < 20 {
		t.Errorf("only %d trees compared: the bundled CRDs changed?", compared)
	}
}
