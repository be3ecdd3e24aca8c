package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"

	"github.com/crdver/kubectl-crdver/internal/testenv"
	"github.com/crdver/kubectl-crdver/plan"
	"github.com/crdver/kubectl-crdver/upgrade"
)

// capiRelease writes Cluster API release version's CRDs (testdata/releases/cluster-api), their
// conversion pointed at hook, one file per CRD in dir/<version>, and returns that folder.
func capiRelease(t *testing.T, dir, version string, hook *testenv.CAPIWebhook) string {
	t.Helper()
	d := filepath.Join(dir, version)
	if err := os.MkdirAll(d, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, crd := range testenv.CAPIReleaseCRDs(t, version, hook) {
		crd.APIVersion, crd.Kind = "apiextensions.k8s.io/v1", "CustomResourceDefinition"
		b, err := yaml.Marshal(crd)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d, crd.Name+".yaml"), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return d
}

var capiVar = regexp.MustCompile(`\$\{([A-Z_]+)(:-([^}]*))?\}`)

// capiObjects are the Cluster API objects of Cluster API's own v1beta1 e2e templates
// (testdata/manifests/cluster-api), rendered as `clusterctl generate cluster` does.
func capiObjects(t *testing.T) []*unstructured.Unstructured {
	t.Helper()
	values := map[string]string{
		"CLUSTER_NAME": "capi-e2e", "DOCKER_SERVICE_CIDRS": "10.128.0.0/12", "DOCKER_POD_CIDRS": "192.168.0.0/16",
		"DOCKER_SERVICE_DOMAIN": "cluster.local", "KUBERNETES_VERSION": "v1.33.1", "CONTROL_PLANE_MACHINE_COUNT": "1",
		"WORKER_MACHINE_COUNT": "2", "CLUSTER_CLASS_NAMESPACE": "capi",
	}
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	var out []*unstructured.Unstructured
	for _, f := range []string{"clusterclass-quick-start.yaml", "cluster-with-kcp.yaml", "md.yaml"} {
		b, err := os.ReadFile(filepath.Join(root, "testdata", "manifests", "cluster-api", f))
		if err != nil {
			t.Fatal(err)
		}
		text := capiVar.ReplaceAllStringFunc(string(b), func(m string) string {
			sub := capiVar.FindStringSubmatch(m)
			if v, ok := values[sub[1]]; ok {
				return v
			}
			return sub[3]
		})
		for _, doc := range strings.Split(text, "\n---\n") {
			var m map[string]any
			if err := yaml.Unmarshal([]byte(doc), &m); err != nil {
				t.Fatal(err)
			}
			if av, _ := m["apiVersion"].(string); av == "cluster.x-k8s.io/v1beta1" {
				u := &unstructured.Unstructured{Object: m}
				u.SetNamespace("capi")
				out = append(out, u)
			}
		}
	}
	return out
}

// TestPathClusterAPI: a cluster at Cluster API v1.8.4 (v1beta1 storage; v1alpha3/v1alpha4 no
// longer served), with a ClusterClass, a Cluster and a MachineDeployment from Cluster API's own
// templates written at v1beta1, taken to v1.14.2 (v1beta2 storage) through v1.13.6, with the
// CRDs' conversion by Cluster API's real webhook (built from sigs.k8s.io/cluster-api v1.14.2).
// plan computes the path; upgrade, with no --allow-data-loss (what Cluster API's round trip
// adds or normalises is reported, not a loss), ends applied and verified (exit 1: the
// MachineDeployment template's empty selector is invalid on re-create at v1beta2), storage
// v1beta2, storedVersions [v1beta2], every object stored at v1beta2 in etcd, no field read at
// v1beta1 before lost when read at v1beta1 after (through the webhook), its creator still a
// manager. Then upgrade -f v1.8.4 takes it back, again without --allow-data-loss: storage and
// storedVersions v1beta1, nothing lost.
func TestPathClusterAPI(t *testing.T) {
	hook := testenv.StartCAPIWebhook(t) // first: newHarness moves HOME, and so Go's caches
	h := newHarness(t, release{Project: "cluster-api"})
	t.Cleanup(h.deleteCRDs) // before the webhook stops
	dir := t.TempDir()
	old := capiRelease(t, dir, "v1.8.4", hook)
	via := capiRelease(t, dir, "v1.13.6", hook)
	target := capiRelease(t, dir, "v1.14.2", hook)
	files, _ := filepath.Glob(filepath.Join(old, "*.yaml"))
	var names []string
	for _, f := range files {
		if r := h.applyCRDFile(f); r.err != nil {
			t.Fatalf("applying %s: %v\n%s", f, r.err, r.stderr)
		}
		names = append(names, strings.TrimSuffix(filepath.Base(f), ".yaml"))
	}
	h.ensureNamespace("capi")
	plural := map[string]string{"Cluster": "clusters", "ClusterClass": "clusterclasses", "MachineDeployment": "machinedeployments"}
	gvr := func(kind, v string) schema.GroupVersionResource {
		return schema.GroupVersionResource{Group: "cluster.x-k8s.io", Version: v, Resource: plural[kind]}
	}
	objs := capiObjects(t)
	before := map[string]map[string]any{}
	for _, o := range objs {
		got, err := h.dyn.Resource(gvr(o.GetKind(), "v1beta1")).Namespace("capi").Create(h.ctx, o, metav1.CreateOptions{FieldManager: managerCreate})
		if err != nil {
			t.Fatalf("%s %s at v1beta1 on v1.8.4: %v", o.GetKind(), o.GetName(), err)
		}
		before[o.GetKind()+"/"+o.GetName()] = got.Object
	}
	if len(objs) != 3 {
		t.Fatalf("%d Cluster API objects in the templates, want 3", len(objs))
	}

	p := h.crdver("plan", "--via", via, "-f", target, "-o", "json")
	var path plan.PathReport
	if err := json.Unmarshal([]byte(p.stdout), &path); err != nil {
		t.Fatalf("plan --via v1.13.6 -f v1.14.2: exit %d, %v\n%s\n%s", p.code, err, p.stdout, p.stderr)
	}
	var hops []string
	for _, hp := range path.Hops {
		hops = append(hops, hp.Release)
	}
	t.Logf("plan: exit %d, reachable %v, hops %v, verdict %s", p.code, path.Reachable, hops, path.Verdict)
	if !path.Reachable {
		t.Fatalf("plan: the path is not reachable:\n%s\n%s", p.stdout, p.stderr)
	}
	if human := h.crdver("plan", "--via", via, "-f", target); testing.Verbose() {
		t.Logf("plan --via (for people): exit %d\n%s%s", human.code, human.stdout, human.stderr)
	}

	// No --allow-data-loss: Cluster API's round trip (v1beta1 -> v1beta2 -> v1beta1) adds to
	// each object (its conversion-data annotation, zero values) and writes durations anew;
	// by the loss rule (convert.Difference.Loss) that is reported, not a loss, so the
	// preflight lists no object losing a field and the upgrade goes on without consent.
	backup := filepath.Join(t.TempDir(), "backup.yaml")
	start := time.Now()
	u := h.crdver("upgrade", "--via", via, "-f", target, "--yes", "--backup", backup, "-o", "json")
	took := time.Since(start)
	var rep upgrade.PathReport
	// Exit 1 with only the MachineDeployment left invalid on re-create: the template's empty
	// selector (matchLabels: null) converts to a v1beta2 object without the required
	// .spec.selector (Cluster API's own defaulting webhook, not run here, would set it).
	if err := json.Unmarshal([]byte(u.stdout), &rep); err != nil || u.code != 1 ||
		!strings.Contains(u.stderr, "applied and verified; left for you: 1 object invalid on re-create (machinedeployments.cluster.x-k8s.io capi/capi-e2e-md-0)") {
		t.Fatalf("upgrade --via v1.13.6 -f v1.14.2 (no --allow-data-loss): exit %d, %v\n%s\n%s", u.code, err, u.stdout, u.stderr)
	}
	lost, added := map[string][]string{}, map[string][]string{}
	for i, hr := range rep.Hops {
		for _, d := range hr.Preflight.DataLoss {
			lost[d.CRD+" "+d.Name] = d.Fields
		}
		for _, d := range hr.Preflight.Added {
			added[d.CRD+" "+d.Name] = append(added[d.CRD+" "+d.Name], d.Added...)
		}
		if slices.Contains(hr.Outcome.Refusals, plan.KindDataLoss) {
			t.Errorf("hop %d refused for data loss: %+v", i+1, hr.Outcome)
		}
	}
	for _, hp := range rep.Preflight {
		for _, d := range hp.DataLoss {
			lost[d.CRD+" "+d.Name] = append(lost[d.CRD+" "+d.Name], d.Fields...)
		}
	}
	t.Logf("the preflight's fields added or normalised (not a loss): %v", added)
	if len(lost) > 0 {
		t.Errorf("the preflight lists fields as lost: %v", lost)
	}
	if len(added) == 0 {
		t.Errorf("the preflight lists nothing the conversion adds (Cluster API's conversion-data annotation at least)")
	}
	t.Logf("upgrade along the path (%d hop(s) run): %s, outcome %+v", len(rep.Hops), took.Round(time.Millisecond), rep.Outcome)
	if !rep.Outcome.Applied || !rep.Outcome.Verified {
		t.Errorf("outcome %+v", rep.Outcome)
	}
	for _, name := range names {
		crd := h.liveCRD(name)
		if !slices.Equal(crd.Status.StoredVersions, []string{"v1beta2"}) || storageVersion(crd) != "v1beta2" {
			t.Errorf("%s after the path: storage %s, storedVersions %v", name, storageVersion(crd), crd.Status.StoredVersions)
		}
		if crd.Spec.Conversion == nil || crd.Spec.Conversion.Strategy != apiextensionsv1.WebhookConverter {
			t.Errorf("%s: conversion %+v after the path", name, crd.Spec.Conversion)
		}
	}
	for _, o := range objs {
		what := o.GetKind() + "/" + o.GetName()
		stored, _, err := env.StoredObject(h.ctx, "cluster.x-k8s.io", plural[o.GetKind()], "capi", o.GetName())
		if err != nil || stored["apiVersion"] != "cluster.x-k8s.io/v1beta2" {
			t.Errorf("%s: stored in etcd as %v (%v)", what, stored["apiVersion"], err)
		}
		after, err := h.dyn.Resource(gvr(o.GetKind(), "v1beta1")).Namespace("capi").Get(h.ctx, o.GetName(), metav1.GetOptions{})
		if err != nil {
			t.Errorf("%s at v1beta1 after the path: %v", what, err)
			continue
		}
		if lost := lostFields(before[what], after.Object, "metadata.resourceVersion", "metadata.managedFields", "metadata.generation"); len(lost) > 0 {
			t.Errorf("%s: fields lost on the path: %v", what, lost)
		}
		if !slices.ContainsFunc(after.GetManagedFields(), func(m metav1.ManagedFieldsEntry) bool { return m.Manager == managerCreate }) {
			t.Errorf("%s: manager %s lost", what, managerCreate)
		}
	}

	// And back: upgrade -f v1.8.4 takes the cluster to v1beta1 storage again (through the same
	// webhook), every object readable at v1beta1 with no field of the original lost.
	back := h.crdver("upgrade", "-f", old, "--yes", "--backup", backup+".back")
	t.Logf("upgrade -f v1.8.4 (back): exit %d\n%s", back.code, lastLines(back.stderr, 3))
	if back.code != 0 {
		t.Fatalf("upgrade -f v1.8.4: exit %d\n%s%s", back.code, back.stdout, back.stderr)
	}
	for _, name := range names {
		crd := h.liveCRD(name)
		if !slices.Equal(crd.Status.StoredVersions, []string{"v1beta1"}) || storageVersion(crd) != "v1beta1" {
			t.Errorf("%s after the way back: storage %s, storedVersions %v", name, storageVersion(crd), crd.Status.StoredVersions)
		}
	}
	for _, o := range objs {
		what := o.GetKind() + "/" + o.GetName()
		after, err := h.dyn.Resource(gvr(o.GetKind(), "v1beta1")).Namespace("capi").Get(h.ctx, o.GetName(), metav1.GetOptions{})
		if err != nil {
			t.Errorf("%s at v1beta1 after the way back: %v", what, err)
			continue
		}
		if lost := lostFields(before[what], after.Object, "metadata.resourceVersion", "metadata.managedFields", "metadata.generation"); len(lost) > 0 {
			t.Errorf("%s: fields lost on the way back: %v", what, lost)
		}
	}
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
