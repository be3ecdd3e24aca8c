package plan

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/crdver/kubectl-crdver/convert"
	"github.com/crdver/kubectl-crdver/internal/testenv"
	"github.com/crdver/kubectl-crdver/preview"
)

// corpusDir is ../shared/corpus/crds beside the repository clone.
func corpusDir(t testing.TB) string {
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Skip(err)
	}
	dir := filepath.Join(root, "..", "shared", "corpus", "crds")
	if st, err := os.Stat(dir); err != nil || !st.IsDir() {
		t.Skipf("no corpus at %s (it lives beside the repository clone)", dir)
	}
	return dir
}

// TestPlanCorpusAgainstItself plans every corpus CRD against itself (offline) with generated
// objects that the CRD accepts, taken as the API server returns them: nothing to report.
func TestPlanCorpusAgainstItself(t *testing.T) {
	dir := corpusDir(t)
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	planned := 0
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".yaml") {
			continue
		}
		crd := readCRD(t, filepath.Join(dir, e.Name()))
		t.Run(e.Name(), func(t *testing.T) {
			version := ListVersion(crd)
			p, err := preview.NewPreviewer(crd)
			if err != nil {
				t.Fatal(err)
			}
			gen, err := convert.Generate(crd, convert.GenerateOptions{Version: version, Count: 20, Seed: 7})
			if err != nil {
				t.Skipf("no objects to generate: %v", err)
			}
			var live []unstructured.Unstructured
			for _, o := range gen.Objects {
				body, err := (&unstructured.Unstructured{Object: o.Object}).MarshalJSON()
				if err != nil {
					t.Fatal(err)
				}
				r, err := p.Create(ctx, body, preview.PreviewOptions{})
				if err != nil {
					t.Fatalf("preview: %v", err)
				}
				if r.Accepted() {
					live = append(live, unstructured.Unstructured{Object: r.Object})
				}
			}
			it, err := Plan(ctx, crd, crd, &SliceSource{Objects: live, PageSize: 7}, Options{Workers: 2})
			if err != nil {
				t.Fatal(err)
			}
			if !it.Apply.Allowed || it.Breaking || it.Verdict != VerdictSafe || len(it.Stricter) > 0 || len(it.SchemaChanges) > 0 || len(it.Objects.Findings) > 0 || len(it.Conversion) > 0 || it.MigrationPending {
				t.Errorf("%s planned against itself reports something: apply %+v, changes %+v, findings %+v", crd.Name, it.Apply, it.SchemaChanges, it.Objects.Findings)
			}
			if it.Objects.Evaluated != int64(len(live)) {
				t.Errorf("evaluated %d of %d", it.Objects.Evaluated, len(live))
			}
			t.Logf("%s: %d generated objects accepted, nothing reported", crd.Name, len(live))
			planned++
		})
	}
	if planned == 0 {
		t.Error("no corpus CRD was planned")
	}
}
