package plan

import (
	"context"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	"github.com/crdver/kubectl-crdver/internal/testcrd"
)

// pathCRD is widgets.example.com with the given versions (the last is the storage version),
// each with a schema holding the field named after it, and a webhook conversion when hook.
func pathCRD(hook string, stored []string, versions ...string) *apiextensionsv1.CustomResourceDefinition {
	opts := []testcrd.Option{testcrd.Versions(versions...), testcrd.Storage(versions[len(versions)-1]), testcrd.Stored(stored...), testcrd.Conversion(nil)}
	for _, v := range versions {
		opts = append(opts, testcrd.Spec(map[string]apiextensionsv1.JSONSchemaProps{"f" + v: {Type: "string"}}, v))
	}
	if hook != "" {
		opts = append(opts, testcrd.Webhook("https://127.0.0.1:9443/"+hook, nil))
	}
	return testcrd.New("example.com", "Widget", opts...)
}

func rel(name string, crd *apiextensionsv1.CustomResourceDefinition) PathRelease {
	return PathRelease{Name: name, File: name + "/", CRDs: []*apiextensionsv1.CustomResourceDefinition{crd}}
}

// The live CRD stores v1alpha1; the target (v1, v2; webhook) no longer knows v1alpha1 and the
// live CRD lacks v2: only release b's webhook (v1alpha1, v1) converts the objects to a
// version the target keeps.
func TestPathNeedsIntermediateRelease(t *testing.T) {
	live := pathCRD("", []string{"v1alpha1"}, "v1alpha1")
	b := rel("v0.2.0", pathCRD("b", nil, "v1alpha1", "v1"))
	a2 := rel("v0.1.5", pathCRD("", nil, "v1alpha1"))
	c := rel("v0.3.0", pathCRD("c", nil, "v1", "v2"))
	ctx := context.Background()
	ro := ReleaseOptions{Live: []*apiextensionsv1.CustomResourceDefinition{live}}

	direct, err := Path(ctx, ReleaseClients{}, PathOptions{Target: c, Release: ro})
	if err != nil {
		t.Fatal(err)
	}
	if direct.Reachable || direct.ExitCode != 1 || !strings.Contains(direct.Verdict, "does not know v1alpha1") {
		t.Fatalf("direct jump: reachable %v exit %d: %s", direct.Reachable, direct.ExitCode, direct.Verdict)
	}

	p, err := Path(ctx, ReleaseClients{}, PathOptions{Via: []PathRelease{a2, b}, Target: c, Release: ro})
	if err != nil {
		t.Fatal(err)
	}
	if !p.Reachable || p.Direct || len(p.Hops) != 2 || p.Hops[0].Release != "v0.2.0" || p.Hops[1].Release != "v0.3.0" {
		t.Fatalf("path: %+v", p)
	}
	if !strings.Contains(p.Verdict, "hop 1 v0.2.0") || !strings.Contains(p.Verdict, "widgets.example.com") {
		t.Errorf("verdict: %s", p.Verdict)
	}
	// Hop 1 rewrites v1alpha1 at v1 through b's webhook (the live CRD lacks v1); hop 2 has
	// v1 left, which c's webhook knows: the intermediate CRD (c's, v1 kept) rewrites it at v2.
	if rw := p.Hops[0].Rewrites; len(rw) != 1 || rw[0].Release != "v0.2.0" || rw[0].To != "v1" || !strings.Contains(rw[0].Conversion, "/b") {
		t.Errorf("hop 1 rewrites: %+v", rw)
	}
	if rw := p.Hops[1].Rewrites; len(rw) != 1 || rw[0].Release != "v0.3.0" || rw[0].To != "v2" || !strings.Contains(rw[0].Conversion, "/c") {
		t.Errorf("hop 2 rewrites: %+v", rw)
	}
	if p.Hops[1].Plan == nil || len(p.Hops[1].Plan.Items) != 1 || p.Hops[1].Plan.Items[0].StorageVersion.Before != "v1" {
		t.Errorf("hop 2 is not planned from the state hop 1 leaves: %+v", p.Hops[1].Plan)
	}
}

// Objects stored at a version the target still has need no hop; None between identical
// schemas relabels; None between differing schemas needs a release.
func TestPathDirect(t *testing.T) {
	ctx := context.Background()
	live := pathCRD("", []string{"v1"}, "v1")
	p, err := Path(ctx, ReleaseClients{}, PathOptions{Target: rel("v2", pathCRD("c", nil, "v1", "v2")), Release: ReleaseOptions{Live: []*apiextensionsv1.CustomResourceDefinition{live}}})
	if err != nil || !p.Direct || len(p.Hops) != 1 {
		t.Fatalf("direct: %v %+v", err, p)
	}
	// The target drops v1 with conversion None: v1's and v2's schemas differ.
	lossy := pathCRD("", nil, "v2")
	p, err = Path(ctx, ReleaseClients{}, PathOptions{Target: rel("v3", lossy), Release: ReleaseOptions{Live: []*apiextensionsv1.CustomResourceDefinition{live}}})
	if err != nil || p.Reachable || !strings.Contains(p.Verdict, "conversion None") {
		t.Fatalf("lossy None: %v %+v", err, p)
	}
	// v2's schema keeps every field of v1 (and adds one): None relabels without loss.
	same := pathCRD("", nil, "v2")
	same.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"].Properties["fv1"] = apiextensionsv1.JSONSchemaProps{Type: "string"}
	p, err = Path(ctx, ReleaseClients{}, PathOptions{Target: rel("v3", same), Release: ReleaseOptions{Live: []*apiextensionsv1.CustomResourceDefinition{live}}})
	if err != nil || !p.Direct {
		t.Fatalf("identical schemas: %v %+v", err, p)
	}
}

func TestSortReleases(t *testing.T) {
	got, skipped := SortReleases([]string{"v1.10.0", "samples", "v1.2.1", "v0.5.1", "source-controller-v1.7.4", "history", "v1.2.0-rc.1"})
	want := "v0.5.1 v1.2.0-rc.1 v1.2.1 source-controller-v1.7.4 v1.10.0"
	if strings.Join(got, " ") != want || strings.Join(skipped, " ") != "samples history" {
		t.Fatalf("got %v, skipped %v", got, skipped)
	}
}
