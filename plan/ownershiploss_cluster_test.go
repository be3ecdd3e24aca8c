package plan

import (
	"context"
	"fmt"
	"reflect"
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

	"github.com/crdver/kubectl-crdver/internal/testcrd"
	"github.com/crdver/kubectl-crdver/internal/testenv"
	"github.com/crdver/kubectl-crdver/kubeversion"
	"github.com/crdver/kubectl-crdver/preflight"
)

// gadgetsCRD is a CRD of kind Gadget in group, conversion None, with the given versions
// (name: the spec's string fields), the first of storage its storage version.
func gadgetsCRD(t *testing.T, group, storage string, versions [][2]string) *apiextensionsv1.CustomResourceDefinition {
	var opts []testcrd.Option
	for _, v := range versions {
		props := map[string]apiextensionsv1.JSONSchemaProps{}
		for _, f := range strings.Fields(v[1]) {
			props[f] = apiextensionsv1.JSONSchemaProps{Type: "string"}
		}
		opts = append(opts, testcrd.Version(v[0], true, v[0] == storage, nil), testcrd.Spec(props, v[0]))
	}
	return testcrd.New(group, "Gadget", opts...)
}

// ownershipLossCase is one CRD on an API server: objects written (write), the CRD changed for
// real (change; nil: none), then plan of next (the release) against the live CRD, the
// release's CRD applied and the preflight of the rewrite at target.
type ownershipLossCase struct {
	group    string
	initial  *apiextensionsv1.CustomResourceDefinition
	write    func(ctx context.Context, at func(v string) dynamic.ResourceInterface) error
	change   func(*apiextensionsv1.CustomResourceDefinition)
	next     func(live *apiextensionsv1.CustomResourceDefinition) *apiextensionsv1.CustomResourceDefinition
	listAt   string
	target   string
	wantLost map[string][]string
}

// run returns plan's item (judged as 1.34) and asserts plan and the preflight agree.
func (c ownershipLossCase) run(t *testing.T, e *testenv.Env) *Item {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if _, err := e.CreateCRD(ctx, c.initial); err != nil {
		t.Fatal(err)
	}
	dyn := dynamic.NewForConfigOrDie(e.Config)
	gvr := func(v string) schema.GroupVersionResource {
		return schema.GroupVersionResource{Group: c.group, Version: v, Resource: "gadgets"}
	}
	at := func(v string) dynamic.ResourceInterface { return dyn.Resource(gvr(v)).Namespace("default") }
	if err := c.write(ctx, at); err != nil {
		t.Fatal(err)
	}
	crds := apiextensionsclient.NewForConfigOrDie(e.Config).ApiextensionsV1().CustomResourceDefinitions()
	update := func(change func(*apiextensionsv1.CustomResourceDefinition)) *apiextensionsv1.CustomResourceDefinition {
		cur, err := crds.Get(ctx, c.initial.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if change != nil {
			change(cur)
			if _, err := crds.Update(ctx, cur, metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		if cur, err = e.WaitEstablished(ctx, c.initial.Name); err != nil {
			t.Fatal(err)
		}
		return cur
	}
	live := update(c.change)
	next := c.next(live)
	planAs := func(v kubeversion.Version) *Item {
		release, err := kubeversion.Use(v)
		if err != nil {
			t.Fatal(err)
		}
		defer release()
		it, err := Plan(ctx, live, next, NewClusterSource(dyn, gvr(c.listAt), 0), Options{KubeVersion: v})
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
	if !reflect.DeepEqual(planned, c.wantLost) {
		t.Errorf("plan predicts lost managers %v, want %v", planned, c.wantLost)
	}
	// The release's CRD applied, the preflight of the rewrite at the target.
	applied := update(func(c *apiextensionsv1.CustomResourceDefinition) { c.Spec.Versions = next.Spec.Versions })
	pf, err := preflight.Check(ctx, dyn, applied, preflight.Options{Target: c.target})
	if err != nil {
		t.Fatal(err)
	}
	refused := map[string][]string{}
	for _, l := range pf.OwnershipLosses {
		refused[l.Name] = slices.Sorted(slices.Values(l.Lost))
	}
	t.Logf("plan: %v; preflight: %v", planned, refused)
	if !reflect.DeepEqual(refused, planned) {
		t.Errorf("the preflight's dry run loses %v, plan predicts %v", refused, planned)
	}
	if it := planAs(kubeversion.Newest); slices.Contains(it.Kinds, KindOwnershipLoss) {
		t.Errorf("judged as %s (which keeps the live entries of a failed update), plan predicts ownership loss: %v", kubeversion.Newest, it.BreakingReasons)
	}
	return it
}

// writes applies (manager gitops, Apply) or merge-patches (any other manager, Update) each
// object at a version.
type objectWrite struct{ name, version, manager, spec string }

func writeAll(group string, ws []objectWrite) func(ctx context.Context, at func(v string) dynamic.ResourceInterface) error {
	return func(ctx context.Context, at func(v string) dynamic.ResourceInterface) error {
		for _, w := range ws {
			var err error
			if w.manager == "gitops" {
				body := `{"apiVersion":"` + group + `/` + w.version + `","kind":"Gadget","metadata":{"name":"` + w.name + `","namespace":"default"},"spec":` + w.spec + `}`
				_, err = at(w.version).Patch(ctx, w.name, types.ApplyPatchType, []byte(body), metav1.PatchOptions{FieldManager: w.manager})
			} else {
				_, err = at(w.version).Patch(ctx, w.name, types.MergePatchType, []byte(`{"spec":`+w.spec+`}`), metav1.PatchOptions{FieldManager: w.manager})
			}
			if err != nil {
				return fmt.Errorf("%s at %s by %s: %w", w.name, w.version, w.manager, err)
			}
		}
		return nil
	}
}

// withStorage is crd with version v added (fields) as its storage version.
func withStorage(crd *apiextensionsv1.CustomResourceDefinition, from, v string, drop ...string) *apiextensionsv1.CustomResourceDefinition {
	next := crd.DeepCopy()
	i := slices.IndexFunc(next.Spec.Versions, func(x apiextensionsv1.CustomResourceDefinitionVersion) bool { return x.Name == from })
	nv := *next.Spec.Versions[i].DeepCopy()
	nv.Name = v
	for _, f := range drop {
		delete(nv.Schema.OpenAPIV3Schema.Properties["spec"].Properties, f)
	}
	for j := range next.Spec.Versions {
		next.Spec.Versions[j].Storage = false
	}
	nv.Storage = true
	next.Spec.Versions = append(next.Spec.Versions, nv)
	return next
}

// TestPlanOwnershipLossMatchesPreflight (issue 40, item 8): on kube-apiserver 1.34, objects
// whose managedFields entries the rewrite at the release's storage version cannot all move;
// for each, plan names the objects and managers as ownership-loss exactly as the preflight of
// that rewrite (the API server's dry run of the write, once the release's CRD is applied)
// lists them; an object whose entries move is named by neither; judged as 1.37 (which keeps
// the live entries of a failed update) plan predicts no loss. The runbook's rewrite step
// carries --allow-ownership-loss naming the object.
//
//   - removed version: objects applied at v1alpha1, then v1alpha1 removed (never stored) and
//     spec.gone removed from v1's schema. stale's v1alpha1 entry owns spec.gone, which the
//     object no longer shows: moving it needs a read at v1alpha1 (ownership.NeedsSource), which
//     is not a version of the CRD; the entry is left, the field manager cannot convert the
//     object to v1alpha1, and 1.34 drops every entry (editor's, at v1, too). movable's entry
//     owns spec.a only: it is moved.
//   - does not type: stored at v1beta2 (old1, old2, new); gitops (Apply) owns old1 and editor
//     (Update) old2 at v1, whose schema then loses new (a write at v1beta2 after that would
//     already drop every entry on 1.34); v2 has new and neither old field. The
//     rewrite at v2 cannot tell whose new is (ownership.Move: unresolved) and leaves the v1
//     entries; the written object, converted to v1 for them, does not fit v1's typed schema
//     (.spec.new): 1.34 drops every entry (writer's, at v1beta2, too). apart has only gitops's
//     old1: attributable, moved.
func TestPlanOwnershipLossMatchesPreflight(t *testing.T) {
	older := testenv.StartBuiltMinor(t, "1.34")
	t.Run("removed version", func(t *testing.T) {
		const group = "ownloss1.plan.example.com"
		it := ownershipLossCase{group: group,
			initial: gadgetsCRD(t, group, "v1", [][2]string{{"v1alpha1", "a gone"}, {"v1", "a gone"}}),
			write: writeAll(group, []objectWrite{
				{"stale", "v1alpha1", "gitops", `{"a":"1","gone":"g"}`},
				{"movable", "v1alpha1", "gitops", `{"a":"1"}`},
				{"stale", "v1", "editor", `{"a":"2"}`},
			}),
			change: func(c *apiextensionsv1.CustomResourceDefinition) {
				c.Spec.Versions = c.Spec.Versions[1:]
				delete(c.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"].Properties, "gone")
			},
			next: func(live *apiextensionsv1.CustomResourceDefinition) *apiextensionsv1.CustomResourceDefinition {
				return withStorage(live, "v1", "v2")
			},
			listAt: "v1", target: "v2",
			wantLost: map[string][]string{"stale": {"editor (Update at " + group + "/v1)", "gitops (Apply at " + group + "/v1alpha1)"}},
		}.run(t, older)
		steps := Runbook([]Item{*it}, RunbookOptions{})
		i := slices.IndexFunc(steps, func(s RunbookStep) bool {
			return slices.ContainsFunc(s.Commands, func(c string) bool { return strings.Contains(c, "--allow-ownership-loss") })
		})
		if i < 0 || steps[i].Action != ActionMigrate || !strings.Contains(steps[i].Why, "default/stale (gitops (Apply at "+group+"/v1alpha1), editor (Update at") {
			t.Errorf("the rewrite step does not carry the consent naming stale: %+v", steps)
		}
	})
	t.Run("does not type", func(t *testing.T) {
		const group = "ownloss2.plan.example.com"
		ownershipLossCase{group: group,
			initial: gadgetsCRD(t, group, "v1beta2", [][2]string{{"v1", "old1 old2 new"}, {"v1beta2", "old1 old2 new"}}),
			write: writeAll(group, []objectWrite{
				{"split", "v1", "gitops", `{"old1":"a"}`},
				{"split", "v1", "editor", `{"old2":"b"}`},
				{"split", "v1beta2", "writer", `{"new":"c"}`},
				{"apart", "v1", "gitops", `{"old1":"a"}`},
				{"apart", "v1beta2", "writer", `{"new":"c"}`},
			}),
			change: func(c *apiextensionsv1.CustomResourceDefinition) {
				delete(c.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"].Properties, "new")
			},
			next: func(live *apiextensionsv1.CustomResourceDefinition) *apiextensionsv1.CustomResourceDefinition {
				return withStorage(live, "v1beta2", "v2", "old1", "old2")
			},
			listAt: "v1beta2", target: "v2",
			wantLost: map[string][]string{"split": {"editor (Update at " + group + "/v1)", "gitops (Apply at " + group + "/v1)", "writer (Update at " + group + "/v1beta2)"}},
		}.run(t, older)
	})
}
