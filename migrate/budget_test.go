package migrate

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	crdinfo "github.com/crdver/kubectl-crdver/crd"
)

// The budget of a rewrite of 1,200 objects, read from the real API server: their size, a
// rate measured with dry-run writes (nothing written), etcd's size from the API server's
// metrics, and the priority level the requests meet — exempt for the admin, limited and
// queued for an ordinary user.
func TestEstimateBudget(t *testing.T) {
	ctx := context.Background()
	const n = 1200
	crd := twoVersionCRD("budget.migrate.example.com", "widgets", "Widget")
	env.CreateCRDForTest(t, crd)
	var size int64
	err := env.PutObjects(ctx, crd.Spec.Group, "widgets", n, func(i int) (string, string, []byte) {
		b, _ := json.Marshal(map[string]any{"apiVersion": crd.Spec.Group + "/v1beta1", "kind": "Widget",
			"metadata": map[string]any{"name": fmt.Sprintf("w-%04d", i), "namespace": "default", "uid": fmt.Sprintf("uid-%d", i), "creationTimestamp": "2026-01-01T00:00:00Z"},
			"spec":     map[string]any{"size": i, "color": "a color of some length to weigh the object down"}})
		size = int64(len(b))
		return "default", fmt.Sprintf("w-%04d", i), b
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, before, err := env.StoredAPIVersions(ctx, crd.Spec.Group, "widgets")
	if err != nil {
		t.Fatal(err)
	}
	c, err := NewClients(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	live, err := c.CRDs.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, crd.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	waitListed(t, c, live, n)

	b, err := EstimateBudget(ctx, c, live, "v1", n)
	if err != nil {
		t.Fatal(err)
	}
	// The API server returns what etcd holds plus the resourceVersion and generation it adds.
	if b.Objects != n || b.SampleObjects != budgetSample || b.AverageBytes < size || b.AverageBytes > size+100 || b.WriteBytes != b.AverageBytes*n {
		t.Errorf("size: %d objects, %d sampled, %d bytes each (stored: %d), %d in all", b.Objects, b.SampleObjects, b.AverageBytes, size, b.WriteBytes)
	}
	if b.RateSample != budgetSample || b.RatePerSecond <= 0 || b.Seconds != n/b.RatePerSecond {
		t.Errorf("rate: %d sampled, %.0f/s, %.1f s", b.RateSample, b.RatePerSecond, b.Seconds)
	}
	if b.StorageBytes <= 0 {
		t.Errorf("etcd's size not read: %+v", b)
	}
	if fc := b.FlowControl; fc == nil || fc.FlowSchema != "exempt" || fc.PriorityLevel != "exempt" || !fc.Exempt {
		t.Errorf("flow control for the admin = %+v, want the exempt schema and level", fc)
	}
	if len(b.Unknown) > 0 {
		t.Errorf("unknown: %q", b.Unknown)
	}
	// The dry runs wrote nothing.
	if _, after, err := env.StoredAPIVersions(ctx, crd.Spec.Group, "widgets"); err != nil || after != before {
		t.Errorf("etcd's objects moved from revision %d to %d (%v): the budget wrote", before, after, err)
	}

	// An ordinary user (cluster-admin's rights, not system:masters): a limited, queuing level.
	kube := kubernetes.NewForConfigOrDie(env.Config)
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "budget-user"},
		RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "cluster-admin"},
		Subjects: []rbacv1.Subject{{Kind: "User", APIGroup: "rbac.authorization.k8s.io", Name: "budget-user"}}}
	if _, err := kube.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = kube.RbacV1().ClusterRoleBindings().Delete(context.Background(), binding.Name, metav1.DeleteOptions{})
	})
	user, err := env.ControlPlane().AddUser(envtest.User{Name: "budget-user"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	uc, err := NewClients(user.Config())
	if err != nil {
		t.Fatal(err)
	}
	if b, err = EstimateBudget(ctx, uc, live, "v1", n); err != nil {
		t.Fatal(err)
	}
	fc := b.FlowControl
	if fc == nil || fc.Exempt || fc.FlowSchema == "" || fc.PriorityLevel == "" || fc.NominalSeats <= 0 || fc.LimitResponse != "Queue" || fc.Queues <= 0 {
		t.Errorf("flow control for an ordinary user = %+v, want a limited level with its seats and queues", fc)
	}

	// Below MinBudgetObjects: none.
	if b, err := EstimateBudget(ctx, c, live, "v1", MinBudgetObjects-1); b != nil || err != nil {
		t.Errorf("budget of %d objects = %+v, %v; want none", MinBudgetObjects-1, b, err)
	}
}

// waitListed waits until the API server lists n objects of crd (written straight into etcd,
// it takes them in through its watch).
func waitListed(t *testing.T, c *Clients, crd interface{ GetName() string }, n int) {
	t.Helper()
	live, err := c.CRDs.ApiextensionsV1().CustomResourceDefinitions().Get(context.Background(), crd.GetName(), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for try := 0; ; try++ {
		l, err := c.Metadata.Resource(crdinfo.GVR(live, "v1")).List(context.Background(), metav1.ListOptions{})
		if err == nil && len(l.Items) == n {
			return
		}
		if try == 300 {
			t.Fatalf("the API server lists %d objects, want %d (%v)", len(l.Items), n, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
