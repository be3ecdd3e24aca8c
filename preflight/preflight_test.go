package preflight

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/crdver/kubectl-crdver/convert"
	crdinfo "github.com/crdver/kubectl-crdver/crd"
	"github.com/crdver/kubectl-crdver/internal/testcrd"
	"github.com/crdver/kubectl-crdver/internal/testenv"
	"github.com/crdver/kubectl-crdver/internal/testwebhook"
)

var env *testenv.Env

func TestMain(m *testing.M) { testenv.Main(m, &env, testenv.Options{}) }

// setup installs crd (renamed into group) and a namespace, and returns the dynamic client.
func setup(t *testing.T, crd *apiextensionsv1.CustomResourceDefinition, ns string) dynamic.Interface {
	t.Helper()
	ctx := context.Background()
	env.CreateCRDForTest(t, crd)
	kube := kubernetes.NewForConfigOrDie(env.Config)
	if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	return dynamic.NewForConfigOrDie(env.Config)
}

func create(t *testing.T, dyn dynamic.Interface, crd *apiextensionsv1.CustomResourceDefinition, v, ns, name string, spec map[string]any) {
	t.Helper()
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": crd.Spec.Group + "/" + v, "kind": crd.Spec.Names.Kind,
		"metadata": map[string]any{"name": name, "namespace": ns},
		"spec":     spec,
	}}
	if _, err := dyn.Resource(crdinfo.GVR(crd, v)).Namespace(ns).Create(context.Background(), u, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func fresh(t *testing.T, name string) *apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	crd, err := apiextensionsclient.NewForConfigOrDie(env.Config).ApiextensionsV1().CustomResourceDefinitions().Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return crd
}

func acl(op string) map[string]any {
	return map[string]any{"authorization": map[string]any{"type": "simple", "acls": []any{
		map[string]any{"resource": map[string]any{"type": "topic", "name": "orders"}, "operation": op},
	}}}
}

// The Strimzi KafkaUser case: v1 renamed acls[].operation to operations, conversion None.
// Objects held at v1beta2 lose operation when rewritten at v1; the objects without it lose
// nothing; the backup reads at v1beta2; and the API server agrees: after a rewrite at v1 the
// field is gone when read at v1beta2.
func TestNoneLosses(t *testing.T) {
	ctx := context.Background()
	crd := testcrd.With(testenv.LoadCRD(t, "kafkausers.yaml"), testcrd.Group("none.preflight.example.com"))
	dyn := setup(t, crd, "pf-none")
	create(t, dyn, crd, "v1beta2", "pf-none", "alice", acl("Read"))
	create(t, dyn, crd, "v1beta2", "pf-none", "bob", acl("Write"))
	create(t, dyn, crd, "v1beta2", "pf-none", "carol", map[string]any{"authentication": map[string]any{"type": "tls"}})

	var calls int
	r, err := Check(ctx, dyn, fresh(t, crd.Name), Options{Target: "v1", ChunkSize: 2, Progress: func(done, total int64) { calls++ }})
	if err != nil {
		t.Fatal(err)
	}
	if r.Objects != 3 || r.LossCount != 2 || r.RejectedCount != 0 || len(r.Unknown) != 0 {
		t.Fatalf("report: objects %d, losses %d %+v, rejected %d, unknown %v", r.Objects, r.LossCount, r.Losses, r.RejectedCount, r.Unknown)
	}
	for i, want := range []string{"alice", "bob"} {
		l := r.Losses[i]
		if l.Name != want || l.Namespace != "pf-none" || l.HeldAt != "v1beta2" || !slices.Equal(l.Fields, []string{".spec.authorization.acls[0].operation"}) {
			t.Errorf("loss %d = %+v, want %s held at v1beta2 losing .spec.authorization.acls[0].operation", i, l, want)
		}
	}
	if r.Safe() || !slices.Equal(r.HoldingVersions, []string{"v1beta2"}) || !slices.Equal(r.Compared, []string{"v1beta2"}) {
		t.Errorf("safe %v, holding %v, compared %v", r.Safe(), r.HoldingVersions, r.Compared)
	}
	wantBackup := "kubectl get kafkausers.v1beta2.none.preflight.example.com -A -o yaml > kafkausers.v1beta2.backup.yaml"
	if !slices.Equal(r.Backup, []string{wantBackup}) {
		t.Errorf("backup = %v, want [%s]", r.Backup, wantBackup)
	}
	advice := strings.Join(Advice(r), "\n")
	for _, want := range []string{wantBackup, "convert the objects listed to the v1 shape"} {
		if !strings.Contains(advice, want) {
			t.Errorf("advice lacks %q:\n%s", want, advice)
		}
	}
	if calls < 3 {
		t.Errorf("progress called %d times, want once a page (6 objects in pages of 2)", calls)
	}

	// The target is the storage version: nothing to compare, nothing lost.
	r, err = Check(ctx, dyn, fresh(t, crd.Name), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if !r.Safe() || r.Target != "v1beta2" || len(r.Compared) != 0 {
		t.Errorf("check at the storage version: %+v", r)
	}

	// The oracle: write alice at v1 (what the rewrite does) and read her at v1beta2.
	u, err := dyn.Resource(crdinfo.GVR(crd, "v1")).Namespace("pf-none").Get(ctx, "alice", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	u.SetLabels(map[string]string{"touched": "yes"}) // make the write change the object
	if _, err := dyn.Resource(crdinfo.GVR(crd, "v1")).Namespace("pf-none").Update(ctx, u, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	back, err := dyn.Resource(crdinfo.GVR(crd, "v1beta2")).Namespace("pf-none").Get(ctx, "alice", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	acls, _, _ := unstructured.NestedSlice(back.Object, "spec", "authorization", "acls")
	if len(acls) != 1 || acls[0].(map[string]any)["operation"] != nil {
		t.Errorf("after a write at v1, alice read at v1beta2 has acls %v: the API server did not drop operation as preflight predicted", acls)
	}
}

// The Strimzi KafkaConnect case: v1 requires spec.groupId, defaults spec.replicas and dropped
// spec.logging. Preflight's answer is the API server's own (a dry run of the rewrite's write,
// before the storage switch): both objects without groupId are invalid at v1. After the
// switch the real write rejects nogroup-logging (a default appears and a dropped field goes:
// spec changed) and lets nogroup through by ratcheting; every object the real rewrite would
// fail on is reported, none that is valid.
func TestRejections(t *testing.T) {
	ctx := context.Background()
	crd := testcrd.With(testenv.LoadCRD(t, "kafkaconnects.yaml"), testcrd.Group("reject.preflight.example.com"))
	dyn := setup(t, crd, "pf-reject")
	create(t, dyn, crd, "v1beta2", "pf-reject", "good", map[string]any{"bootstrapServers": "kafka:9092", "groupId": "connect"})
	create(t, dyn, crd, "v1beta2", "pf-reject", "nogroup", map[string]any{"bootstrapServers": "kafka:9092"})
	create(t, dyn, crd, "v1beta2", "pf-reject", "nogroup-logging", map[string]any{"bootstrapServers": "kafka:9092", "logging": "debug"})
	_, rev, err := env.StoredAPIVersions(ctx, crd.Spec.Group, crd.Spec.Names.Plural)
	if err != nil {
		t.Fatal(err)
	}

	r, err := Check(ctx, dyn, fresh(t, crd.Name), Options{Target: "v1"})
	if err != nil {
		t.Fatal(err)
	}
	if r.RejectedCount != 2 || len(r.Rejected) != 2 || r.Rejected[0].Name != "nogroup" || r.Rejected[1].Name != "nogroup-logging" {
		t.Fatalf("rejected %d %+v", r.RejectedCount, r.Rejected)
	}
	for _, x := range r.Rejected {
		if got := strings.Join(x.Errors, "; "); got != "spec.groupId: Required value" {
			t.Errorf("%s: errors = %q, want spec.groupId: Required value", x.Name, got)
		}
	}
	if r.LossCount != 1 || r.Losses[0].Name != "nogroup-logging" || !slices.Equal(r.Losses[0].Fields, []string{".spec.logging"}) {
		t.Errorf("losses %d %+v, want nogroup-logging losing .spec.logging", r.LossCount, r.Losses)
	}
	if _, rev2, err := env.StoredAPIVersions(ctx, crd.Spec.Group, crd.Spec.Names.Plural); err != nil || rev2 != rev {
		t.Errorf("etcd revision %d -> %d (%v): the dry runs wrote something", rev, rev2, err)
	}

	// The oracle: the API server refuses the same write after the storage switch.
	c := fresh(t, crd.Name)
	for i := range c.Spec.Versions {
		c.Spec.Versions[i].Storage = c.Spec.Versions[i].Name == "v1"
	}
	if _, err := apiextensionsclient.NewForConfigOrDie(env.Config).ApiextensionsV1().CustomResourceDefinitions().Update(ctx, c, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"good", "nogroup", "nogroup-logging"} {
		u, err := dyn.Resource(crdinfo.GVR(crd, "v1")).Namespace("pf-reject").Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		_, err = dyn.Resource(crdinfo.GVR(crd, "v1")).Namespace("pf-reject").Update(ctx, u, metav1.UpdateOptions{})
		reported := slices.ContainsFunc(r.Rejected, func(x Rejection) bool { return x.Name == name })
		if err != nil && !reported || name == "good" && (err != nil || reported) {
			t.Errorf("%s: no-op update at v1 after the switch: %v; preflight reported it rejected: %v", name, err, reported)
		}
		if name == "nogroup-logging" && err == nil {
			t.Errorf("%s: the real write was accepted; this fixture is meant to be rejected", name)
		}
	}
}

// A conversion webhook (the CronTab test webhook): objects held at v1 go v1 -> v1beta1 -> v1.
// The well-behaved webhook keeps everything (an annotation carries what host:port cannot say);
// the lossy one drops spec.port, and preflight names it; one whose answer holds a field the
// schema prunes, and loses nothing the objects hold, loses nothing. Without a transport the
// answer is unknown, never "safe".
func TestWebhookLosses(t *testing.T) {
	ctx := context.Background()
	srv := testwebhook.StartForTest(t, testwebhook.Options{})
	crd := testcrd.With(testenv.LoadCRD(t, "crontab-webhook.yaml"), testcrd.Group("hook.preflight.example.com"))
	crd.Spec.Conversion = srv.WebhookConversion("v1", "v1beta1")
	dyn := setup(t, crd, "pf-hook")
	for i := 0; i < 3; i++ {
		create(t, dyn, crd, "v1", "pf-hook", fmt.Sprintf("ct-%d", i), map[string]any{"cronSpec": "* * * * */5", "host": "db.example.com", "port": "5432"})
	}
	live := fresh(t, crd.Name)
	// v1beta1 must hold data for v1's objects to be compared: mark it stored, as after a
	// storage switch back and forth.
	live.Status.StoredVersions = []string{"v1beta1", "v1"}
	tr, err := convert.NewHTTPTransport(live, convert.TransportOptions{})
	if err != nil {
		t.Fatal(err)
	}

	r, err := Check(ctx, dyn, live, Options{Target: "v1beta1", Transport: tr})
	if err != nil {
		t.Fatal(err)
	}
	if !r.Safe() || r.Objects != 3 || !slices.Equal(r.Compared, []string{"v1"}) {
		t.Fatalf("well-behaved webhook: %+v", r)
	}

	srv.Set(testwebhook.Lossy)
	r, err = Check(ctx, dyn, live, Options{Target: "v1beta1", Transport: tr})
	if err != nil {
		t.Fatal(err)
	}
	if r.LossCount != 3 || len(r.Losses) != 3 {
		t.Fatalf("lossy webhook: losses %d %+v, unknown %v", r.LossCount, r.Losses, r.Unknown)
	}
	if l := r.Losses[0]; l.HeldAt != "v1" || !slices.Contains(l.Fields, ".spec.port") {
		t.Errorf("loss = %+v, want .spec.port held at v1", l)
	}

	// A webhook that adds a field no schema has (spec.extra): the API server prunes it from
	// what it stores, and nothing the objects hold is lost (the round trip gives them back).
	srv.Set(testwebhook.UnknownField)
	r, err = Check(ctx, dyn, live, Options{Target: "v1beta1", Transport: tr})
	if err != nil {
		t.Fatal(err)
	}
	if !r.Safe() || r.LossCount != 0 {
		t.Errorf("a webhook whose extra field is pruned: losses %d %+v, unknown %v (nothing the objects hold is lost)", r.LossCount, r.Losses, r.Unknown)
	}

	srv.Set(testwebhook.Good)
	r, err = Check(ctx, dyn, live, Options{Target: "v1beta1"})
	if err != nil {
		t.Fatal(err)
	}
	if r.Safe() || len(r.Unknown) != 1 || !strings.Contains(r.Unknown[0], "not reached") {
		t.Errorf("without a transport: safe %v, unknown %v", r.Safe(), r.Unknown)
	}
}
