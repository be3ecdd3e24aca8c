package plan

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/crdver/kubectl-crdver/internal/testcrd"
)

// legacyCRD is gadgets.<group> with versions (name, storage, whether its schema has
// spec.legacy beside spec.size), conversion None.
func legacyCRD(group string, versions ...[3]any) *apiextensionsv1.CustomResourceDefinition {
	var opts []testcrd.Option
	for _, v := range versions {
		props := map[string]apiextensionsv1.JSONSchemaProps{"size": {Type: "integer"}}
		if v[2].(bool) {
			props["legacy"] = apiextensionsv1.JSONSchemaProps{Type: "string"}
		}
		opts = append(opts, testcrd.Versions(v[0].(string)), testcrd.Spec(props, v[0].(string)))
		if v[1].(bool) {
			opts = append(opts, testcrd.Storage(v[0].(string)))
		}
	}
	return testcrd.New(group, "Gadget", opts...)
}

// TestPathJudgesObjectsAtEveryHop (real API server): the cluster stores v1 with spec.legacy;
// v0.2.0 adds v2 (with legacy) as the storage version; the target v0.3.0 keeps v2 only,
// without legacy. plan.Path goes through v0.2.0 (the direct jump relabels v1 as v2 and
// prunes legacy) and judges the objects at hop 2 as hop 1 leaves them: the one holding
// legacy loses it there, a data-loss finding of hop 2's plan (before, hop 2 was planned with
// no objects).
func TestPathJudgesObjectsAtEveryHop(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	group := "hops.path.example.com"
	live := legacyCRD(group, [3]any{"v1", true, true})
	mid := legacyCRD(group, [3]any{"v1", false, true}, [3]any{"v2", true, true})
	target := legacyCRD(group, [3]any{"v2", true, false})
	env.CreateCRDForTest(t, live.DeepCopy())
	dyn := dynamic.NewForConfigOrDie(env.Config)
	res := dyn.Resource(schema.GroupVersionResource{Group: group, Version: "v1", Resource: "gadgets"}).Namespace("default")
	for name, spec := range map[string]map[string]any{"g-legacy": {"size": int64(1), "legacy": "keep-me"}, "g-plain": {"size": int64(2)}} {
		u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": group + "/v1", "kind": "Gadget", "metadata": map[string]any{"name": name, "namespace": "default"}, "spec": spec}}
		if _, err := res.Create(ctx, u, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	c := ReleaseClients{CRDs: apiextensionsclient.NewForConfigOrDie(env.Config), Dynamic: dyn, Kube: kubernetes.NewForConfigOrDie(env.Config)}
	rep, err := Path(ctx, c, PathOptions{
		Via:    []PathRelease{rel("v0.2.0", mid)},
		Target: rel("v0.3.0", target),
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Hops) != 2 || rep.Hops[0].Release != "v0.2.0" || !rep.Hops[0].Live || rep.Hops[1].Live {
		t.Fatalf("hops: %+v, want v0.2.0 (live) then v0.3.0", rep.Hops)
	}
	if rep.ExitCode != 1 {
		t.Errorf("exit %d, want 1 (hop 2 loses a field)", rep.ExitCode)
	}
	if fs := rep.Hops[0].Plan.Items[0].Objects.Findings; len(fs) != 0 {
		t.Errorf("hop 1 findings %+v, want none (v0.2.0 keeps legacy)", fs)
	}
	it := rep.Hops[1].Plan.Items[0]
	if it.Objects.Evaluated != 2 {
		t.Errorf("hop 2 evaluated %d objects, want 2 (notes %v)", it.Objects.Evaluated, it.Objects.Notes)
	}
	if len(it.Objects.Findings) != 1 || it.Objects.Findings[0].Name != "g-legacy" ||
		!slices.Contains(it.Objects.Findings[0].Kinds, KindDataLoss) || !slices.Contains(it.Objects.Findings[0].PrunedOnRead, "spec.legacy") {
		t.Errorf("hop 2 findings %+v, want g-legacy losing spec.legacy (data-loss)", it.Objects.Findings)
	}
}

// TestReadReleases: --releases takes the sub-folders named by version in version order up
// to the target, skipping (with a note) those without a version or without CRDs.
func TestReadReleases(t *testing.T) {
	dir := t.TempDir()
	for _, d := range []string{"v1.10.0", "v1.9.2", "v1.2.0", "samples", "v1.5.0-docs", "v2.0.0"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	read := func(path string, optional bool) ([]*apiextensionsv1.CustomResourceDefinition, error) {
		if strings.HasSuffix(path, "-docs") {
			return nil, nil
		}
		return []*apiextensionsv1.CustomResourceDefinition{legacyCRD("x.example.com", [3]any{"v1", true, false})}, nil
	}
	rels, notes, err := ReadReleases(nil, dir, []string{filepath.Join(dir, "v1.10.0")}, read)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, r := range rels {
		names = append(names, r.Name)
	}
	if !slices.Equal(names, []string{"v1.2.0", "v1.9.2"}) {
		t.Errorf("releases %v, want [v1.2.0 v1.9.2] (v1.5.0-docs holds no CRD; v1.10.0 is the target)", names)
	}
	if !slices.Equal(notes, []string{"skipped samples (no version in the name)", "skipped v1.5.0-docs (no CustomResourceDefinitions)"}) {
		t.Errorf("notes %q", notes)
	}
	if _, _, err := ReadReleases(nil, dir, []string{filepath.Join(dir, "v1.2.0")}, read); err == nil || !strings.Contains(err.Error(), "no release older than the target") {
		t.Errorf("a target older than every release: %v", err)
	}
}

// TestReleaseName: a release is named by its folder or file, or by the versioned folder its
// file is in (a release URL); the same name twice is told apart.
func TestReleaseName(t *testing.T) {
	for in, want := range map[string]string{
		"testdata/releases/cert-manager/v1.7.3": "v1.7.3",
		"v0.3.0/":                               "v0.3.0",
		"release.yaml":                          "release",
		"-":                                     "stdin",
		"https://github.com/cert-manager/cert-manager/releases/download/v1.7.3/cert-manager.crds.yaml": "v1.7.3",
		"http://127.0.0.1:8080/v0.2.0/crontabs.yaml":                                                   "v0.2.0",
		"http://127.0.0.1:8080/crds/standard-install-v1.2.1.yaml":                                      "standard-install-v1.2.1",
		"http://127.0.0.1:8080/crontabs.yaml":                                                          "crontabs",
	} {
		if got := ReleaseName(in); got != want {
			t.Errorf("ReleaseName(%q) = %q, want %q", in, got, want)
		}
	}
	rels := []PathRelease{{Name: "crds"}, {Name: "crds"}, {Name: "v1"}}
	uniqueNames(rels, "v1")
	if got := []string{rels[0].Name, rels[1].Name, rels[2].Name}; !slices.Equal(got, []string{"crds", "crds (2)", "v1 (2)"}) {
		t.Errorf("unique names: %v", got)
	}
}
