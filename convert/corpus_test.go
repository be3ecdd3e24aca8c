package convert

import (
	"context"
	crdinfo "github.com/crdver/kubectl-crdver/crd"
	"os"
	"path/filepath"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"

	"github.com/crdver/kubectl-crdver/internal/testenv"
	"github.com/crdver/kubectl-crdver/internal/testwebhook"
)

// corpusCRDs reads ../shared/corpus/crds beside the repository clone, or skips.
func corpusCRDs(t *testing.T) map[string]*apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(root, "..", "shared", "corpus", "crds")
	files, _ := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if len(files) == 0 {
		t.Skipf("no CRD corpus at %s (it lives beside the repository clone)", dir)
	}
	out := map[string]*apiextensionsv1.CustomResourceDefinition{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		crd, err := crdinfo.Decode(b)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		out[strings.TrimSuffix(filepath.Base(f), ".yaml")] = crd
	}
	return out
}

// identicalVersions is the first pair of versions of crd whose schemas are identical.
func identicalVersions(crd *apiextensionsv1.CustomResourceDefinition) (string, string, bool) {
	vs := crd.Spec.Versions
	for i := range vs {
		for j := i + 1; j < len(vs); j++ {
			if vs[i].Schema != nil && apiequality.Semantic.DeepEqual(vs[i].Schema, vs[j].Schema) {
				return vs[i].Name, vs[j].Name, true
			}
		}
	}
	return "", "", false
}

// TestCorpusIdentityRoundTrip: for every corpus CRD with two versions whose schemas are
// identical, objects generated in one (each accepted by the API server's create path) go
// through a webhook that only rewrites apiVersion, to the other and back: nothing may be
// found, and every finding of a failure would need a real path.
func TestCorpusIdentityRoundTrip(t *testing.T) {
	crds := corpusCRDs(t)
	srv := testwebhook.StartForTest(t, testwebhook.Options{})
	srv.Set(testwebhook.Identity)
	tested := 0
	for name, crd := range crds {
		from, to, ok := identicalVersions(crd)
		if !ok {
			continue
		}
		tested++
		t.Run(name, func(t *testing.T) {
			crd := crd.DeepCopy()
			crd.Spec.Conversion = srv.WebhookConversion()
			g, err := Generate(crd, GenerateOptions{Version: from, Count: 25, Seed: 3})
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%s -> %s: %d objects, %d repaired, %d dropped", from, to, len(g.Objects), g.Repaired, g.Dropped)
			if len(g.Objects) < 20 {
				t.Errorf("only %d of 25 generated objects are valid in %s (%d dropped)", len(g.Objects), from, g.Dropped)
			}
			rep, err := Run(context.Background(), Options{CRD: crd, To: to, RoundTrip: true, Transport: transport(t, crd, TransportOptions{})}, g.Objects)
			if err != nil {
				t.Fatal(err)
			}
			for _, f := range rep.Findings {
				t.Errorf("finding %s %s %s %s: %s", f.Object, f.Direction, f.Check, f.Path, f.Detail)
			}
			if rep.Converted != len(g.Objects) {
				t.Errorf("converted %d of %d", rep.Converted, len(g.Objects))
			}
		})
	}
	if tested == 0 {
		t.Skip("no corpus CRD has two versions with identical schemas")
	}
}
