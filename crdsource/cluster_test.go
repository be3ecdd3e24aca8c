package crdsource

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"

	"github.com/crdver/kubectl-crdver/internal/testenv"
	"github.com/crdver/kubectl-crdver/manifest"
)

// The tests of Source and Resolver at their API: files, the cluster (a real kube-apiserver and
// etcd, one for the package), name resolution and the errors.

var env *testenv.Env

func TestMain(m *testing.M) { testenv.Main(m, &env, testenv.Options{}) }

func clusterSource(t *testing.T) *Source {
	t.Helper()
	return &Source{Client: func() (apiextensionsclient.Interface, error) { return apiextensionsclient.NewForConfig(env.Config) }}
}

// unreachable is a client of an API server that is not there.
func unreachable() (apiextensionsclient.Interface, error) {
	return apiextensionsclient.NewForConfig(&rest.Config{Host: "https://127.0.0.1:1"})
}

func TestSourceCluster(t *testing.T) {
	ctx := context.Background()
	crd := testenv.LoadCRD(t, "crontab.yaml")
	env.CreateCRDForTest(t, testenv.ForServer(crd))

	for _, tc := range []struct{ name, want, err string }{
		{"crontabs.stable.example.com", "crontabs.stable.example.com", ""}, // one GET
		{"ct", "crontabs.stable.example.com", ""},                          // the list, by short name
		{"CronTab", "crontabs.stable.example.com", ""},                     // by kind
		{"crontab.stable.example.com", "crontabs.stable.example.com", ""},  // not found by GET, then matched
		{"gadgets.nothing.example.com", "", "no CustomResourceDefinition matches"},
		{"", "", "name a CustomResourceDefinition"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := clusterSource(t).One(ctx, tc.name)
			if tc.err != "" {
				var ie *manifest.InputError
				if err == nil || !strings.Contains(err.Error(), tc.err) || !errors.As(err, &ie) {
					t.Fatalf("One(%q): %v, want an InputError containing %q", tc.name, err, tc.err)
				}
				return
			}
			if err != nil || got.Name != tc.want {
				t.Fatalf("One(%q) = %v, %v; want %s", tc.name, got, err, tc.want)
			}
		})
	}

	s := clusterSource(t)
	if s.Offline() {
		t.Errorf("a source without files is offline")
	}
	got, err := s.ByGroupKind(ctx, "stable.example.com", "CronTab")
	if err != nil || got.Name != crd.Name {
		t.Errorf("ByGroupKind: %v, %v", got, err)
	}
	if _, err := s.ByGroupKind(ctx, "stable.example.com", "Gadget"); !errors.Is(err, ErrNoMatch) {
		t.Errorf("ByGroupKind(Gadget): %v, want ErrNoMatch", err)
	}

	// The cluster cannot be reached: a ClusterError saying what was being done.
	down := &Source{Client: unreachable}
	for _, name := range []string{"crontabs.stable.example.com", "ct"} {
		_, err := down.One(ctx, name)
		var ce *ClusterError
		if !errors.As(err, &ce) || ce.Doing == "" {
			t.Errorf("One(%q) on an unreachable cluster: %v (%T), want a ClusterError", name, err, err)
		}
	}
	// The client cannot be made: its error as it is.
	broken := errors.New("no kubeconfig")
	if _, err := (&Source{Client: func() (apiextensionsclient.Interface, error) { return nil, broken }}).All(ctx); err != broken {
		t.Errorf("All with a broken client: %v, want %v", err, broken)
	}
}

func TestSourceFiles(t *testing.T) {
	ctx := context.Background()
	crds := filepath.Join("..", "testdata", "crds")
	two := &Source{Files: []string{filepath.Join(crds, "widget.yaml"), filepath.Join(crds, "gadget.yaml")}}
	if !two.Offline() {
		t.Fatalf("a source with files is not offline")
	}
	_, err := two.One(ctx, "")
	if err == nil || !strings.Contains(err.Error(), "holds 2 CustomResourceDefinitions") || !strings.Contains(err.Error(), "name the one you mean") {
		t.Errorf("One(\"\") of two CRDs: %v", err)
	}
	if got, err := two.One(ctx, "gadgets"); err != nil || got.Spec.Names.Kind != "Gadget" {
		t.Errorf("One(gadgets): %v, %v", got, err)
	}
	_, err = two.ByGroupKind(ctx, "preview.example.com", "Nothing")
	if err == nil || !strings.Contains(err.Error(), "have: ") {
		t.Errorf("ByGroupKind(Nothing) in files: %v, want the names it has", err)
	}
	if _, err := (&Source{Files: []string{filepath.Join(t.TempDir(), "missing.yaml")}}).Load(ctx); err == nil {
		t.Errorf("Load of a missing file: no error")
	}
	// An invalid CRD is an InputError.
	bad := filepath.Join(t.TempDir(), "bad.yaml")
	if err := os.WriteFile(bad, []byte("apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata:\n  name: bad.example.com\nspec:\n  group: example.com\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var ie *manifest.InputError
	if _, err := (&Source{Files: []string{bad}}).Load(ctx); !errors.As(err, &ie) || !strings.Contains(err.Error(), "bad.example.com") {
		t.Errorf("Load of an invalid CRD: %v (%T), want an InputError naming it", err, err)
	}
}

// TestResolver: a kind defined twice, differently, is an error naming both files (the same definition twice is
// not: crontab.yaml and crontab-release.yaml differ only in status); an object of a kind no
// file defines is nil offline, and a NoCRDError when the cluster cannot be listed.
func TestResolver(t *testing.T) {
	ctx := context.Background()
	crds := filepath.Join("..", "testdata", "crds")
	_, err := NewResolver(ctx, &Source{Files: []string{filepath.Join(crds, "crontab.yaml"), filepath.Join(crds, "crontab-release.yaml")}}, "", "-f", nil, manifest.Options{}, nil)
	if err != nil {
		t.Errorf("the same crontab twice: %v", err)
	}
	_, err = NewResolver(ctx, &Source{Files: []string{filepath.Join(crds, "crontab.yaml"), filepath.Join(crds, "crontab-webhook.yaml")}}, "", "-f", nil, manifest.Options{}, nil)
	// The one wording of a CRD defined twice (DuplicateError), naming both documents.
	if want := "crontabs.stable.example.com is defined 2 times, differently, in " + filepath.Join(crds, "crontab.yaml") + " (document 1) and " + filepath.Join(crds, "crontab-webhook.yaml") + " (document 1): pass only one file that defines it"; err == nil || err.Error() != want {
		t.Errorf("two different crontabs: %v, want %q", err, want)
	}
	r, err := NewResolver(ctx, &Source{Files: []string{filepath.Join(crds, "widget.yaml")}}, "", "-f", nil, manifest.Options{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	d := manifest.Document{APIVersion: "other.example.com/v1", Kind: "Thing"}
	if got, err := r.Find(ctx, d, schema.GroupVersion{Group: "other.example.com", Version: "v1"}); got != nil || err != nil {
		t.Errorf("Find offline of an unknown kind: %v, %v; want nil, nil", got, err)
	}
	r, err = NewResolver(ctx, &Source{Client: unreachable}, "", "", nil, manifest.Options{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var nce *NoCRDError
	if _, err := r.Find(ctx, d, schema.GroupVersion{Group: "other.example.com", Version: "v1"}); !errors.As(err, &nce) {
		t.Errorf("Find on an unreachable cluster: %v (%T), want a NoCRDError", err, err)
	}
	// A built-in kind is never looked for in the cluster.
	cm := manifest.Document{APIVersion: "v1", Kind: "ConfigMap"}
	if got, err := r.Find(ctx, cm, schema.GroupVersion{Version: "v1"}); got != nil || err != nil {
		t.Errorf("Find(ConfigMap): %v, %v", got, err)
	}
	if r.Named() != nil {
		t.Errorf("Named without a name: %v", r.Named())
	}
}
