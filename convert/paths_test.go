package convert

import (
	"context"
	crdinfo "github.com/crdver/kubectl-crdver/crd"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/crdver/kubectl-crdver/internal/testwebhook"
)

// TestFindingPathsAreReal: every finding names a real JSON path, also for the API server's
// errors that come without one (a oneOf's, a root CEL rule's).
func TestFindingPathsAreReal(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("testdata", "widgets-oneof.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	crd, err := crdinfo.Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	srv := testwebhook.StartForTest(t, testwebhook.Options{})
	srv.Set(testwebhook.Identity)
	crd.Spec.Conversion = srv.WebhookConversion()
	objs := []Object{{Source: "both", Object: map[string]any{
		"apiVersion": "paths.example.com/v1alpha1", "kind": "Widget",
		"metadata": map[string]any{"name": "w", "namespace": "default"},
		"spec":     map[string]any{"a": int64(1), "b": int64(20)},
	}}}
	rep, err := Run(context.Background(), Options{CRD: crd, To: "v1", Transport: transport(t, crd, TransportOptions{})}, objs)
	if err != nil {
		t.Fatal(err)
	}
	paths := map[string]bool{}
	for _, f := range rep.Findings {
		if f.Path == "" || strings.Contains(f.Path, "<nil>") {
			t.Errorf("finding without a real path: %+v", f)
		}
		paths[f.Path] = true
	}
	for _, want := range []string{".spec", "."} {
		if !paths[want] {
			t.Errorf("no finding at %s; findings: %+v", want, rep.Findings)
		}
	}
}

func TestErrorPath(t *testing.T) {
	cases := []struct{ field, msg, want string }{
		{"spec.port", "Invalid value", ".spec.port"},
		{"<nil>", `Invalid value: "": "spec.trafficPolicy.loadBalancer" must validate one and only one schema (oneOf). Found 2 valid alternatives`, ".spec.trafficPolicy.loadBalancer"},
		{"<nil>", `"spec.subsets[0].x" must validate all the schemas (allOf). None validated`, ".spec.subsets[0].x"},
		{"<nil>", "Invalid value: null: some validation rules were not checked", "."},
		{"", "anything", "."},
	}
	for _, c := range cases {
		if got := ErrorPath(c.field, c.msg); got != c.want {
			t.Errorf("ErrorPath(%q, %q) = %q, want %q", c.field, c.msg, got, c.want)
		}
	}
	segs := parsePath(".spec.items[2].labels[app.kubernetes.io/name]")
	if len(segs) != 5 || segs[2].index != 2 || !segs[2].isIndex || segs[4].key != "app.kubernetes.io/name" {
		t.Errorf("parsePath: %+v", segs)
	}
}
