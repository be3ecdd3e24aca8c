package explain

import (
	"context"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"

	crdinfo "github.com/crdver/kubectl-crdver/crd"
	"github.com/crdver/kubectl-crdver/crdschema"
	"github.com/crdver/kubectl-crdver/internal/testenv"
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
	dyn, err := dynamic.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ file, from, to string }{
		{"crontab.yaml", "v1beta1", "v1"},
		{"widget.yaml", "v1beta1", "v1"},
	} {
		crd := testenv.ForServer(testenv.LoadCRD(t, tc.file))
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
		vs, _ := crdschema.SchemaFor(crd, tc.from)
		obj := sampleValue(vs.Structural, 0).(map[string]any)
		delete(obj, "status") // the status subresource would drop it anyway
		sent := map[string]bool{}
		presentPaths(obj, "", sent)
		obj["apiVersion"], obj["kind"] = crd.Spec.Group+"/"+tc.from, crd.Spec.Names.Kind
		obj["metadata"] = map[string]any{"name": "everything", "namespace": "default"}
		if _, err := dyn.Resource(crdinfo.GVR(crd, tc.from)).Namespace("default").Create(ctx, &unstructured.Unstructured{Object: obj}, metav1.CreateOptions{}); err != nil {
			t.Fatalf("%s: creating %v: %v", crd.Name, obj, err)
		}
		got, err := dyn.Resource(crdinfo.GVR(crd, tc.to)).Namespace("default").Get(ctx, "everything", metav1.GetOptions{})
		if err != nil {
			t.Fatalf("reading at %s: %v", tc.to, err)
		}
		back := map[string]bool{}
		presentPaths(got.Object, "", back)
		var gone []string
		for p := range sent {
			parent := parentPath(p)
			if !back[p] && (parent == "" || back[parent]) {
				gone = append(gone, p)
			}
		}
		sort.Strings(gone)
		if diff := cmp.Diff(gone, d.PrunedFromTo); diff != "" {
			t.Errorf("%s %s->%s: pruned fields (-API server +explain --compare):\n%s\nread back: %v", crd.Name, tc.from, tc.to, diff, got.Object)
		}
		if err := dyn.Resource(crdinfo.GVR(crd, tc.from)).Namespace("default").Delete(ctx, "everything", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := env.DeleteCRD(ctx, crd.Name); err != nil {
			t.Fatal(err)
		}
		t.Logf("%s %s->%s: the API server pruned %s, as explain --compare says", crd.Name, tc.from, tc.to, strings.Join(gone, ", "))
	}
}
