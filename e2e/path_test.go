package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"

	crdinfo "github.com/crdver/kubectl-crdver/crd"
	"github.com/crdver/kubectl-crdver/internal/testenv"
	"github.com/crdver/kubectl-crdver/internal/testwebhook"
	"github.com/crdver/kubectl-crdver/plan"
	"github.com/crdver/kubectl-crdver/upgrade"
)

// pathRelease writes a CronTab release (group path.example.com) holding versions (the last is
// the storage version) from testdata/crds/crontab-webhook.yaml: v1beta1 spec.hostPort, v1 and
// v2 (v1's schema) spec.host and spec.port; with wh, conversion by that real HTTPS webhook
// (v1beta1 ↔ v1 converts hostPort, other pairs relabel), else None.
func pathRelease(t *testing.T, dir, name string, wh *testwebhook.Server, versions ...string) string {
	t.Helper()
	src := testenv.LoadCRD(t, "crontab-webhook.yaml")
	crd := testenv.ForServer(src)
	crd.Name, crd.Spec.Group = "crontabs.path.example.com", "path.example.com"
	byName := map[string]apiextensionsv1.CustomResourceDefinitionVersion{}
	for _, v := range src.Spec.Versions {
		byName[v.Name] = v
	}
	v1 := byName["v1"]
	v2 := *v1.DeepCopy()
	v2.Name = "v2"
	byName["v2"] = v2
	crd.Spec.Versions = nil
	for i, n := range versions {
		src := byName[n]
		v := *src.DeepCopy()
		v.Served, v.Storage, v.Deprecated, v.DeprecationWarning = true, i == len(versions)-1, false, nil
		crd.Spec.Versions = append(crd.Spec.Versions, v)
	}
	crd.Spec.Conversion = &apiextensionsv1.CustomResourceConversion{Strategy: apiextensionsv1.NoneConverter}
	if wh != nil {
		crd.Spec.Conversion = wh.WebhookConversion("v1")
	}
	b, err := yaml.Marshal(crd)
	if err != nil {
		t.Fatal(err)
	}
	d := filepath.Join(dir, name)
	if err := os.MkdirAll(d, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(d, "crontabs.yaml"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	return d
}

// TestPathNeedsIntermediateRelease: objects stored at v1beta1 under release v0.1.0 (None);
// the target v0.3.0 has v1 and v2 (webhook) and no v1beta1, and the live CRD lacks v2, so the
// rewrite would go through v0.3.0's webhook, which does not know v1beta1: only v0.2.0's
// (v1beta1 ↔ v1) converts them. plan names v0.2.0; the API server rejects the target applied
// as is; upgrade refuses before any write without v0.2.0, stops before hop 1 while its
// webhook does not answer, and completes along v0.2.0 → v0.3.0 once it does: objects stored
// at v2 with hostPort converted to host and port, managers kept, storedVersions [v2].
func TestPathNeedsIntermediateRelease(t *testing.T) {
	h := newHarness(t, release{Project: "path"})
	wh := testwebhook.StartForTest(t, testwebhook.Options{})
	t.Cleanup(h.deleteCRDs) // before the webhook stops
	dir := t.TempDir()
	a := pathRelease(t, dir, "v0.1.0", nil, "v1beta1")
	a2 := pathRelease(t, dir, "v0.1.5", nil, "v1beta1")
	b := pathRelease(t, dir, "v0.2.0", wh, "v1beta1", "v1")
	c := pathRelease(t, dir, "v0.3.0", wh, "v1", "v2")
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
			"spec":     map[string]any{"cronSpec": "*/5 * * * *", "image": n + ":1", "hostPort": n + ".internal:5432"},
		}}
		if _, err := h.dyn.Resource(gvr("v1beta1")).Namespace("path").Create(h.ctx, obj, metav1.CreateOptions{FieldManager: managerCreate}); err != nil {
			t.Fatal(err)
		}
	}
	rv := func() string { return h.liveCRD(name).ResourceVersion }
	before := rv()

	// plan: the direct jump is not reachable, and names the version and the webhook.
	p := h.crdver("plan", "--via", a2, "-f", c, "-o", "json")
	var direct plan.PathReport
	if err := json.Unmarshal([]byte(p.stdout), &direct); err != nil || p.code != 1 || direct.Reachable {
		t.Fatalf("plan --via v0.1.5 -f v0.3.0: exit %d, %v\n%s\n%s", p.code, err, p.stdout, p.stderr)
	}
	if !strings.Contains(direct.Verdict, "v1beta1") || !strings.Contains(direct.Verdict, "does not know") {
		t.Errorf("direct verdict: %s", direct.Verdict)
	}
	t.Logf("direct jump verdict: %s", direct.Verdict)
	// The API server applied as is: the target removes a stored version.
	if r := h.kubectl("apply", "--server-side", "-f", c); r.err == nil || !strings.Contains(r.stderr, "storedVersions") {
		t.Errorf("kubectl apply of v0.3.0 as is: %v\n%s", r.err, r.stderr)
	} else {
		t.Logf("the API server on the direct apply: %s", strings.TrimSpace(r.stderr))
	}

	// plan through the releases: v0.2.0 first (v0.1.5 is skipped).
	p = h.crdver("plan", "--via", a2, "--via", b, "-f", c, "-o", "json")
	var path plan.PathReport
	if err := json.Unmarshal([]byte(p.stdout), &path); err != nil {
		t.Fatalf("plan --via: exit %d, %v\n%s\n%s", p.code, err, p.stdout, p.stderr)
	}
	var hops []string
	for _, hp := range path.Hops {
		hops = append(hops, hp.Release)
	}
	if !path.Reachable || !slices.Equal(hops, []string{"v0.2.0", "v0.3.0"}) || len(path.CRDs) != 1 || !slices.Equal(path.CRDs[0].Via, []string{"v0.2.0"}) {
		t.Fatalf("path: reachable %v, hops %v, crds %+v", path.Reachable, hops, path.CRDs)
	}
	if rw := path.Hops[0].Rewrites; len(rw) != 1 || !rw[0].Checked || !rw[0].Answers || rw[0].To != "v1" {
		t.Errorf("hop 1's rewrite and its webhook: %+v", rw)
	}
	if human := h.crdver("plan", "--via", a2, "--via", b, "-f", c); !strings.Contains(human.stdout, "HOP") || !strings.Contains(human.stdout, "Hop 2: v0.3.0") {
		t.Errorf("plan --via for people:\n%s", human.stdout)
	}

	// upgrade without v0.2.0: refused before any write.
	backup := filepath.Join(t.TempDir(), "backup.yaml")
	if u := h.crdver("upgrade", "--via", a2, "-f", c, "--yes", "--backup", backup); u.code != 1 || rv() != before {
		t.Fatalf("upgrade without v0.2.0: exit %d, CRD written %v\n%s\n%s", u.code, rv() != before, u.stdout, u.stderr)
	}
	// v0.2.0's webhook does not answer: stopped before hop 1, nothing written.
	wh.Set(testwebhook.Non200)
	u := h.crdver("upgrade", "--via", a2, "--via", b, "-f", c, "--yes", "--backup", backup)
	if u.code != 1 || !strings.Contains(u.stderr, "before hop 1 (v0.2.0)") || rv() != before {
		t.Fatalf("upgrade with v0.2.0's webhook down: exit %d, CRD written %v\n%s\n%s", u.code, rv() != before, u.stdout, u.stderr)
	}
	// Once it answers, the same command takes the path.
	wh.Set(testwebhook.Good)
	start := time.Now()
	u = h.crdver("upgrade", "--via", a2, "--via", b, "-f", c, "--yes", "--backup", backup, "-o", "json")
	took := time.Since(start)
	var rep upgrade.PathReport
	if err := json.Unmarshal([]byte(u.stdout), &rep); err != nil || u.code != 0 {
		t.Fatalf("upgrade along the path: exit %d, %v\n%s\n%s", u.code, err, u.stdout, u.stderr)
	}
	t.Logf("upgrade along the path (2 hops): %s", took.Round(time.Millisecond))
	if len(rep.Hops) != 2 || !rep.Outcome.Applied || !rep.Outcome.Verified {
		t.Errorf("path outcome: %d hops, %+v", len(rep.Hops), rep.Outcome)
	}
	if len(rep.Hops) == 2 && (rep.Hops[0].Backup == nil || rep.Hops[1].Verify == nil || rep.Hops[0].Verify != nil) {
		t.Errorf("one backup (hop 1) and one verify (hop 2): backup %v, verify %v/%v", rep.Hops[0].Backup, rep.Hops[0].Verify, rep.Hops[1].Verify)
	}
	crd := h.liveCRD(name)
	if !slices.Equal(crd.Status.StoredVersions, []string{"v2"}) || storageVersion(crd) != "v2" || crdinfo.Has(crd, "v1beta1") {
		t.Errorf("CRD after the path: storage %s, storedVersions %v, versions %v", storageVersion(crd), crd.Status.StoredVersions, servedVersions(crd))
	}
	for _, n := range []string{"db", "cache"} {
		got, err := h.dyn.Resource(gvr("v2")).Namespace("path").Get(h.ctx, n, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		host, _, _ := unstructured.NestedString(got.Object, "spec", "host")
		port, _, _ := unstructured.NestedString(got.Object, "spec", "port")
		if host != n+".internal" || port != "5432" {
			t.Errorf("%s: spec.host %q port %q after the path (was hostPort %s.internal:5432)", n, host, port, n)
		}
		if !slices.ContainsFunc(got.GetManagedFields(), func(m metav1.ManagedFieldsEntry) bool { return m.Manager == managerCreate }) {
			t.Errorf("%s: manager %s lost", n, managerCreate)
		}
		stored, _, err := env.StoredObject(h.ctx, "path.example.com", "crontabs", "path", n)
		if err != nil || stored["apiVersion"] != "path.example.com/v2" {
			t.Errorf("%s: stored in etcd as %v (%v)", n, stored["apiVersion"], err)
		}
	}
	// Run again: the path is complete; nothing is written.
	after := rv()
	if u := h.crdver("upgrade", "--via", a2, "--via", b, "-f", c, "--yes", "--backup", backup+".2"); u.code != 0 || rv() != after {
		t.Errorf("upgrade along the path again: exit %d, CRD written %v\n%s\n%s", u.code, rv() != after, u.stdout, u.stderr)
	}
}
