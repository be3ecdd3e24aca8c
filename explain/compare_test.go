package explain

import (
	"context"
	"encoding/json"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// presentPaths lists the paths of obj's fields in explain's notation (lists transparent).
func presentPaths(x any, path string, out map[string]bool) {
	switch v := x.(type) {
	case map[string]any:
		for k, c := range v {
			p := joinPath(path, k)
			out[p] = true
			presentPaths(c, p, out)
		}
	case []any:
		for _, c := range v {
			presentPaths(c, path, out)
		}
	}
}

// What `explain --compare` says strategy None prunes must be what the API server prunes: an
// object that sets every field of the old version is created for real and read back in the
// new version; the fields that are gone are exactly the listed ones.
func TestComparePrunedMatchesServer(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	srv := newServer(t)
	for _, tc := range []struct{ file, from, to string }{
		{"crontab.yaml", "v1beta1", "v1"},
		{"widget.yaml", "v1beta1", "v1"},
	} {
		crd := forServer(readCRDFile(t, filepath.Join("..", "testdata", "crds", tc.file))[0])
		d, err := Compare(crd, tc.from, tc.to)
		if err != nil {
			t.Fatal(err)
		}
		if len(d.PrunedFromTo) == 0 {
			t.Fatalf("%s: compare found nothing pruned from %s to %s; the test needs a CRD where something is", crd.Name, tc.from, tc.to)
		}
		if _, err := env.CreateCRD(ctx, crd.DeepCopy()); err != nil {
			t.Fatal(err)
		}
		vs, _ := SchemaFor(crd, tc.from)
		obj := sampleValue(vs.Structural, 0).(map[string]any)
		delete(obj, "status") // the status subresource would drop it anyway
		sent := map[string]bool{}
		presentPaths(obj, "", sent)
		obj["apiVersion"], obj["kind"] = crd.Spec.Group+"/"+tc.from, crd.Spec.Names.Kind
		obj["metadata"] = map[string]any{"name": "everything", "namespace": "default"}
		body, _ := json.Marshal(obj)
		created, err := srv.do(ctx, srv.rc.Post().AbsPath(resourcePath(crd, tc.from, "default")).SetHeader("Content-Type", "application/json").Body(body))
		if err != nil || created.verdict != Accepted {
			t.Fatalf("%s: creating %s: %v %+v", crd.Name, body, err, created)
		}
		got, err := srv.do(ctx, srv.rc.Get().AbsPath(resourcePath(crd, tc.to, "default"), "everything"))
		if err != nil || got.verdict != Accepted {
			t.Fatalf("reading at %s: %v %+v", tc.to, err, got)
		}
		back := map[string]bool{}
		presentPaths(got.object, "", back)
		var gone []string
		for p := range sent {
			parent := parentPath(p)
			if !back[p] && (parent == "" || back[parent]) {
				gone = append(gone, p)
			}
		}
		sort.Strings(gone)
		if diff := cmp.Diff(gone, d.PrunedFromTo); diff != "" {
			t.Errorf("%s %s->%s: pruned fields (-API server +explain --compare):\n%s\nread back: %v", crd.Name, tc.from, tc.to, diff, got.object)
		}
		if _, err := srv.do(ctx, srv.rc.Delete().AbsPath(resourcePath(crd, tc.from, "default"), "everything")); err != nil {
			t.Fatal(err)
		}
		if err := env.DeleteCRD(ctx, crd.Name); err != nil {
			t.Fatal(err)
		}
		t.Logf("%s %s->%s: the API server pruned %s, as explain --compare says", crd.Name, tc.from, tc.to, strings.Join(gone, ", "))
	}
}
