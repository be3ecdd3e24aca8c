package plan

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"

	crdinfo "github.com/crdver/kubectl-crdver/crd"
	"github.com/crdver/kubectl-crdver/internal/testenv"
	"github.com/crdver/kubectl-crdver/kubeversion"
	"github.com/crdver/kubectl-crdver/preflight"
)

// ownershipLossCRD: v1alpha1 (served) and v1 (storage), both with spec.a and spec.gone.
// Conversion None.
const ownershipLossCRD = `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: gadgets.ownloss.plan.example.com
spec:
  group: ownloss.plan.example.com
  scope: Namespaced
  names: {plural: gadgets, singular: gadget, kind: Gadget, listKind: GadgetList}
  versions:
  - name: v1alpha1
    served: true
    storage: false
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              a: {type: string}
              gone: {type: string}
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              a: {type: string}
              gone: {type: string}
`

// TestPlanOwnershipLossMatchesPreflight (issue 40, item 8): on kube-apiserver 1.34, objects
// applied at v1alpha1 by gitops, then the CRD changed for real: v1alpha1 removed (never
// stored), spec.gone removed from v1's schema. The new release adds v2 (storage):
//
//   - stale: gitops's v1alpha1 entry owns spec.gone, which the object no longer shows, so the
//     rewrite at v2 must read the object at v1alpha1 to move it (ownership.NeedsSource) and
//     cannot (not a version of the CRD): the entry is left, the field manager cannot convert
//     the object to v1alpha1 and 1.34 drops every entry (editor's, at v1, too);
//   - movable: gitops's v1alpha1 entry owns spec.a only: the rewrite moves it to v2.
//
// Plan names stale and both its managers as ownership-loss, nothing for movable; the preflight
// of the rewrite at v2 (the API server's dry run of the write, once the release's CRD is
// applied) lists exactly the same; the runbook's rewrite step carries --allow-ownership-loss
// naming stale. Judged as 1.37 (which keeps the live entries of a failed update), plan
// predicts no loss.
func TestPlanOwnershipLossMatchesPreflight(t *testing.T) {
	older := testenv.StartBuiltMinor(t, "1.34")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	initial, err := crdinfo.Decode([]byte(ownershipLossCRD))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := older.CreateCRD(ctx, initial); err != nil {
		t.Fatal(err)
	}
	dyn := dynamic.NewForConfigOrDie(older.Config)
	gvr := func(v string) schema.GroupVersionResource {
		return schema.GroupVersionResource{Group: initial.Spec.Group, Version: v, Resource: "gadgets"}
	}
	at := func(v string) dynamic.ResourceInterface { return dyn.Resource(gvr(v)).Namespace("default") }
	for name, spec := range map[string]string{"stale": `{"a":"1","gone":"g"}`, "movable": `{"a":"1"}`} {
		body := `{"apiVersion":"ownloss.plan.example.com/v1alpha1","kind":"Gadget","metadata":{"name":"` + name + `","namespace":"default"},"spec":` + spec + `}`
		if _, err := at("v1alpha1").Patch(ctx, name, types.ApplyPatchType, []byte(body), metav1.PatchOptions{FieldManager: "gitops"}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := at("v1").Patch(ctx, "stale", types.MergePatchType, []byte(`{"metadata":{"labels":{"team":"data"}}}`), metav1.PatchOptions{FieldManager: "editor"}); err != nil {
		t.Fatal(err)
	}
	crds := apiextensionsclient.NewForConfigOrDie(older.Config).ApiextensionsV1().CustomResourceDefinitions()
	update := func(change func(*apiextensionsv1.CustomResourceDefinition)) *apiextensionsv1.CustomResourceDefinition {
		cur, err := crds.Get(ctx, initial.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		change(cur)
		if _, err := crds.Update(ctx, cur, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		cur, err = older.WaitEstablished(ctx, initial.Name)
		if err != nil {
			t.Fatal(err)
		}
		return cur
	}
	live := update(func(c *apiextensionsv1.CustomResourceDefinition) {
		c.Spec.Versions = c.Spec.Versions[1:]
		delete(c.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"].Properties, "gone")
	})
	next := live.DeepCopy()
	v2 := *next.Spec.Versions[0].DeepCopy()
	v2.Name = "v2"
	next.Spec.Versions[0].Storage = false
	next.Spec.Versions = append(next.Spec.Versions, v2)

	planAs := func(v kubeversion.Version) *Item {
		release, err := kubeversion.Use(v)
		if err != nil {
			t.Fatal(err)
		}
		defer release()
		it, err := Plan(ctx, live, next, NewClusterSource(dyn, gvr("v1"), 0), Options{KubeVersion: v})
		if err != nil {
			t.Fatal(err)
		}
		return it
	}
	it := planAs(kubeversion.Version{Major: 1, Minor: 34})
	planned := map[string][]string{}
	for _, f := range it.Objects.Findings {
		if f.ManagersLost != nil {
			if f.ManagersLost.Unknown != "" {
				t.Errorf("%s: unknown: %s", f.Name, f.ManagersLost.Unknown)
			}
			planned[f.Name] = slices.Sorted(slices.Values(f.ManagersLost.Lost))
		}
	}
	want := []string{"editor (Update at ownloss.plan.example.com/v1)", "gitops (Apply at ownloss.plan.example.com/v1alpha1)"}
	if !slices.Equal(planned["stale"], want) || len(planned) != 1 {
		t.Errorf("plan predicts lost managers %v, want stale: %v", planned, want)
	}
	if !slices.Contains(it.Kinds, KindOwnershipLoss) || it.Verdict != VerdictBreaking {
		t.Errorf("kinds %v verdict %s", it.Kinds, it.Verdict)
	}
	steps := Runbook([]Item{*it}, RunbookOptions{})
	var consented []RunbookStep
	for _, s := range steps {
		if slices.ContainsFunc(s.Commands, func(c string) bool { return strings.Contains(c, "--allow-ownership-loss") }) {
			consented = append(consented, s)
		}
	}
	if len(consented) == 0 || consented[0].Action != ActionMigrate || !strings.Contains(consented[0].Why, "default/stale (gitops (Apply at ownloss.plan.example.com/v1alpha1), editor (Update at") {
		t.Errorf("the rewrite step does not carry the consent naming stale: %+v", steps)
	}

	// The release's CRD applied (v2 the storage version), the preflight of the rewrite at v2.
	applied := update(func(c *apiextensionsv1.CustomResourceDefinition) { c.Spec.Versions = next.Spec.Versions })
	pf, err := preflight.Check(ctx, dyn, applied, preflight.Options{Target: "v2"})
	if err != nil {
		t.Fatal(err)
	}
	refused := map[string][]string{}
	for _, l := range pf.OwnershipLosses {
		refused[l.Name] = slices.Sorted(slices.Values(l.Lost))
	}
	t.Logf("plan: %v; preflight: %v", planned, refused)
	if len(refused) != len(planned) || !slices.Equal(refused["stale"], planned["stale"]) {
		t.Errorf("the preflight's dry run loses %v, plan predicts %v", refused, planned)
	}

	if it := planAs(kubeversion.Newest); slices.Contains(it.Kinds, KindOwnershipLoss) {
		t.Errorf("judged as %s (which keeps the live entries of a failed update), plan predicts ownership loss: %v", kubeversion.Newest, it.BreakingReasons)
	}
}
