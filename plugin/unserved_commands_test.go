package plugin

import (
	"context"
	"regexp"
	"slices"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/crdver/kubectl-crdver/internal/testcrd"
)

// patchBody is the JSON patch of a `kubectl patch … -p '…'` command.
var patchBody = regexp.MustCompile(`-p '([^']+)'`)

// runAdvice carries out a `kubectl patch crd NAME --type=json -p '…'` command our advice
// gave, through the API (the same request kubectl sends).
func (h *unservedHistory) runAdvice(t *testing.T, text string) {
	t.Helper()
	i := strings.Index(text, "kubectl patch crd "+h.name+" --type=json")
	if i < 0 {
		t.Fatalf("no serve command for %s in:\n%s", h.name, text)
	}
	m := patchBody.FindStringSubmatch(text[i:])
	if m == nil || !strings.Contains(m[1], `"value":true`) {
		t.Fatalf("serve command without a patch that serves: %q", text[i:])
	}
	if _, err := h.crds.ApiextensionsV1().CustomResourceDefinitions().Patch(context.Background(), h.name, types.JSONPatchType, []byte(m[1]), metav1.PatchOptions{}); err != nil {
		t.Fatalf("the advised command fails: %v", err)
	}
}

// TestCommandsWithStoredUnservedVersion: versions --can-remove, doctor, migrate and retire on
// a CRD whose v1alpha1 is in status.storedVersions, not served, and holds objects (one with a
// field v1beta1 lacks). None crashes on a 404 or passes on an assumption: each says the
// answer is unknown (or not safe) and gives the command that serves v1alpha1 again; after
// that command, each answers from the objects as stored.
func TestCommandsWithStoredUnservedVersion(t *testing.T) {
	isolateCache(t)
	h := setupUnservedHistory(t, "cmds.unserved.example.com", true)
	before := h.state(t)
	notFound := func(what string, r result) {
		t.Helper()
		if strings.Contains(r.stdout+r.stderr, "could not find the requested resource") {
			t.Errorf("%s: a 404 reached the user:\n%s\n%s", what, r.stdout, r.stderr)
		}
	}

	r := runCluster(t, "versions", h.name, "--can-remove", "v1alpha1")
	notFound("versions", r)
	if r.code != 1 {
		t.Errorf("versions --can-remove v1alpha1: exit %d, want 1\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	mustContain(t, "versions --can-remove", r.stderr, `version "v1alpha1" is not safe to remove: in status.storedVersions (serve it again, then migrate)`)

	r = runCluster(t, "doctor", h.name)
	notFound("doctor", r)
	if r.code != 3 {
		t.Errorf("doctor: exit %d, want 3 (the data-loss answer is unknown)\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	mustContain(t, "doctor", r.stderr, "unknown: "+h.name+" data-loss: v1alpha1 is in status.storedVersions but not served", "kubectl patch crd "+h.name+" --type=json")

	for _, args := range [][]string{{"migrate", h.name, "--yes"}, {"retire", h.name, "v1alpha1", "--yes"}} {
		r = runCluster(t, args...)
		notFound(args[0], r)
		if r.code != 1 {
			t.Errorf("%s: exit %d, want 1 (refused)\n%s\n%s", args[0], r.code, r.stdout, r.stderr)
		}
		mustContain(t, args[0]+" refusal", r.stderr, "what the rewrite loses is unknown", "nothing was written", "--allow-data-loss")
		mustContain(t, args[0]+" refusal", r.stdout, "v1alpha1 is in status.storedVersions but not served", "kubectl patch crd "+h.name)
		if strings.Contains(r.stderr, "--skip-invalid") {
			t.Errorf("%s: names --skip-invalid, which would not help:\n%s", args[0], r.stderr)
		}
		diffStates(t, args[0]+" refused", before, h.state(t))
	}

	// The advice, followed: v1alpha1 served again. Now the loss held only at v1alpha1 is seen.
	h.runAdvice(t, r.stdout)
	r = runCluster(t, "migrate", h.name, "--yes")
	if r.code != 1 {
		t.Fatalf("migrate after serving v1alpha1: exit %d, want 1\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	mustContain(t, "migrate after serving", r.stdout, "t-gitops", ".spec.legacy", "v1alpha1")
	mustContain(t, "migrate after serving", r.stderr, "would lose fields", "--allow-data-loss")
	if strings.Contains(r.stderr, "unknown") || strings.Contains(r.stderr, "--skip-invalid") {
		t.Errorf("migrate after serving: still unknown, or bad advice:\n%s", r.stderr)
	}
	r = runCluster(t, "doctor", h.name)
	if r.code != 1 || strings.Contains(r.stderr, "unknown:") {
		t.Errorf("doctor after serving: exit %d, want 1 (a data-loss error, nothing unknown)\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	mustContain(t, "doctor after serving", r.stdout, "t-gitops")
	r = runCluster(t, "versions", h.name, "--can-remove", "v1alpha1")
	mustContain(t, "versions after serving", r.stderr, `version "v1alpha1" is not safe to remove: in status.storedVersions (migrate first)`)

	// With the loss accepted, migrate completes (its rewrite moves the managedFields entries
	// of v1alpha1 too, keeping each manager): v1alpha1 is then held by nothing the cluster
	// records, and --can-remove says so, and what it cannot see (readers).
	if r = runCluster(t, "migrate", h.name, "--yes", "--allow-data-loss"); r.code != 0 {
		t.Fatalf("migrate --allow-data-loss: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	if crd := h.crd(t); !slices.Equal(crd.Status.StoredVersions, []string{"v1beta1"}) {
		t.Errorf("after migrate: storedVersions %v, want [v1beta1]", crd.Status.StoredVersions)
	}
	beta := schema.GroupVersionResource{Group: h.group, Version: "v1beta1", Resource: "things"}
	for n, manager := range map[string]string{"t-gitops": "gitops", "t-created": "kubectl-create"} {
		u, err := h.dyn.Resource(beta).Namespace("default").Get(context.Background(), n, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		found := false
		for _, e := range u.GetManagedFields() {
			found = found || e.Manager == manager
			if e.APIVersion != h.group+"/v1beta1" {
				t.Errorf("%s: entry of %s names %s after migrate", n, e.Manager, e.APIVersion)
			}
		}
		if !found {
			t.Errorf("%s: manager %s lost by migrate", n, manager)
		}
	}
	r = runCluster(t, "versions", h.name, "--can-remove", "v1alpha1")
	if r.code != 0 {
		t.Errorf("versions --can-remove v1alpha1 after migrate: exit %d, want 0\n%s", r.code, r.stderr)
	}
	mustContain(t, "versions, migrated", r.stderr, "neither stored nor named by managedFields", "clients that still request it")
}

// TestCommandsWithServedNotStoredVersion: gadgets.<group> has v1 (storage) and v1beta1,
// served and never stored; one object was written at v1beta1 by server-side apply, so a
// managedFields entry names v1beta1. What holds v1beta1 is that entry only: --can-remove
// says so (and how to move it), migrate has nothing to do, doctor finds nothing unknown,
// retire moves the entry keeping its manager, and then --can-remove says safe.
func TestCommandsWithServedNotStoredVersion(t *testing.T) {
	isolateCache(t)
	ctx := context.Background()
	group := "served.unserved.example.com"
	crd := testcrd.New(group, "Gadget", testcrd.Version("v1beta1", true, false, thingSchema(false)), testcrd.Version("v1", true, true, thingSchema(false)))
	if _, err := env.CreateCRD(ctx, crd.DeepCopy()); err != nil {
		t.Fatal(err)
	}
	h := &unservedHistory{group: group, name: crd.Name}
	var err error
	hh := setupClients(t)
	h.crds, h.dyn = hh.crds, hh.dyn
	v1 := schema.GroupVersionResource{Group: group, Version: "v1", Resource: "gadgets"}
	beta := schema.GroupVersionResource{Group: group, Version: "v1beta1", Resource: "gadgets"}
	u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": group + "/v1", "kind": "Gadget",
		"metadata": map[string]any{"name": "g", "namespace": "default"}, "spec": map[string]any{"size": int64(1)}}}
	if _, err = h.dyn.Resource(v1).Namespace("default").Create(ctx, u, metav1.CreateOptions{FieldManager: "kubectl-create"}); err != nil {
		t.Fatal(err)
	}
	body := `{"apiVersion":"` + group + `/v1beta1","kind":"Gadget","metadata":{"name":"g","namespace":"default"},"spec":{"color":"blue"}}`
	if _, err = h.dyn.Resource(beta).Namespace("default").Patch(ctx, "g", types.ApplyPatchType, []byte(body), metav1.PatchOptions{FieldManager: "beta-writer"}); err != nil {
		t.Fatal(err)
	}
	if c := h.crd(t); !slices.Equal(c.Status.StoredVersions, []string{"v1"}) {
		t.Fatalf("storedVersions %v, want [v1]", c.Status.StoredVersions)
	}

	r := runCluster(t, "versions", h.name, "--can-remove", "v1beta1")
	if r.code != 1 {
		t.Errorf("versions --can-remove v1beta1: exit %d, want 1\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	mustContain(t, "versions --can-remove", r.stderr, "1 object(s) hold managedFields entries of it", "kubectl crdver retire "+h.name+" v1beta1")
	r = runCluster(t, "doctor", h.name)
	if r.code == 3 || strings.Contains(r.stderr, "unknown:") {
		t.Errorf("doctor: exit %d, an unknown answer where everything is readable\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	if r = runCluster(t, "migrate", h.name, "--yes"); r.code != 0 {
		t.Errorf("migrate: exit %d, want 0 (nothing stored at v1beta1)\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	if r = runCluster(t, "retire", h.name, "v1beta1", "--yes"); r.code != 0 {
		t.Fatalf("retire v1beta1: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	got, err := h.dyn.Resource(v1).Namespace("default").Get(ctx, "g", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var managers []string
	for _, e := range got.GetManagedFields() {
		managers = append(managers, e.Manager)
		if e.APIVersion != group+"/v1" {
			t.Errorf("after retire: entry of %s names %s", e.Manager, e.APIVersion)
		}
	}
	if !slices.Contains(managers, "beta-writer") || !slices.Contains(managers, "kubectl-create") {
		t.Errorf("after retire: managers %v, want beta-writer and kubectl-create kept", managers)
	}
	if c, _, _ := unstructured.NestedString(got.Object, "spec", "color"); c != "blue" {
		t.Errorf("after retire: spec.color %q, want blue", c)
	}
	r = runCluster(t, "versions", h.name, "--can-remove", "v1beta1")
	if r.code != 0 {
		t.Errorf("versions --can-remove v1beta1 after retire: exit %d, want 0\n%s", r.code, r.stderr)
	}
	mustContain(t, "versions, retired", r.stderr, "clients that still request it")
}
