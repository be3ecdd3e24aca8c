package plugin

import (
	"context"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
)

// TestCanRemoveWaitsForManagedFields: migrate moves the managedFields entries of the old
// version within its rewrite, so right after it the old version is safe to remove. A manager
// that then writes at the old version (a GitOps applier not yet changed) leaves entries of it
// again: removing it would break server-side apply on that object (kubernetes#111937), so
// versions says not safe, naming retire. After retire moves the entries, it is safe.
func TestCanRemoveWaitsForManagedFields(t *testing.T) {
	name, group, nss := migrateFixture(t, "mfsafety", 6)
	if r := runCluster(t, "migrate", name, "--to", "v1", "--yes", "--quiet"); r.code != ExitOK {
		t.Fatalf("migrate: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if r := runCluster(t, "versions", name, "--can-remove", "v1beta1"); r.code != ExitOK {
		t.Fatalf("--can-remove v1beta1 after migrate moved the entries: exit %d, want 0\n%s%s", r.code, r.stdout, r.stderr)
	}

	gvr := schema.GroupVersionResource{Group: group, Version: "v1beta1", Resource: "gadgets"}
	body := `{"apiVersion":"` + group + `/v1beta1","kind":"Gadget","metadata":{"name":"gadget-000","namespace":"` + nss[0] + `"},"spec":{"size":7}}`
	force := true
	if _, err := dynamic.NewForConfigOrDie(env.Config).Resource(gvr).Namespace(nss[0]).Patch(context.Background(), "gadget-000", types.ApplyPatchType, []byte(body), metav1.PatchOptions{FieldManager: "applier", Force: &force}); err != nil {
		t.Fatal(err)
	}
	r := runCluster(t, "versions", name, "--can-remove", "v1beta1")
	if r.code != ExitProblems {
		t.Fatalf("--can-remove v1beta1 with an entry written since: exit %d, want %d\n%s%s", r.code, ExitProblems, r.stdout, r.stderr)
	}
	mustContain(t, "output", r.stdout+r.stderr, "1 object(s) hold managedFields entries of it", "kubectl crdver retire "+name+" v1beta1")

	if r := runCluster(t, "retire", name, "v1beta1", "--yes", "--quiet"); r.code != ExitOK {
		t.Fatalf("retire: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if r := runCluster(t, "versions", name, "--can-remove", "v1beta1"); r.code != ExitOK {
		t.Fatalf("--can-remove v1beta1 after retire: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}
