package plan

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"

	"github.com/crdver/kubectl-crdver/internal/testenv"
)

// TestPlanEncodingDependent: a migration is pending (objects a* are encoded at v1beta1 in etcd,
// b* at v1) and the new CRD drops spec.x from v1beta1 only. What a read returns depends on the
// encoding, which the API cannot show: plan must say so on every object rather than guess,
// and the real reads must fall within what it said.
func TestPlanEncodingDependent(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	group := "encoding.plan.example.com"
	old := testenv.TwoVersionCRD(group, "things", "Thing", apiextensionsv1.JSONSchemaProps{Type: "object",
		Properties: map[string]apiextensionsv1.JSONSchemaProps{"x": {Type: "string"}, "y": {Type: "string"}}})
	if _, err := env.CreateCRD(ctx, old.DeepCopy()); err != nil {
		t.Fatal(err)
	}
	dyn, err := dynamic.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	c, err := apiextensionsclient.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	r := dyn.Resource(schema.GroupVersionResource{Group: group, Version: "v1", Resource: "things"}).Namespace("default")
	create := func(name string) {
		t.Helper()
		u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": group + "/v1", "kind": "Thing",
			"metadata": map[string]any{"name": name}, "spec": map[string]any{"x": "kept?", "y": "y"}}}
		if _, err := r.Create(ctx, u, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	create("a0")
	create("a1")
	// Switch the storage version to v1 and wait until writes are encoded at it.
	cur, err := c.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, old.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cur.Spec.Versions[0].Storage, cur.Spec.Versions[1].Storage = false, true
	if _, err := c.ApiextensionsV1().CustomResourceDefinitions().Update(ctx, cur, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		_ = r.Delete(ctx, "probe", metav1.DeleteOptions{})
		create("probe")
		counts, _, err := env.StoredAPIVersions(ctx, group, "things")
		return err == nil && counts[group+"/v1"] == 1, err
	})
	if err != nil {
		t.Fatalf("storage switch not effective: %v", err)
	}
	if err := r.Delete(ctx, "probe", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	create("b0")
	create("b1")
	counts, _, err := env.StoredAPIVersions(ctx, group, "things")
	if err != nil || counts[group+"/v1beta1"] != 2 || counts[group+"/v1"] != 2 {
		t.Fatalf("encodings in etcd: %v %v", counts, err)
	}

	live, err := c.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, old.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	next := live.DeepCopy()
	beta := next.Spec.Versions[0].Schema.OpenAPIV3Schema
	spec := beta.Properties["spec"]
	delete(spec.Properties, "x")
	beta.Properties["spec"] = spec
	next = withCanary(next)
	it, err := Plan(ctx, live, next, NewClusterSource(dyn, schema.GroupVersionResource{Group: group, Version: ListVersion(live), Resource: "things"}, 500), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if !it.Breaking || len(it.Objects.Findings) != 4 {
		t.Fatalf("plan: breaking %v, findings %+v", it.Breaking, it.Objects.Findings)
	}

	upd := next.DeepCopy()
	upd.ResourceVersion = live.ResourceVersion
	if _, err := c.ApiextensionsV1().CustomResourceDefinitions().Update(ctx, upd, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitNewSchema(t, ctx, next, "v1", dyn)
	for _, f := range it.Objects.Findings {
		if !slices.Equal(f.PossiblyPrunedOnRead, []string{"spec.x"}) || len(f.PrunedOnRead) != 0 || len(f.Notes) == 0 {
			t.Errorf("%s: %+v", f.Name, f)
		}
		after, err := r.Get(ctx, f.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		_, kept, _ := unstructured.NestedString(after.Object, "spec", "x")
		// a* are encoded at v1beta1: the server drops spec.x, as the plan said it might.
		if want := f.Name[0] == 'b'; kept != want {
			t.Errorf("%s: spec.x kept on read: %v, want %v", f.Name, kept, want)
		}
	}
	t.Log(fmt.Sprint(it.Objects.Notes))
}
