package e2e

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/crdver/kubectl-crdver/plan"
	"github.com/crdver/kubectl-crdver/upgrade"
)

// TestPathFromURLs: the releases of a path given by URL (--via URL, -f URL), as a project
// publishes them: an HTTP server serves v0.2.0's and v0.3.0's CRDs, each under a folder named
// by its version. plan names the hops by those versions and goes through v0.2.0 (the target
// removes v1beta1, which the objects are stored at, and the live CRD lacks its storage
// version v2), judging both objects at hop 2 as hop 1 leaves them; upgrade along the URLs ends applied and verified, status.storedVersions [v2];
// a URL the server does not have is a usage error naming it.
func TestPathFromURLs(t *testing.T) {
	h := newHarness(t, release{Project: "path"})
	dir := t.TempDir()
	a := pathRelease(t, dir, "v0.1.0", nil, "v1beta1")
	pathRelease(t, dir, "v0.2.0", nil, "v1beta1", "v1")
	pathRelease(t, dir, "v0.3.0", nil, "v1", "v2")
	var served []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		served = append(served, r.URL.Path)
		http.FileServer(http.Dir(dir)).ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	via, target := srv.URL+"/v0.2.0/crontabs.yaml", srv.URL+"/v0.3.0/crontabs.yaml"

	const name = "crontabs.path.example.com"
	if r := h.applyCRDFile(filepath.Join(a, "crontabs.yaml")); r.err != nil {
		t.Fatalf("applying v0.1.0: %v\n%s", r.err, r.stderr)
	}
	h.ensureNamespace("path")
	gvr := func(v string) schema.GroupVersionResource {
		return schema.GroupVersionResource{Group: "path.example.com", Version: v, Resource: "crontabs"}
	}
	for _, n := range []string{"db", "cache"} {
		obj := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "path.example.com/v1beta1", "kind": "CronTab",
			"metadata": map[string]any{"name": n, "namespace": "path"},
			"spec":     map[string]any{"cronSpec": "*/5 * * * *", "image": n + ":1"},
		}}
		if _, err := h.dyn.Resource(gvr("v1beta1")).Namespace("path").Create(h.ctx, obj, metav1.CreateOptions{FieldManager: managerCreate}); err != nil {
			t.Fatal(err)
		}
	}

	p := h.crdver("plan", "--via", via, "-f", target, "-o", "json")
	var path plan.PathReport
	// Exit 1: hop 2 removes v1beta1, which the objects' managedFields name (a kind upgrade
	// carries out: its retire step moves them).
	if err := json.Unmarshal([]byte(p.stdout), &path); err != nil || p.code != 1 {
		t.Fatalf("plan --via URL -f URL: exit %d, %v\n%s\n%s", p.code, err, p.stdout, p.stderr)
	}
	var hops []string
	for _, hp := range path.Hops {
		hops = append(hops, hp.Release)
	}
	if !path.Reachable || path.Direct || !slices.Equal(hops, []string{"v0.2.0", "v0.3.0"}) || path.Hops[1].File != target {
		t.Fatalf("path from URLs: reachable %v direct %v hops %v (target file %q)", path.Reachable, path.Direct, hops, path.Hops[len(path.Hops)-1].File)
	}
	if it := path.Hops[1].Plan.Items[0]; !slices.Equal(it.Kinds, []plan.Kind{plan.KindManagedFields}) || it.Objects.Evaluated != 2 {
		t.Errorf("hop 2: kinds %v, %d objects evaluated; want managed-fields only, both objects", it.Kinds, it.Objects.Evaluated)
	}
	for _, want := range []string{"/v0.2.0/crontabs.yaml", "/v0.3.0/crontabs.yaml"} {
		if !slices.Contains(served, want) {
			t.Errorf("the server was not asked for %s (asked: %v)", want, served)
		}
	}

	backup := filepath.Join(t.TempDir(), "backup.yaml")
	u := h.crdver("upgrade", "--via", via, "-f", target, "--yes", "--backup", backup, "-o", "json")
	var rep upgrade.PathReport
	if err := json.Unmarshal([]byte(u.stdout), &rep); err != nil || u.code != 0 {
		t.Fatalf("upgrade --via URL -f URL: exit %d, %v\n%s\n%s", u.code, err, u.stdout, u.stderr)
	}
	if len(rep.Hops) != 2 || !rep.Outcome.Applied || !rep.Outcome.Verified {
		t.Errorf("upgrade along the URLs: %d hops, outcome %+v", len(rep.Hops), rep.Outcome)
	}
	if hop := rep.Hops[0].Hop; hop == nil || hop.File != via {
		t.Errorf("hop 1 applies %+v, want %s", hop, via)
	}
	crd := h.liveCRD(name)
	if !slices.Equal(crd.Status.StoredVersions, []string{"v2"}) || storageVersion(crd) != "v2" {
		t.Errorf("CRD after the path: storage %s, storedVersions %v", storageVersion(crd), crd.Status.StoredVersions)
	}
	for _, n := range []string{"db", "cache"} {
		got, err := h.dyn.Resource(gvr("v2")).Namespace("path").Get(h.ctx, n, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if img, _, _ := unstructured.NestedString(got.Object, "spec", "image"); img != n+":1" {
			t.Errorf("%s: spec.image %q after the path", n, img)
		}
	}

	missing := h.crdver("plan", "--via", srv.URL+"/v0.2.5/crontabs.yaml", "-f", target)
	if missing.code != 2 || !strings.Contains(missing.stderr, "/v0.2.5/crontabs.yaml") || !strings.Contains(missing.stderr, "404") {
		t.Errorf("--via a URL the server does not have: exit %d\n%s", missing.code, missing.stderr)
	}
}
