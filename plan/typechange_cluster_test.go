package plan

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"

	"github.com/crdver/kubectl-crdver/internal/testcrd"
)

// managerNames lists an object's managedFields entries as manager/operation@version.
func managerNames(u *unstructured.Unstructured) []string {
	var out []string
	for _, m := range u.GetManagedFields() {
		out = append(out, string(m.Manager)+"/"+string(m.Operation)+"@"+m.APIVersion)
	}
	slices.Sort(out)
	return out
}

// TestPlanTypeMismatchMatchesServer: the typechange pair on the API server, each object with a
// manager of each kind (editor: Update, gitops: Apply). After the new CRD is applied, for each
// object: server-side apply at v2 fails exactly when plan lists type mismatches, with
// structured-merge-diff's error for each field plan lists; a create of the object as read at v2
// is rejected with plan's TypeRecreateErrors; and a no-op update at v2 (the rewrite's write)
// is accepted. What that write does to the managedFields depends on the server (1.37 keeps
// them): the test records it for preflight's check, which compares them.
func TestPlanTypeMismatchMatchesServer(t *testing.T) {
	const group = "typechange.plan.example.com"
	dir := filepath.Join("..", "testdata", "typechange")
	old := testcrd.With(readCRD(t, filepath.Join(dir, "live.yaml")), testcrd.Group(group))
	next := testcrd.With(readCRD(t, filepath.Join(dir, "new.yaml")), testcrd.Group(group))
	objs := regroupObjects(readObjects(t, filepath.Join(dir, "objects.yaml")), group)
	apply := func(ctx context.Context, dyn dynamic.Interface, version, name string) error {
		body := `{"apiVersion":"` + group + `/` + version + `","kind":"Broker","metadata":{"name":"` + name + `","namespace":"default","labels":{"team":"data"}}}`
		_, err := resource(old, version, dyn, "default").Patch(ctx, name, types.ApplyPatchType, []byte(body), metav1.PatchOptions{FieldManager: "gitops"})
		return err
	}
	it := runScenario(t, scenario{old: old, next: next, objects: objs, manager: "editor",
		setup: func(t *testing.T, ctx context.Context, dyn dynamic.Interface) {
			for _, o := range objs {
				if err := apply(ctx, dyn, "v1", o.GetName()); err != nil {
					t.Fatalf("apply at v1 on %s: %v", o.GetName(), err)
				}
			}
		}})
	if !slices.Contains(it.Kinds, KindTypeMismatch) {
		t.Fatalf("kinds %v", it.Kinds)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dyn, err := dynamic.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	r := resource(next, "v2", dyn, "default")
	for _, o := range objs {
		name := o.GetName()
		f := findingOf(it, name)
		var mismatches []string
		var recreate []string
		if f != nil {
			for _, m := range f.TypeMismatches {
				mismatches = append(mismatches, m.Error)
			}
			recreate = f.TypeRecreateErrors
		}
		// Server-side apply at v2.
		err := apply(ctx, dyn, "v2", name)
		if (err != nil) != (len(mismatches) > 0) {
			t.Errorf("%s: server-side apply at v2: %v; plan lists %q", name, err, mismatches)
		}
		if err != nil {
			t.Logf("%s: server-side apply at v2: %v", name, err)
			for _, m := range mismatches {
				if !strings.Contains(err.Error(), m) {
					t.Errorf("%s: the API server's apply error %q does not contain plan's %q", name, err, m)
				}
			}
		}
		// A re-create of the object as read at v2.
		got, err := r.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		c := got.DeepCopy()
		for _, k := range serverMetadata {
			unstructured.RemoveNestedField(c.Object, "metadata", k)
		}
		c.SetName(name + "-as-read")
		_, err = r.Create(ctx, c, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}, FieldValidation: "Strict"})
		compareVerdict(t, name, "re-create as read at v2", err, recreate)
		// The rewrite's write: a no-op update at v2.
		before := managerNames(got)
		upd, err := r.Update(ctx, got.DeepCopy(), metav1.UpdateOptions{})
		if err != nil {
			t.Errorf("%s: no-op update at v2: %v", name, err)
			continue
		}
		t.Logf("%s: managers before the no-op update %v, after %v", name, before, managerNames(upd))
		if len(mismatches) == 0 {
			if d := cmp.Diff(before, managerNames(upd)); d != "" {
				t.Errorf("%s fits v2, yet its no-op update changed its managers (-before +after):\n%s", name, d)
			}
		}
	}
}
