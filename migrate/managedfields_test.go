package migrate

import (
	"context"
	"sort"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/crdver/kubectl-crdver/internal/testcrd"
)

// helmRepositoryCRD is modelled on Flux's HelmRepository (source.toolkit.fluxcd.io): v1beta1
// knows spec.url only; v1 adds spec.provider with a default, which appears on read once an
// object is encoded at v1. Conversion None.
func helmRepositoryCRD(group string) *apiextensionsv1.CustomResourceDefinition {
	props := map[string]apiextensionsv1.JSONSchemaProps{"url": {Type: "string"}, "interval": {Type: "string"}}
	return testcrd.New(group, "HelmRepository", testcrd.Versions("v1beta1", "v1"), testcrd.Storage("v1beta1"), testcrd.Spec(props),
		testcrd.Spec(map[string]apiextensionsv1.JSONSchemaProps{"url": props["url"], "interval": props["interval"],
			"provider": {Type: "string", Default: &apiextensionsv1.JSON{Raw: []byte(`"generic"`)}}}, "v1"))
}

// managerIDs names an object's field managers (manager/operation/subresource), sorted.
func managerIDs(entries []metav1.ManagedFieldsEntry) []string {
	var out []string
	for _, e := range entries {
		out = append(out, e.Manager+"/"+string(e.Operation)+"/"+e.Subresource)
	}
	sort.Strings(out)
	return out
}

// The Flux case of issue 15: HelmRepositories created at v1beta1 after v1 became the storage
// version, so that v1's new default (spec.provider) appears on read. A rewrite at v1 makes the
// API server's field manager convert the object to v1beta1 for the v1beta1 entries, which
// fails on spec.provider (not in v1beta1's schema). Up to 1.36 the API server then drops every
// managedFields entry (FieldManager.UpdateNoErrors; measured here with a 1.34.4 server: all
// managers gone, ManagedFieldsLost 3 without the move); 1.37 restores the live entries
// instead, so on the default test server the test fails without the move on its "moved to v1"
// checks. The rewrite moves those entries to v1 within the same update, so every manager
// survives on any version, and it compares the managers before and after each write. To run
// it against an older server: KUBEBUILDER_ASSETS=<folder with that kube-apiserver and etcd>.
func TestRewriteKeepsManagedFieldsOfOtherVersions(t *testing.T) {
	ctx := context.Background()
	group := "mf.source.example.com"
	crd := helmRepositoryCRD(group)
	env.CreateCRDForTest(t, crd)
	c, err := NewClients(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	kube := kubernetes.NewForConfigOrDie(env.Config)
	ns := "mf-flux"
	if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := SwitchStorage(ctx, c, crd.Name, "v1"); err != nil {
		t.Fatal(err)
	}
	dyn := dynamic.NewForConfigOrDie(env.Config)
	at := func(v string) dynamic.ResourceInterface {
		return dyn.Resource(schema.GroupVersionResource{Group: group, Version: v, Resource: "helmrepositories"}).Namespace(ns)
	}
	names := []string{"podinfo", "bitnami", "jetstack"}
	for _, n := range names {
		obj := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": group + "/v1beta1", "kind": "HelmRepository",
			"metadata": map[string]any{"name": n, "namespace": ns},
			"spec":     map[string]any{"url": "https://charts.example.com/" + n, "interval": "10m"},
		}}
		if _, err := at("v1beta1").Create(ctx, obj, metav1.CreateOptions{FieldManager: "kubectl-create"}); err != nil {
			t.Fatal(err)
		}
		// A second manager, as a GitOps applier would add (server-side apply at v1beta1).
		patch := `{"apiVersion":"` + group + `/v1beta1","kind":"HelmRepository","metadata":{"name":"` + n + `","labels":{"team":"platform"}}}`
		if _, err := at("v1beta1").Patch(ctx, n, "application/apply-patch+yaml", []byte(patch), metav1.PatchOptions{FieldManager: "flux-applier"}); err != nil {
			t.Fatal(err)
		}
	}
	before := map[string][]string{}
	for _, n := range names {
		u, err := at("v1").Get(ctx, n, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if p, _, _ := unstructured.NestedString(u.Object, "spec", "provider"); p != "generic" {
			t.Fatalf("%s: spec.provider read at v1 = %q, want the default to appear on read", n, p)
		}
		before[n] = managerIDs(u.GetManagedFields())
		if len(before[n]) != 2 {
			t.Fatalf("%s: managers before = %v, want kubectl-create and flux-applier", n, before[n])
		}
	}

	fresh, err := c.CRDs.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, crd.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	r, err := NewRewriter(c, fresh, RewriteOptions{Concurrency: 2})
	if err != nil {
		t.Fatal(err)
	}
	res, err := r.Run(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if res.Failed != 0 || res.Total() != int64(len(names)) {
		t.Fatalf("rewrite: %+v failures %v", res.Counts, res.Failures)
	}
	for _, n := range names {
		u, err := at("v1").Get(ctx, n, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		after := managerIDs(u.GetManagedFields())
		if strings.Join(after, ",") != strings.Join(before[n], ",") {
			t.Errorf("%s: managers after the rewrite = %v, want %v (managedFields lost)", n, after, before[n])
		}
		for _, e := range u.GetManagedFields() {
			if e.APIVersion != group+"/v1" {
				t.Errorf("%s: entry of %s still names %s, want it moved to v1", n, e.Manager, e.APIVersion)
			}
		}
	}
	if res.ManagedFieldsLost != 0 {
		t.Errorf("ManagedFieldsLost = %d (%v), want 0", res.ManagedFieldsLost, res.ManagedFieldsLosses)
	}
	if res.ManagedFieldsMoved < int64(len(names)) {
		t.Errorf("ManagedFieldsMoved = %d, want at least %d", res.ManagedFieldsMoved, len(names))
	}
}
