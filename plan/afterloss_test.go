package plan

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"

	"github.com/crdver/kubectl-crdver/internal/testcrd"
)

// topologyCRD is a small Cluster API-like pair (ClusterClass 1.10 → 1.11): v1beta1 has
// spec.controlPlane.ref; v1beta2 has spec.controlPlane.templateRef instead, required. The
// release keeps v1beta1 served and makes v1beta2 the storage version (conversion None).
func topologyCRD(group string, withV1beta2 bool) *apiextensionsv1.CustomResourceDefinition {
	spec := func(cp apiextensionsv1.JSONSchemaProps) map[string]apiextensionsv1.JSONSchemaProps {
		return map[string]apiextensionsv1.JSONSchemaProps{"controlPlane": cp, "canary": {Type: "string"}}
	}
	opts := []testcrd.Option{testcrd.Versions("v1beta1"), testcrd.Storage("v1beta1"),
		testcrd.Spec(spec(apiextensionsv1.JSONSchemaProps{Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{"ref": {Type: "string"}}}))}
	if withV1beta2 {
		opts = append(opts, testcrd.Versions("v1beta2"), testcrd.Storage("v1beta2"),
			testcrd.Spec(spec(apiextensionsv1.JSONSchemaProps{Type: "object", Required: []string{"templateRef"}, Properties: map[string]apiextensionsv1.JSONSchemaProps{"templateRef": {Type: "string"}}}), "v1beta2"))
	}
	return testcrd.New(group, "Topology", opts...)
}

// TestPlanJudgesObjectsAfterTheConsentedLoss: an object that loses spec.controlPlane.ref
// (v1beta2 lacks it) is accepted on its next write (ratcheting) and on a re-create as listed
// (v1beta1 still has the field), but once the loss is consented to and the object rewritten
// at v1beta2, re-creating it is rejected: v1beta2 requires templateRef. The first plan names
// it in fix-invalid-on-recreate with the API server's error, as the plan after the rewrite
// (the upgrade's verify step) finds it — not only then.
func TestPlanJudgesObjectsAfterTheConsentedLoss(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	group := "afterloss.plan.example.com"
	old, next := topologyCRD(group, false), topologyCRD(group, true)
	env.CreateCRDForTest(t, old.DeepCopy())
	crds := apiextensionsclient.NewForConfigOrDie(env.Config)
	dyn := dynamic.NewForConfigOrDie(env.Config)
	at := func(v string) dynamic.ResourceInterface {
		return dyn.Resource(schema.GroupVersionResource{Group: group, Version: v, Resource: "topologies"}).Namespace("default")
	}
	for name, spec := range map[string]map[string]any{
		"with-ref": {"controlPlane": map[string]any{"ref": "kcp-template"}},
		"plain":    {"canary": "nothing to lose"},
	} {
		u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": group + "/v1beta1", "kind": "Topology",
			"metadata": map[string]any{"name": name, "namespace": "default"}, "spec": spec}}
		if _, err := at("v1beta1").Create(ctx, u, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	planOf := func() (*Item, []RunbookStep) {
		t.Helper()
		live, err := crds.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, old.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		src := NewClusterSource(dyn, schema.GroupVersionResource{Group: group, Version: ListVersion(live), Resource: "topologies"}, 10)
		it, err := Plan(ctx, live, next.DeepCopy(), src, Options{Workers: 2})
		if err != nil {
			t.Fatalf("plan: %v", err)
		}
		return it, Runbook([]Item{*it}, RunbookOptions{})
	}

	it, steps := planOf()
	f := findingOf(it, "with-ref")
	if f == nil || !slices.Equal(f.PrunedOnRead, []string{"spec.controlPlane.ref"}) || len(f.UpdateErrors) > 0 || len(f.CreateErrors) > 0 {
		t.Fatalf("fixture: with-ref should lose spec.controlPlane.ref, its write and re-create as listed accepted: %+v", f)
	}
	if findingOf(it, "plain") != nil {
		t.Errorf("plain loses nothing and has a finding: %+v", findingOf(it, "plain"))
	}
	if !slices.Equal(f.Kinds, []Kind{KindDataLoss, KindInvalidOnRecreate}) {
		t.Errorf("with-ref: kinds %v, want [%s %s]", f.Kinds, KindDataLoss, KindInvalidOnRecreate)
	}
	named := func(action string) []string {
		var out []string
		for _, s := range steps {
			if s.Action == action {
				out = append(out, s.Objects...)
			}
		}
		return out
	}
	if got := named(ActionConvertObjects); len(got) != 1 || !strings.HasPrefix(got[0], "default/with-ref:") {
		t.Errorf("convert-objects names %q, want default/with-ref", got)
	}
	if got := named(ActionFixRecreate); len(got) != 1 || !strings.HasPrefix(got[0], "default/with-ref") || !strings.Contains(got[0], "spec.controlPlane.templateRef: Required value") {
		t.Errorf("fix-invalid-on-recreate names %q, want default/with-ref and its error once the field is gone", got)
	}

	// The API server, after the consented loss: the release applied, the object rewritten at
	// v1beta2 (a no-op update, as migrate --allow-data-loss writes it) — accepted, as plan said.
	live, err := crds.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, old.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	upd := next.DeepCopy()
	upd.ResourceVersion = live.ResourceVersion
	if _, err := crds.ApiextensionsV1().CustomResourceDefinitions().Update(ctx, upd, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("applying the release: %v", err)
	}
	var held *unstructured.Unstructured
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 20*time.Second, true, func(ctx context.Context) (bool, error) {
		held, err = at("v1beta2").Get(ctx, "with-ref", metav1.GetOptions{})
		return err == nil, nil
	}); err != nil {
		t.Fatalf("v1beta2 not served: %v", err)
	}
	if _, err := at("v1beta2").Update(ctx, held, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("the rewrite at v1beta2 (plan said accepted): %v", err)
	}
	held, err = at("v1beta2").Get(ctx, "with-ref", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, found, _ := unstructured.NestedFieldNoCopy(held.Object, "spec", "controlPlane", "ref"); found {
		t.Fatalf("the rewrite kept spec.controlPlane.ref: %v", held.Object["spec"])
	}
	c := held.DeepCopy()
	for _, k := range serverMetadata {
		unstructured.RemoveNestedField(c.Object, "metadata", k)
	}
	c.SetName("with-ref-re")
	_, err = at("v1beta2").Create(ctx, c, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}, FieldValidation: "Strict"})
	compareVerdict(t, "with-ref", "re-create after the loss", err, f.CreateErrorsAfterLoss)

	// The plan after the rewrite (the verify step's) finds it invalid on re-create, with the
	// same errors the first plan gave.
	it, _ = planOf()
	after := findingOf(it, "with-ref")
	if after == nil || !slices.Equal(after.Kinds, []Kind{KindInvalidOnRecreate}) {
		t.Fatalf("plan after the rewrite: %+v, want with-ref invalid on re-create", after)
	}
	if d := cmp.Diff(sorted(after.RecreateErrors()), sorted(f.RecreateErrors())); d != "" {
		t.Errorf("re-create errors (-after the rewrite +first plan):\n%s", d)
	}
}
