package plugin

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/rest"

	"github.com/crdver/kubectl-crdver/crdsource"
	"github.com/crdver/kubectl-crdver/internal/testenv"
)

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// countingGlobals are the Globals of one run against the test API server, recording every
// request ("GET /apis/...").
func countingGlobals(t *testing.T) (*Globals, func() []string) {
	t.Helper()
	var mu sync.Mutex
	var reqs []string
	flags := genericclioptions.NewConfigFlags(true)
	kubeconfig := env.Kubeconfig
	flags.KubeConfig = &kubeconfig
	flags.WrapConfigFn = func(c *rest.Config) *rest.Config {
		c.Wrap(func(rt http.RoundTripper) http.RoundTripper {
			return roundTripFunc(func(r *http.Request) (*http.Response, error) {
				mu.Lock()
				reqs = append(reqs, r.Method+" "+r.URL.Path)
				mu.Unlock()
				return rt.RoundTrip(r)
			})
		})
		return c
	}
	streams, _, _, _ := genericiooptions.NewTestIOStreams()
	return &Globals{IOStreams: streams, ConfigFlags: flags}, func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string{}, reqs...)
	}
}

// Finding the CRDs of many objects by group and kind costs one LIST, not a guessed GET (and its
// 404) plus a LIST per kind; names resolved afterwards use the same list.
func TestResolverOneListForManyKinds(t *testing.T) {
	// Names of their own, so that nothing here can make another test's short name or kind
	// ambiguous, even while these CRDs are being deleted.
	spec := apiextensionsv1.JSONSchemaProps{Type: "object"}
	widgets := testenv.TwoVersionCRD("resolver.example.com", "rwidgets", "RWidget", spec)
	crontabs := testenv.TwoVersionCRD("resolver.example.com", "rcrontabs", "RCronTab", spec)
	crontabs.Spec.Names.ShortNames = []string{"rct"}
	registerCRD(t, widgets)
	registerCRD(t, crontabs)
	g, requests := countingGlobals(t)
	s := &crdSource{g: g, flag: "crd-file"}
	ctx := context.Background()
	for _, gk := range [][2]string{{"resolver.example.com", "RWidget"}, {"resolver.example.com", "RCronTab"}, {"resolver.example.com", "RWidget"}} {
		crd, err := s.byGroupKind(ctx, gk[0], gk[1])
		if err != nil || crd.Spec.Names.Kind != gk[1] {
			t.Fatalf("byGroupKind(%v) = %v, %v", gk, crd, err)
		}
	}
	if _, err := s.byGroupKind(ctx, "resolver.example.com", "Nothing"); !errors.Is(err, crdsource.ErrNoMatch) || ExitCode(err) != ExitUsage {
		t.Errorf("a kind no CRD defines: err %v (exit %d), want crdsource.ErrNoMatch, exit 2", err, ExitCode(err))
	}
	if crd, err := s.one(ctx, "rct"); err != nil || crd.Name != "rcrontabs.resolver.example.com" {
		t.Errorf("one(rct) = %v, %v; want the RCronTab CRD by short name", crd, err)
	}
	var lists, others []string
	for _, r := range requests() {
		if r == "GET /apis/apiextensions.k8s.io/v1/customresourcedefinitions" {
			lists = append(lists, r)
		} else {
			others = append(others, r)
		}
	}
	if len(lists) != 1 || len(others) != 0 {
		t.Errorf("requests: %d LISTs and %v; want exactly one LIST of the CRDs and nothing else", len(lists), others)
	}
}

// One client set per run: the kubeconfig is loaded once, however many clients are built.
func TestClientSetLoadsKubeconfigOnce(t *testing.T) {
	g, _ := countingGlobals(t)
	loads := 0
	wrap := g.ConfigFlags.WrapConfigFn
	g.ConfigFlags.WrapConfigFn = func(c *rest.Config) *rest.Config { loads++; return wrap(c) }
	for i := 0; i < 3; i++ {
		if _, err := g.RESTConfig(); err != nil {
			t.Fatal(err)
		}
		if _, err := g.crdClient(); err != nil {
			t.Fatal(err)
		}
	}
	cs, err := g.clients()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cs.Migrate(); err != nil {
		t.Fatal(err)
	}
	if loads != 1 {
		t.Errorf("the kubeconfig was loaded %d times, want once", loads)
	}
	if !strings.HasPrefix(cs.config.UserAgent, "kubectl-crdver/") || cs.config.WarningHandler == nil {
		t.Errorf("config: user agent %q, warning handler %v", cs.config.UserAgent, cs.config.WarningHandler)
	}
}
