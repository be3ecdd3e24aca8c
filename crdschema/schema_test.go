package crdschema

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	crdinfo "github.com/crdver/kubectl-crdver/crd"
)

func mustCRD(t *testing.T, parts ...string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(append([]string{".."}, parts...)...))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// The non-structural example of the Kubernetes docs must give exactly the violations the docs
// list, each with the rule it breaks.
func TestCheckStructuralDocsExample(t *testing.T) {
	crd, err := crdinfo.Decode(mustCRD(t, "testdata", "explain", "nonstructural-docs.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	r, err := CheckStructural(crd)
	if err != nil {
		t.Fatal(err)
	}
	if r.Structural {
		t.Fatal("the docs example is reported structural")
	}
	type v struct {
		Field string
		Rule  int
	}
	var got []v
	for _, x := range r.Versions[0].Violations {
		got = append(got, v{x.Field, x.Rule})
	}
	root := "spec.versions[0].schema.openAPIV3Schema"
	want := []v{
		{root + ".anyOf[0].description", 3},          // the description is set within anyOf
		{root + ".anyOf[0].properties[bar].type", 3}, // bar's type is within anyOf
		{root + ".properties[bar]", 2},               // bar inside of anyOf is not specified outside
		{root + ".properties[foo].type", 1},          // the type of foo is missing
		{root + ".properties[metadata]", 4},          // metadata.finalizers might not be restricted
		{root + ".type", 1},                          // the type at the root is missing
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("violations (-want +got):\n%s\nall: %+v", diff, r.Versions[0].Violations)
	}
}

// The documentation's structural rewrite of the same example has no violation.
func TestCheckStructuralDocsStructuralExample(t *testing.T) {
	crd, err := crdinfo.Decode(mustCRD(t, "testdata", "explain", "structural-docs.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	r, err := CheckStructural(crd)
	if err != nil {
		t.Fatal(err)
	}
	if !r.Structural || len(r.Versions[0].Violations) != 0 {
		t.Errorf("want structural without violations, got %+v", r)
	}
}
