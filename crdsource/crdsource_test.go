package crdsource

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	"github.com/crdver/kubectl-crdver/internal/testcrd"
	"github.com/crdver/kubectl-crdver/manifest"
)

func TestMatch(t *testing.T) {
	crds := []*apiextensionsv1.CustomResourceDefinition{
		testcrd.New("stable.example.com", "CronTab", testcrd.ShortNames("ct")),
		testcrd.New("other.example.com", "CronTab"),
		testcrd.New("stable.example.com", "Widget", testcrd.ShortNames("wd")),
	}
	for _, tc := range []struct {
		name, want, err string
	}{
		{"crontabs.stable.example.com", "crontabs.stable.example.com", ""},
		{"ct", "crontabs.stable.example.com", ""},
		{"WD", "widgets.stable.example.com", ""},
		{"widget", "widgets.stable.example.com", ""},
		{"crontab.other.example.com", "crontabs.other.example.com", ""},
		{"crontabs", "", "ambiguous"},
		{"gadgets", "", "no CustomResourceDefinition matches"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Match(crds, tc.name)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("Match(%q): err %v, want one containing %q", tc.name, err, tc.err)
				}
				if tc.err == "no CustomResourceDefinition matches" && !errors.Is(err, ErrNoMatch) {
					t.Errorf("Match(%q): %v does not wrap ErrNoMatch", tc.name, err)
				}
				return
			}
			if err != nil || got.Name != tc.want {
				t.Fatalf("Match(%q) = %v, %v; want %s", tc.name, got, err, tc.want)
			}
		})
	}
}

// TestLoad reads a directory holding a CRD and another kind: the CRD is decoded, the other document reported as skipped, and resolved
// by short name; StrictKinds makes the other document a *NotCRDError inside an InputError.
func TestLoad(t *testing.T) {
	crd, err := os.ReadFile("../testdata/crds/crontab.yaml")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "a.yaml"), append(crd, []byte("\n---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n")...), 0o644); err != nil {
		t.Fatal(err)
	}
	var skipped []string
	s := &Source{Files: []string{dir}, Skipped: func(d manifest.Document) { skipped = append(skipped, d.Where()+" "+Describe(d)) }}
	crds, err := s.Load(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(crds) != 1 {
		t.Fatalf("Load: %d CRDs, want 1", len(crds))
	}
	if len(skipped) != 1 || !strings.Contains(skipped[0], "(document 2) v1 ConfigMap") {
		t.Errorf("skipped %q, want document 2, a v1 ConfigMap", skipped)
	}
	short := crds[0].Spec.Names.ShortNames
	if len(short) > 0 {
		if got, err := s.One(context.Background(), short[0]); err != nil || got != crds[0] {
			t.Errorf("One(%q) = %v, %v", short[0], got, err)
		}
	}
	if _, err := s.One(context.Background(), "nothing"); !errors.Is(err, ErrNoMatch) {
		t.Errorf("One(nothing): %v, want ErrNoMatch", err)
	}
	strict := &Source{Files: []string{dir}, StrictKinds: true}
	_, err = strict.Load(context.Background())
	var ie *manifest.InputError
	var nce *NotCRDError
	if !errors.As(err, &ie) || !errors.As(err, &nce) || !nce.Strict {
		t.Errorf("strict Load: %v (%T), want an InputError holding a strict NotCRDError", err, err)
	}
}

// A CRD defined twice is one rule in one wording, whichever way the files are read: a name
// resolved among them (versions NAME -f), every CRD of them (versions --all -f), a release
// (plan, upgrade: CRDsOf) and the CRDs of an input (preview, convert: Resolver, which also
// says the definitions differ). Each names both documents. (There were three wordings: "is
// defined 2 times: pass only one file that defines it", "… is already defined in … (-f): pass
// it once", "… is defined twice, differently: in -f and in -f; pass only one".)
func TestDefinedTwice(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a.yaml"), filepath.Join(dir, "b.yaml")
	crontab, err := os.ReadFile(filepath.Join("..", "testdata", "crds", "crontab.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	other := strings.Replace(string(crontab), "served: true", "served: false", 1)
	if err := os.WriteFile(a, crontab, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(b, []byte(other), 0o644); err != nil {
		t.Fatal(err)
	}
	want := "crontabs.stable.example.com is defined 2 times, in " + a + " (document 1) and " + b + " (document 1): pass only one file that defines it"
	src := func() *Source { return &Source{Files: []string{a, b}} }

	_, err = src().One(ctx, "crontabs.stable.example.com")
	check := func(how string, err error, want string) {
		t.Helper()
		var de *DuplicateError
		var ie *manifest.InputError
		if !errors.As(err, &de) || !errors.As(err, &ie) || de.Error() != want {
			t.Errorf("%s: %v; want an input error %q", how, err, want)
		}
	}
	check("Source.One", err, want)
	_, err = src().One(ctx, "ct")
	check("Source.One by short name", err, strings.Replace(want, "crontabs.stable.example.com is", `"ct" matches crontabs.stable.example.com, which is`, 1))
	check("Source.Duplicates", src().Duplicates(ctx), want)
	var docs []manifest.Document
	if err := manifest.EachDocument(ctx, []string{a, b}, manifest.Options{}, func(d manifest.Document) error { docs = append(docs, d); return nil }); err != nil {
		t.Fatal(err)
	}
	_, _, err = CRDsOf(docs)
	check("CRDsOf", err, want)
	_, err = NewResolver(ctx, src(), "", "-f", nil, manifest.Options{}, nil)
	check("Resolver", err, strings.Replace(want, "2 times,", "2 times, differently,", 1))
}
