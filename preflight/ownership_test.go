package preflight

import (
	"context"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"

	crdinfo "github.com/crdver/kubectl-crdver/crd"
	"github.com/crdver/kubectl-crdver/internal/testcrd"
	"github.com/crdver/kubectl-crdver/internal/testenv"
	"github.com/crdver/kubectl-crdver/migrate"
)

// managers lists an object's managedFields entries as the report words a lost one.
func managers(u *unstructured.Unstructured) []string {
	out, _ := LostManagers(u.GetManagedFields(), nil)
	slices.Sort(out)
	return out
}

// applyLabel server-side applies a label on name at version v as manager.
func applyLabel(t *testing.T, dyn dynamic.Interface, crd *apiextensionsv1.CustomResourceDefinition, v, ns, name, manager string) {
	t.Helper()
	body := `{"apiVersion":"` + crd.Spec.Group + `/` + v + `","kind":"` + crd.Spec.Names.Kind + `","metadata":{"name":"` + name + `","namespace":"` + ns + `","labels":{"` + manager + `":"yes"}}}`
	if _, err := dyn.Resource(crdinfo.GVR(crd, v)).Namespace(ns).Patch(context.Background(), name, types.ApplyPatchType, []byte(body), metav1.PatchOptions{FieldManager: manager}); err != nil {
		t.Fatalf("apply at %s on %s: %v", v, name, err)
	}
}

// rewriteAll writes every object back at v, as the rewrite does (its managedFields entries of
// other versions moved to v within the write: migrate.MoveEntries), and returns, per object,
// the managers it had that it has no more.
func rewriteAll(t *testing.T, dyn dynamic.Interface, crd *apiextensionsv1.CustomResourceDefinition, v, ns string) map[string][]string {
	t.Helper()
	ctx := context.Background()
	ri := dyn.Resource(crdinfo.GVR(crd, v)).Namespace(ns)
	list, err := ri.List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]string{}
	for i := range list.Items {
		u := &list.Items[i]
		send, _ := migrate.MoveEntries(ctx, dyn, crd, v, u)
		after, err := ri.Update(ctx, send.DeepCopy(), metav1.UpdateOptions{})
		if err != nil {
			t.Fatalf("rewriting %s: %v", u.GetName(), err)
		}
		if lost, _ := LostManagers(u.GetManagedFields(), after.GetManagedFields()); len(lost) > 0 {
			out[ns+"/"+u.GetName()] = lost
		}
	}
	return out
}

func reportedLosses(r *Report) map[string][]string {
	out := map[string][]string{}
	for _, l := range r.OwnershipLosses {
		out[objKey(l.Namespace, l.Name)] = l.Lost
	}
	return out
}

// TestOwnershipLossAgreesWithServer: the preflight's dry run of each rewrite compares the
// managedFields the API server returns with the object's, and lists the managers a rewrite
// drops; the real rewrite then drops exactly those. Two cases: the typechange pair (values that
// do not fit v2's typed schema; each object with an Update and an Apply manager), and an object
// whose Apply manager wrote a version the CRD no longer has (the rewrite moves that entry
// within its write, and so does the dry run: nothing is lost). kube-apiserver 1.37 keeps the
// managedFields of a write it cannot type (kubernetes#136949): nothing is lost, and the
// preflight says so; TestOwnershipLossOnOlderServer runs the same on 1.34, which drops them.
func TestOwnershipLossAgreesWithServer(t *testing.T) {
	ownershipCases(t, "own")
}

// TestOwnershipLossOnOlderServer: the same cases on kube-apiserver 1.34 (when its binaries are
// built: hack/build-test-binaries.sh --kube 1.34), where a rewrite of an object that does not
// fit the typed schema drops all of its managedFields: the preflight lists every manager of
// those objects, and the rewrite drops exactly them.
func TestOwnershipLossOnOlderServer(t *testing.T) {
	older := testenv.StartBuiltMinor(t, "1.34")
	current := env
	env = older
	defer func() { env = current }()
	lost := ownershipCases(t, "old")
	if len(lost["pf-old1/text-config"]) != 2 || !slices.Equal(lost["pf-old1/plain"], nil) {
		t.Errorf("on 1.34 the rewrite of text-config should drop both its managers, and of plain none: %v", lost)
	}
}

// ownershipCases runs the two cases on env and returns what the type-change rewrite dropped.
func ownershipCases(t *testing.T, prefix string) map[string][]string {
	ctx := context.Background()
	var typeChange map[string][]string
	t.Run("type change", func(t *testing.T) {
		group, ns := prefix+"1.preflight.example.com", "pf-"+prefix+"1"
		live := testcrd.With(loadTypechangeCRD(t, "live.yaml"), testcrd.Group(group))
		next := testcrd.With(loadTypechangeCRD(t, "new.yaml"), testcrd.Group(group))
		dyn := setup(t, live, ns)
		create(t, dyn, live, "v1", ns, "text-config", map[string]any{"config": "a: 1\n", "hosts": "h", "port": int64(1)})
		create(t, dyn, live, "v1", ns, "plain", map[string]any{"replicas": int64(1)})
		for _, n := range []string{"text-config", "plain"} {
			applyLabel(t, dyn, live, "v1", ns, n, "gitops")
		}
		cur := fresh(t, live.Name)
		cur.Spec.Versions = next.Spec.Versions
		if _, err := apiextensionsclient.NewForConfigOrDie(env.Config).ApiextensionsV1().CustomResourceDefinitions().Update(ctx, cur, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := env.WaitEstablished(ctx, live.Name); err != nil {
			t.Fatal(err)
		}
		crd := fresh(t, live.Name)
		r, err := Check(ctx, dyn, crd, Options{Target: "v2"})
		if err != nil {
			t.Fatal(err)
		}
		typeChange = rewriteAll(t, dyn, crd, "v2", ns)
		t.Logf("preflight: %+v; the rewrite dropped %v", r.OwnershipLosses, typeChange)
		if d := cmp.Diff(typeChange, reportedLosses(r)); d != "" {
			t.Errorf("managers lost (-rewrite +preflight):\n%s", d)
		}
		if r.Safe() != (len(typeChange) == 0) {
			t.Errorf("safe %v with losses %v", r.Safe(), typeChange)
		}
	})
	t.Run("entry of a removed version", func(t *testing.T) {
		group, ns := prefix+"2.preflight.example.com", "pf-"+prefix+"2"
		crd := testcrd.With(loadTypechangeCRD(t, "live.yaml"), testcrd.Group(group))
		v0 := crd.Spec.Versions[0].DeepCopy()
		v0.Name, v0.Storage = "v1alpha1", false
		crd.Spec.Versions = append(crd.Spec.Versions, *v0)
		dyn := setup(t, crd, ns)
		create(t, dyn, crd, "v1", ns, "old-applied", map[string]any{"replicas": int64(1)})
		create(t, dyn, crd, "v1", ns, "current", map[string]any{"replicas": int64(2)})
		applyLabel(t, dyn, crd, "v1alpha1", ns, "old-applied", "old-gitops")
		applyLabel(t, dyn, crd, "v1", ns, "current", "gitops")
		cur := fresh(t, crd.Name)
		cur.Spec.Versions = cur.Spec.Versions[:1] // v1 only: v1alpha1 was never stored
		if _, err := apiextensionsclient.NewForConfigOrDie(env.Config).ApiextensionsV1().CustomResourceDefinitions().Update(ctx, cur, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := env.WaitEstablished(ctx, crd.Name); err != nil {
			t.Fatal(err)
		}
		live := fresh(t, crd.Name)
		r, err := Check(ctx, dyn, live, Options{})
		if err != nil {
			t.Fatal(err)
		}
		if r.DryRuns != 1 {
			t.Errorf("nothing is pending: %d dry runs, want 1 (only the object whose managedFields name a removed version)", r.DryRuns)
		}
		got := rewriteAll(t, dyn, live, "v1", ns)
		t.Logf("preflight: %+v; the rewrite dropped %v", r.OwnershipLosses, got)
		if d := cmp.Diff(got, reportedLosses(r)); d != "" {
			t.Errorf("managers lost (-rewrite +preflight):\n%s", d)
		}
		if len(got) > 0 {
			t.Errorf("the rewrite, which moves the v1alpha1 entry to v1 within its write, dropped %v", got)
		}
	})
	return typeChange
}
