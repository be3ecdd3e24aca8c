package migrate

import (
	"context"
	"fmt"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/crdver/kubectl-crdver/internal/testenv"
)

// env is the package's real kube-apiserver + etcd.
var env *testenv.Env

// ListFromCacheSnapshot is off so that continued lists are served by etcd: an expired continue
// token (etcd compacted past it) then gets its 410 Gone at once, as it does on any cluster once
// the watch cache's snapshots of that revision are gone.
func TestMain(m *testing.M) {
	testenv.Main(m, &env, testenv.Options{APIServerArgs: []string{"--feature-gates=ListFromCacheSnapshot=false"}})
}

// twoVersionCRD is a namespaced CRD with versions v1beta1 (storage) and v1, conversion None and
// identical schemas: objects written now are stored at v1beta1.
func twoVersionCRD(group, plural, kind string) *apiextensionsv1.CustomResourceDefinition {
	return testenv.TwoVersionCRD(group, plural, kind, apiextensionsv1.JSONSchemaProps{Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{
		"size":  {Type: "integer"},
		"color": {Type: "string"},
	}})
}

// fixture is a CRD with objects stored at v1beta1 in a few namespaces.
type fixture struct {
	crd     *apiextensionsv1.CustomResourceDefinition
	clients *Clients
	dyn     dynamic.Interface
	group   string
	ns      []string
}

// newFixture creates the CRD (v1beta1 storage), n objects spread over three namespaces, and
// then switches the storage version to v1 (unless keepStorage).
func newFixture(t *testing.T, name string, n int, keepStorage bool) *fixture {
	t.Helper()
	ctx := context.Background()
	group := name + ".migrate.example.com"
	crd := twoVersionCRD(group, "widgets", "Widget")
	env.CreateCRDForTest(t, crd)
	c, err := NewClients(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	kube := kubernetes.NewForConfigOrDie(env.Config)
	f := &fixture{clients: c, dyn: dynamic.NewForConfigOrDie(env.Config), group: group}
	for i := 0; i < 3; i++ {
		ns := fmt.Sprintf("%s-%d", name, i)
		if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		f.ns = append(f.ns, ns)
	}
	f.createObjects(t, group, "v1beta1", 0, n)
	if !keepStorage {
		if _, err := SwitchStorage(ctx, c, crd.Name, "v1"); err != nil {
			t.Fatal(err)
		}
	}
	f.crd = f.get(t)
	return f
}

func (f *fixture) gvr(v string) schema.GroupVersionResource {
	return schema.GroupVersionResource{Group: f.group, Version: v, Resource: "widgets"}
}

// createObjects creates objects number from..to-1 (widget-00000 …) at version v, 16 at a time.
func (f *fixture) createObjects(t *testing.T, group, v string, from, to int) {
	t.Helper()
	gvr := schema.GroupVersionResource{Group: group, Version: v, Resource: "widgets"}
	var wg sync.WaitGroup
	errs := make(chan error, to-from)
	next := make(chan int)
	for w := 0; w < 16; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				obj := &unstructured.Unstructured{Object: map[string]any{
					"apiVersion": group + "/" + v, "kind": "Widget",
					"metadata": map[string]any{"name": fmt.Sprintf("widget-%05d", i), "namespace": f.ns[i%len(f.ns)]},
					"spec":     map[string]any{"size": int64(i), "color": "blue"},
				}}
				if _, err := f.dyn.Resource(gvr).Namespace(f.ns[i%len(f.ns)]).Create(context.Background(), obj, metav1.CreateOptions{}); err != nil {
					errs <- err
				}
			}
		}()
	}
	for i := from; i < to; i++ {
		next <- i
	}
	close(next)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

func (f *fixture) get(t *testing.T) *apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	name := "widgets." + f.group
	crd, err := f.clients.CRDs.ApiextensionsV1().CustomResourceDefinitions().Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return crd
}

// etcdVersions reads every stored object of the fixture's resource straight from etcd and
// returns how many are stored at each apiVersion, plus the last revision at which they or their CRD were written.
func etcdVersions(t *testing.T, group, plural string) (map[string]int, int64) {
	t.Helper()
	out, rev, err := env.StoredAPIVersions(context.Background(), group, plural)
	if err != nil {
		t.Fatal(err)
	}
	return out, rev
}

func newRewriter(t *testing.T, f *fixture, opts RewriteOptions) *Rewriter {
	t.Helper()
	r, err := NewRewriter(f.clients, f.get(t), opts)
	if err != nil {
		t.Fatal(err)
	}
	return r
}
