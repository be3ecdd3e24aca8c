package plan

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/crdver/kubectl-crdver/convert"
	crdinfo "github.com/crdver/kubectl-crdver/crd"
	"github.com/crdver/kubectl-crdver/internal/testcrd"
	"github.com/crdver/kubectl-crdver/internal/testwebhook"
	"github.com/crdver/kubectl-crdver/webhookcheck"
)

// conversionRelease is a live CronTab CRD (group) stored at v1beta1, served at v1beta1 and v1,
// converting through a working webhook by url, with n objects written at v1beta1; and the new
// release's CRD: storage v1, converting through Service conv-system/<service> at the port of
// the release's webhook (rel), with its caBundle.
type conversionRelease struct {
	live, next *apiextensionsv1.CustomResourceDefinition
	c          ReleaseClients
	dyn        dynamic.Interface
	crds       apiextensionsclient.Interface
}

func newConversionRelease(t *testing.T, group, service string, rel *testwebhook.Server, n int) *conversionRelease {
	t.Helper()
	ctx := context.Background()
	old := testwebhook.StartForTest(t, testwebhook.Options{})
	live := testcrd.With(readCRD(t, filepath.Join("..", "testdata", "crds", "crontab-webhook.yaml")), testcrd.Group(group))
	live.Spec.Versions = slices.DeleteFunc(live.Spec.Versions, func(v apiextensionsv1.CustomResourceDefinitionVersion) bool { return v.Name == "v1alpha1" })
	for i := range live.Spec.Versions {
		live.Spec.Versions[i].Storage = live.Spec.Versions[i].Name == "v1beta1"
	}
	live.Spec.Conversion = old.WebhookConversion("v1", "v1beta1")
	live.Status = apiextensionsv1.CustomResourceDefinitionStatus{}
	env.CreateCRDForTest(t, live.DeepCopy())
	r := &conversionRelease{dyn: dynamic.NewForConfigOrDie(env.Config), crds: apiextensionsclient.NewForConfigOrDie(env.Config)}
	r.c = ReleaseClients{CRDs: r.crds, Dynamic: r.dyn, Kube: kubernetes.NewForConfigOrDie(env.Config)}
	for i := 0; i < n; i++ {
		u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": group + "/v1beta1", "kind": "CronTab",
			"metadata": map[string]any{"name": fmt.Sprintf("c%d", i), "namespace": "default"},
			"spec":     map[string]any{"cronSpec": "* * * * */5", "image": "img", "hostPort": fmt.Sprintf("db:%d", 5432+i)}}}
		if _, err := r.dyn.Resource(crdinfo.GVR(live, "v1beta1")).Namespace("default").Create(ctx, u, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	var err error
	if r.live, err = r.crds.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, live.Name, metav1.GetOptions{}); err != nil {
		t.Fatal(err)
	}
	r.next = r.live.DeepCopy()
	r.next.Status, r.next.ResourceVersion, r.next.ManagedFields = apiextensionsv1.CustomResourceDefinitionStatus{}, "", nil
	for i := range r.next.Spec.Versions {
		r.next.Spec.Versions[i].Storage = r.next.Spec.Versions[i].Name == "v1"
	}
	_, p, _ := net.SplitHostPort(rel.Addr)
	port, _ := strconv.Atoi(p)
	port32, path := int32(port), "/convert"
	r.next.Spec.Conversion = &apiextensionsv1.CustomResourceConversion{Strategy: apiextensionsv1.WebhookConverter, Webhook: &apiextensionsv1.WebhookConversion{
		ConversionReviewVersions: []string{"v1"},
		ClientConfig: &apiextensionsv1.WebhookClientConfig{CABundle: rel.CABundle,
			Service: &apiextensionsv1.ServiceReference{Namespace: "conv-system", Name: service, Port: &port32, Path: &path}}}}
	return r
}

func (r *conversionRelease) plan(t *testing.T, o ConversionOptions) (*Report, *Item) {
	t.Helper()
	rep, err := Release(context.Background(), r.c, ReleaseOptions{Next: []*apiextensionsv1.CustomResourceDefinition{r.next}, Conversion: o,
		Runbook: RunbookOptions{ApplyFile: "release/"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Items) != 1 || rep.Items[0].ConversionCheck == nil {
		t.Fatalf("no conversion check: %+v", rep.Items)
	}
	return rep, &rep.Items[0]
}

// commands are the runbook's commands, for "no consent to a loss".
func commands(rep *Report) string {
	var out []string
	for _, s := range rep.Runbook {
		out = append(out, s.Commands...)
	}
	return strings.Join(out, "\n")
}

// A release whose CRD switches storage through a webhook Service that does not exist: plan
// calls it a conversion-webhook finding naming the Service, its runbook deploys the webhook
// first and asks for no consent to loss; the API server, given the CRD as it is, fails every
// read at v1 the same way. With the Service in place (the release's webhook running), every
// stored object is round-tripped through it; each of its misbehaviours is named per object.
func TestPlanConversionThroughTheReleaseWebhook(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	rel := testwebhook.StartForTest(t, testwebhook.Options{DNSNames: []string{"crontab-webhook.conv-system.svc"}})
	r := newConversionRelease(t, "release.conv.plan.example.com", "crontab-webhook", rel, 5)

	rep, it := r.plan(t, ConversionOptions{})
	c := it.ConversionCheck
	if it.Verdict != VerdictBreaking || !slices.Contains(it.Kinds, KindConversionWebhook) || !c.NotRunning || rep.ExitCode(false) != 1 {
		t.Fatalf("not running: verdict %s kinds %v, check %+v", it.Verdict, it.Kinds, c)
	}
	if !strings.Contains(c.Reason, "Service conv-system/crontab-webhook does not exist") || !strings.Contains(strings.Join(it.BreakingReasons, " "), "is not running") {
		t.Errorf("reason %q / %q", c.Reason, it.BreakingReasons)
	}
	if rep.Runbook[0].Action != ActionDeployWebhook || !rep.Runbook[0].Manual || !strings.Contains(rep.Runbook[0].Why, "Service conv-system/crontab-webhook answers on port") {
		t.Errorf("first step: %+v", rep.Runbook[0])
	}
	if cmds := commands(rep); strings.Contains(cmds, "--allow-data-loss") {
		t.Errorf("the runbook asks for consent to a loss nobody measured:\n%s", cmds)
	}

	// The release's webhook running behind the Service.
	removeService := env.WebhookService(t, "conv-system", "crontab-webhook")
	_, it = r.plan(t, ConversionOptions{})
	c = it.ConversionCheck
	if c.State != webhookcheck.StateAnswers || c.RoundTrip == nil || c.RoundTrip.Objects != 5 || c.RoundTrip.FailedCount+c.RoundTrip.LossCount != 0 || slices.Contains(it.Kinds, KindConversionWebhook) {
		t.Fatalf("running: state %s, kinds %v, round trip %+v, problems %+v", c.State, it.Kinds, c.RoundTrip, c.Problems)
	}
	if !strings.Contains(c.Reached, "via localhost:") || !strings.Contains(c.Reached, "TLS verified against caBundle as crontab-webhook.conv-system.svc") {
		t.Errorf("reached %q", c.Reached)
	}
	// Every object went through the webhook: no note is left that reading it "needs" it.
	if len(it.Objects.Findings) != 0 {
		t.Errorf("objects with findings once the webhook answered: %+v", it.Objects.Findings)
	}

	// --sample: 2 of the 5 stored objects round-tripped, said, and unknown for the others.
	_, it = r.plan(t, ConversionOptions{Sample: 2})
	if c := it.ConversionCheck; !c.Sampled || c.RoundTrip.Objects != 2 || !slices.Contains(it.Kinds, KindUnknown) || !strings.Contains(strings.Join(it.UnknownReasons, " "), "only 2 of 5 stored objects were round-tripped") {
		t.Errorf("sampled: %+v kinds %v %q", c.RoundTrip, it.Kinds, it.UnknownReasons)
	}

	for _, tc := range []struct {
		b       testwebhook.Behaviour
		kind    Kind
		check   string
		timeout time.Duration
	}{
		{testwebhook.Lossy, KindDataLoss, convert.CheckRoundTrip, 0}, // v1 -> v1beta1 forgets the port: hostPort comes back as the host
		{testwebhook.WrongUID, KindConversionWebhook, convert.CheckResponseUID, 0},
		{testwebhook.WrongAPIVersion, KindConversionWebhook, convert.CheckAPIVersion, 0},
		{testwebhook.Non200, KindConversionWebhook, convert.CheckHTTPStatus, 0},
		{testwebhook.Slow, KindConversionWebhook, convert.CheckTimeout, 300 * time.Millisecond},
	} {
		t.Run(string(tc.b), func(t *testing.T) {
			rel.Set(tc.b)
			defer rel.Set(testwebhook.Good)
			rep, it := r.plan(t, ConversionOptions{Timeout: tc.timeout})
			c := it.ConversionCheck
			if !slices.Contains(it.Kinds, tc.kind) || it.Verdict != VerdictBreaking {
				t.Fatalf("kinds %v verdict %s: %s", it.Kinds, it.Verdict, c.Reason)
			}
			var named []string
			switch tc.kind {
			case KindDataLoss:
				for _, l := range c.RoundTrip.Losses {
					if slices.Contains(l.Fields, ".spec.hostPort") {
						named = append(named, l.Object)
					}
				}
			default:
				for _, e := range c.RoundTrip.Failed {
					if e.Check == tc.check {
						named = append(named, e.Object)
					}
				}
			}
			slices.Sort(named)
			if want := []string{"default/c0", "default/c1", "default/c2", "default/c3", "default/c4"}; !slices.Equal(named, want) {
				t.Errorf("objects named for %s: %v, want %v (%+v)", tc.check, named, want, c.RoundTrip)
			}
			// A loss is consented to like any other (the backup first); a failure, never.
			wantFirst, consent := ActionFixConversion, false
			if tc.kind == KindDataLoss {
				wantFirst, consent = ActionConvertObjects, true
			}
			if rep.Runbook[0].Action != wantFirst || strings.Contains(commands(rep), "--allow-data-loss") != consent {
				t.Errorf("first step %s, consent %v:\n%s", rep.Runbook[0].Action, !consent, commands(rep))
			}
		})
	}

	// The same release without its caBundle: the API server cannot verify the webhook.
	withCA := r.next
	r.next = withCA.DeepCopy()
	r.next.Spec.Conversion.Webhook.ClientConfig.CABundle = nil
	rep, it = r.plan(t, ConversionOptions{})
	if c := it.ConversionCheck; c.State != webhookcheck.StateUnreachable || !slices.Contains(it.Kinds, KindConversionWebhook) || !strings.Contains(c.Reason, "no caBundle") || rep.Runbook[0].Action != ActionFixConversion {
		t.Errorf("no caBundle: state %s kinds %v reason %q step %s", c.State, it.Kinds, c.Reason, rep.Runbook[0].Action)
	}
	r.next = withCA

	// The API server agrees: the new CRD as it is, the Service gone: every read at v1 fails;
	// back, the objects read at v1 are what the round trips made of them.
	removeService()
	next := r.next.DeepCopy()
	cur, err := r.crds.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, next.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	next.ResourceVersion = cur.ResourceVersion
	if _, err := r.crds.ApiextensionsV1().CustomResourceDefinitions().Update(ctx, next, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	// The API server takes the new conversion up asynchronously: until it fails the reads. A
	// GET reads etcd (a list would wait for the watch cache, which cannot fill without the
	// webhook either).
	c0 := r.dyn.Resource(crdinfo.GVR(next, "v1")).Namespace("default")
	for i := 0; i < 100; i++ {
		if _, err = c0.Get(ctx, "c0", metav1.GetOptions{}); err != nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err == nil || !strings.Contains(err.Error(), `service "crontab-webhook" not found`) {
		t.Errorf("the API server reads at v1 without the webhook: %v", err)
	}
	env.WebhookService(t, "conv-system", "crontab-webhook")
	var got *unstructured.Unstructured
	for i := 0; i < 50; i++ {
		if got, err = c0.Get(ctx, "c0", metav1.GetOptions{}); err == nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("reading at v1 through the release's webhook: %v", err)
	}
	if host, _, _ := unstructured.NestedString(got.Object, "spec", "host"); host != "db" {
		t.Errorf("read at v1: %v", got.Object["spec"])
	}
	// Deleted while the webhook answers: the CRD finalizer lists the objects through it.
	if err := env.DeleteCRD(ctx, next.Name); err != nil {
		t.Error(err)
	}
}

// --webhook: the release's webhook, not installed in the cluster, runs elsewhere: the live
// objects are round-tripped through it, and nothing in the cluster changes.
func TestPlanConversionThroughAnotherWebhook(t *testing.T) {
	rel := testwebhook.StartForTest(t, testwebhook.Options{DNSNames: []string{"absent-webhook.conv-system.svc"}})
	r := newConversionRelease(t, "target.conv.plan.example.com", "absent-webhook", rel, 3)
	before := snapshotObjects(t, r)
	target, err := webhookcheck.ParseTarget(rel.URL)
	if err != nil {
		t.Fatal(err)
	}
	_, it := r.plan(t, ConversionOptions{Target: target})
	c := it.ConversionCheck
	if c.State != webhookcheck.StateAnswers || c.RoundTrip.Objects != 3 || c.Target != rel.URL || slices.Contains(it.Kinds, KindConversionWebhook) || rel.Requests() == 0 {
		t.Fatalf("through %s: state %s kinds %v reason %s", rel.URL, c.State, it.Kinds, c.Reason)
	}
	if !strings.Contains(c.Reached, "via "+rel.Addr+", TLS verified against caBundle as absent-webhook.conv-system.svc") {
		t.Errorf("reached %q", c.Reached)
	}
	if after := snapshotObjects(t, r); !slices.Equal(before, after) {
		t.Errorf("the cluster changed: %v → %v", before, after)
	}
	// A Service in a sandbox namespace is asked through the API server's service proxy (which
	// verifies no certificate: said): every stored object round-tripped through the webhook
	// behind it, the cluster unchanged; one that does not exist answers nothing: not asked.
	port := sandboxService(t, r.c.Kube, "conv-sandbox", "crontab-webhook", rel.Addr)
	sandbox := "conv-sandbox/crontab-webhook:" + strconv.Itoa(port)
	svc, err := webhookcheck.ParseTarget(sandbox)
	if err != nil {
		t.Fatal(err)
	}
	asked := rel.Requests()
	_, it = r.plan(t, ConversionOptions{Target: svc})
	if c := it.ConversionCheck; c.State != webhookcheck.StateAnswers || c.RoundTrip == nil || c.RoundTrip.Objects != 3 || c.RoundTrip.FailedCount+c.RoundTrip.LossCount != 0 || c.Target != sandbox || rel.Requests() == asked ||
		!strings.Contains(c.Reached, "service "+sandbox+"/convert through the API server's service proxy (the caBundle is NOT verified on this path)") {
		t.Errorf("a sandbox Service: state %s, target %q, reached %q, reason %q, round trip %+v", c.State, c.Target, c.Reached, c.Reason, c.RoundTrip)
	}
	if after := snapshotObjects(t, r); !slices.Equal(before, after) {
		t.Errorf("the cluster changed: %v → %v", before, after)
	}
	svc, err = webhookcheck.ParseTarget("conv-system/nosuch:443")
	if err != nil {
		t.Fatal(err)
	}
	_, it = r.plan(t, ConversionOptions{Target: svc})
	if c := it.ConversionCheck; c.State != webhookcheck.StateNotAsked || !strings.Contains(c.Reached, "service conv-system/nosuch:443/convert through the API server's service proxy (the caBundle is NOT verified on this path)") {
		t.Errorf("a sandbox Service that does not exist: state %s, reached %q, reason %q", c.State, c.Reached, c.Reason)
	}
	// A target that does not answer: not asked (unknown), not a verdict on the release.
	rel.Close()
	_, it = r.plan(t, ConversionOptions{Target: target})
	if c := it.ConversionCheck; c.State != webhookcheck.StateNotAsked || !slices.Contains(it.Kinds, KindUnknown) || slices.Contains(it.Kinds, KindConversionWebhook) {
		t.Errorf("a target that does not answer: state %s kinds %v", c.State, it.Kinds)
	}
}

func snapshotObjects(t *testing.T, r *conversionRelease) []string {
	t.Helper()
	ctx := context.Background()
	crd, err := r.crds.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, r.live.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	out := []string{"crd " + crd.ResourceVersion}
	list, err := r.dyn.Resource(crdinfo.GVR(crd, "v1beta1")).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range list.Items {
		out = append(out, o.GetName()+" "+o.GetResourceVersion())
	}
	return out
}

// A CRD update that drops the conversion its stored objects need (strategy None): what None
// makes of each object read at v1 is compared with what the live webhook makes of it.
func TestPlanConversionDropped(t *testing.T) {
	rel := testwebhook.StartForTest(t, testwebhook.Options{})
	r := newConversionRelease(t, "dropped.conv.plan.example.com", "unused", rel, 2)
	r.next.Spec.Conversion = &apiextensionsv1.CustomResourceConversion{Strategy: apiextensionsv1.NoneConverter}
	rep, it := r.plan(t, ConversionOptions{})
	c := it.ConversionCheck
	if c.State != ConversionDropped || !slices.Contains(it.Kinds, KindConversionWebhook) || c.Differ == nil || c.Differ.LossCount != 2 {
		t.Fatalf("dropped: state %s kinds %v differ %+v", c.State, it.Kinds, c.Differ)
	}
	if !strings.Contains(c.Reason, "drops the conversion its stored objects need") || !slices.Contains(c.Differ.Losses[0].Fields, ".spec.host") {
		t.Errorf("reason %q, losses %+v", c.Reason, c.Differ.Losses)
	}
	if rep.Runbook[0].Action != ActionFixConversion {
		t.Errorf("first step %+v", rep.Runbook[0])
	}
}

// Offline (no cluster: --old-file), a conversion the release relies on cannot be asked: the
// verdict is unknown, never safe, and the runbook offers no consent to a loss.
func TestPlanConversionOffline(t *testing.T) {
	rel := testwebhook.StartForTest(t, testwebhook.Options{})
	live := readCRD(t, filepath.Join("..", "testdata", "crds", "crontab-webhook.yaml"))
	live.Spec.Versions = slices.DeleteFunc(live.Spec.Versions, func(v apiextensionsv1.CustomResourceDefinitionVersion) bool { return v.Name == "v1alpha1" })
	for i := range live.Spec.Versions {
		live.Spec.Versions[i].Storage = live.Spec.Versions[i].Name == "v1beta1"
	}
	live.Spec.Conversion = rel.WebhookConversion("v1")
	live.Status.StoredVersions = []string{"v1beta1"}
	next := live.DeepCopy()
	for i := range next.Spec.Versions {
		next.Spec.Versions[i].Storage = next.Spec.Versions[i].Name == "v1"
	}
	objs := []unstructured.Unstructured{{Object: map[string]any{"apiVersion": "stable.example.com/v1beta1", "kind": "CronTab",
		"metadata": map[string]any{"name": "a", "namespace": "default"}, "spec": map[string]any{"hostPort": "db:1"}}}}
	rep, err := Release(context.Background(), ReleaseClients{}, ReleaseOptions{Next: []*apiextensionsv1.CustomResourceDefinition{next},
		Live: []*apiextensionsv1.CustomResourceDefinition{live}, Sources: []ObjectSource{&SliceSource{Objects: objs}}})
	if err != nil {
		t.Fatal(err)
	}
	it := rep.Items[0]
	if c := it.ConversionCheck; c == nil || c.State != webhookcheck.StateNotAsked || !slices.Contains(it.Kinds, KindUnknown) || it.Verdict == VerdictSafe || rel.Requests() != 0 {
		t.Fatalf("offline: %+v kinds %v verdict %s", c, it.Kinds, it.Verdict)
	}
	if !strings.Contains(strings.Join(it.UnknownReasons, " "), "not asked: the plan is offline") {
		t.Errorf("unknown reasons: %q", it.UnknownReasons)
	}
	if cmds := commands(rep); strings.Contains(cmds, "--allow-data-loss") {
		t.Errorf("the runbook asks for consent to a loss nobody measured:\n%s", cmds)
	}
}

// The progress of the round trips (ReleaseOptions.OnConvert): called once for the CRD, with
// the total of objects × pairs (here 3 objects, to v1 the new storage version and to v1alpha1
// a version the release starts serving), the count ending at that total when it is done.
func TestPlanConversionProgress(t *testing.T) {
	rel := testwebhook.StartForTest(t, testwebhook.Options{DNSNames: []string{"absent-webhook.conv-system.svc"}})
	r := newConversionRelease(t, "progress.conv.plan.example.com", "absent-webhook", rel, 3)
	v1beta1, err := crdinfo.Lookup(r.next, "v1beta1")
	if err != nil {
		t.Fatal(err)
	}
	alpha := *v1beta1.DeepCopy()
	alpha.Name, alpha.Storage = "v1alpha1", false
	r.next.Spec.Versions = append(r.next.Spec.Versions, alpha)
	target, err := webhookcheck.ParseTarget(rel.URL)
	if err != nil {
		t.Fatal(err)
	}
	type call struct {
		crd                  string
		total, atStart, done int64
	}
	var calls []call
	rep, err := Release(context.Background(), r.c, ReleaseOptions{Next: []*apiextensionsv1.CustomResourceDefinition{r.next}, Conversion: ConversionOptions{Target: target},
		OnConvert: func(crd string, done *atomic.Int64, total int64) func() {
			calls = append(calls, call{crd: crd, total: total, atStart: done.Load(), done: -1})
			i := len(calls) - 1
			return func() { calls[i].done = done.Load() }
		}})
	if err != nil {
		t.Fatal(err)
	}
	c := rep.Items[0].ConversionCheck
	if c == nil || c.State != webhookcheck.StateAnswers || c.RoundTrip == nil || c.RoundTrip.Objects != 3 || len(c.Pairs) != 2 {
		t.Fatalf("the round trips: %+v", c)
	}
	n := c.RoundTrip.Objects * int64(len(c.Pairs))
	if want := (call{crd: r.next.Name, total: n, done: n}); len(calls) != 1 || calls[0] != want {
		t.Errorf("OnConvert: %+v, want one call %+v (pairs %+v)", calls, want, c.RoundTrip.Pairs)
	}
}

// sandboxService makes backend (a webhook on 127.0.0.1) the Service namespace/name that the API
// server's service proxy reaches, as it reaches a webhook deployed in a sandbox namespace: the
// proxy goes only to a ready endpoint that is a Pod's IP (it refuses loopback addresses), so a
// forwarder listens on this machine's first address that is not loopback, and a Pod (never
// run: envtest has no kubelet) holds that IP, an EndpointSlice names it. It returns the
// Service's port. Without such an address the test fails under CI=true and is skipped
// otherwise.
func sandboxService(t *testing.T, kube kubernetes.Interface, namespace, name, backend string) int {
	t.Helper()
	ctx := context.Background()
	var ip string
	addrs, _ := net.InterfaceAddrs()
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil && !n.IP.IsLoopback() && !n.IP.IsLinkLocalUnicast() {
			ip = n.IP.String()
			break
		}
	}
	if ip == "" {
		if os.Getenv("CI") == "true" {
			t.Fatal("no address but loopback on this machine: the service proxy cannot reach a local webhook")
		}
		t.Skip("no address but loopback on this machine: the service proxy cannot reach a local webhook")
	}
	l, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	go func() {
		for {
			in, err := l.Accept()
			if err != nil {
				return
			}
			out, err := net.Dial("tcp", backend)
			if err != nil {
				_ = in.Close()
				continue
			}
			go func() { _, _ = io.Copy(out, in); _ = out.Close() }()
			go func() { _, _ = io.Copy(in, out); _ = in.Close() }()
		}
	}()
	port := int32(l.Addr().(*net.TCPAddr).Port)
	if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx := context.Background()
		_ = kube.DiscoveryV1().EndpointSlices(namespace).Delete(ctx, name, metav1.DeleteOptions{})
		_ = kube.CoreV1().Services(namespace).Delete(ctx, name, metav1.DeleteOptions{})
		_ = kube.CoreV1().Pods(namespace).Delete(ctx, name, metav1.DeleteOptions{})
	})
	no := false
	pod, err := kube.CoreV1().Pods(namespace).Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.PodSpec{
		AutomountServiceAccountToken: &no, Containers: []corev1.Container{{Name: "webhook", Image: "example.com/webhook:v2"}}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pod.Status = corev1.PodStatus{Phase: corev1.PodRunning, PodIP: ip, PodIPs: []corev1.PodIP{{IP: ip}}}
	if _, err := kube.CoreV1().Pods(namespace).UpdateStatus(ctx, pod, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := kube.CoreV1().Services(namespace).Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: port, TargetPort: intstr.FromInt32(port)}}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	ready := true
	if _, err := kube.DiscoveryV1().EndpointSlices(namespace).Create(ctx, &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: name, Labels: map[string]string{discoveryv1.LabelServiceName: name}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints: []discoveryv1.Endpoint{{Addresses: []string{ip}, Conditions: discoveryv1.EndpointConditions{Ready: &ready},
			TargetRef: &corev1.ObjectReference{Kind: "Pod", Namespace: namespace, Name: name, UID: pod.UID}}},
		Ports: []discoveryv1.EndpointPort{{Port: &port}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	return int(port)
}

// A stored version the live CRD no longer serves: objects still stored there are converted from
// it on every read, but can be listed only at a served version, so the round trips cannot start
// there. The check says so (a warning naming the version and the migrate that rewrites them)
// instead of passing them over.
func TestPlanConversionNamesUnservedStoredVersions(t *testing.T) {
	rel := testwebhook.StartForTest(t, testwebhook.Options{})
	live := readCRD(t, filepath.Join("..", "testdata", "crds", "crontab-webhook.yaml"))
	for i := range live.Spec.Versions {
		v := &live.Spec.Versions[i]
		v.Storage = v.Name == "v1beta1"
		v.Served = v.Name != "v1alpha1"
	}
	live.Spec.Conversion = rel.WebhookConversion("v1")
	live.Status.StoredVersions = []string{"v1alpha1", "v1beta1"}
	next := live.DeepCopy()
	for i := range next.Spec.Versions {
		next.Spec.Versions[i].Storage = next.Spec.Versions[i].Name == "v1"
	}
	if _, unlisted := conversionPairs(live, next); !slices.Equal(unlisted, []string{"v1alpha1"}) {
		t.Fatalf("unlisted %v, want [v1alpha1]", unlisted)
	}
	rep, err := Release(context.Background(), ReleaseClients{}, ReleaseOptions{Next: []*apiextensionsv1.CustomResourceDefinition{next},
		Live: []*apiextensionsv1.CustomResourceDefinition{live}, Sources: []ObjectSource{&SliceSource{}}})
	if err != nil {
		t.Fatal(err)
	}
	c := rep.Items[0].ConversionCheck
	if c == nil {
		t.Fatal("no conversion check")
	}
	found := false
	for _, p := range c.Problems {
		found = found || p.Severity == webhookcheck.SeverityWarning && strings.Contains(p.Message, "status.storedVersions lists v1alpha1, which the live CRD does not serve") &&
			strings.Contains(p.Message, "kubectl crdver migrate "+live.Name)
	}
	if !found {
		t.Errorf("no warning names v1alpha1: %+v", c.Problems)
	}
}
