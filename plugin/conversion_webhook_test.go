package plugin

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/yaml"

	crdinfo "github.com/crdver/kubectl-crdver/crd"
	"github.com/crdver/kubectl-crdver/internal/testwebhook"
)

// webhookRelease is a CronTab CRD stored at v1beta1 (its objects written there), converting to
// v1 through a working webhook by url; and a release folder whose CRD switches storage to v1
// and converts through the Service conv-system/crontab-webhook, and whose other documents
// deploy that webhook (a Deployment, the Service, a cert-manager Certificate the CRD's
// cainjector annotation names).
type webhookRelease struct {
	crd  string
	dir  string
	port int
	dyn  dynamic.Interface
	gvr  func(v string) (string, string, string)
}

func newWebhookRelease(t *testing.T, group string, rel *testwebhook.Server) *webhookRelease {
	t.Helper()
	ctx := context.Background()
	// The installed operator's webhook, a Service too (a url would stay beside the release's
	// service after a server-side apply by another field manager).
	old := testwebhook.StartForTest(t, testwebhook.Options{DNSNames: []string{"old-webhook.conv-system.svc"}})
	env.WebhookService(t, "conv-system", "old-webhook")
	b, err := os.ReadFile(td("crds", "crontab-webhook.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	live, err := crdinfo.Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	live.Spec.Group, live.Name = group, "crontabs."+group
	live.Spec.Versions = slices.DeleteFunc(live.Spec.Versions, func(v apiextensionsv1.CustomResourceDefinitionVersion) bool { return v.Name == "v1alpha1" })
	for i := range live.Spec.Versions {
		live.Spec.Versions[i].Storage = live.Spec.Versions[i].Name == "v1beta1"
	}
	next := live.DeepCopy()
	live.Spec.Conversion = serviceConversion(old, "old-webhook")
	registerCRD(t, live)
	w := &webhookRelease{crd: live.Name, dir: t.TempDir(), dyn: dynamic.NewForConfigOrDie(env.Config)}
	for i := 0; i < 4; i++ {
		u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": group + "/v1beta1", "kind": "CronTab",
			"metadata": map[string]any{"name": fmt.Sprintf("c%d", i), "namespace": "default"},
			"spec":     map[string]any{"cronSpec": "* * * * */5", "image": "img", "hostPort": fmt.Sprintf("db:%d", 5432+i)}}}
		if _, err := w.dyn.Resource(crdinfo.GVR(live, "v1beta1")).Namespace("default").Create(ctx, u, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for i := range next.Spec.Versions {
		next.Spec.Versions[i].Storage = next.Spec.Versions[i].Name == "v1"
	}
	w.port = portOf(rel)
	next.Annotations = map[string]string{"cert-manager.io/inject-ca-from": "conv-system/crontab-webhook-cert"}
	next.Spec.Conversion = serviceConversion(rel, "crontab-webhook")
	next.TypeMeta = metav1.TypeMeta{APIVersion: "apiextensions.k8s.io/v1", Kind: "CustomResourceDefinition"}
	crdYAML, err := yaml.Marshal(next)
	if err != nil {
		t.Fatal(err)
	}
	webhookYAML := fmt.Sprintf(`apiVersion: apps/v1
kind: Deployment
metadata: {name: crontab-operator, namespace: conv-system}
spec:
  selector: {matchLabels: {app: crontab-operator}}
  template:
    metadata: {labels: {app: crontab-operator}}
    spec:
      containers: [{name: manager, image: example.com/crontab-operator:v1}]
      volumes: [{name: cert, secret: {secretName: crontab-webhook-tls}}]
---
apiVersion: v1
kind: Service
metadata: {name: crontab-webhook, namespace: conv-system}
spec:
  selector: {app: crontab-operator}
  ports: [{port: %d, targetPort: 9443}]
---
apiVersion: cert-manager.io/v1
kind: Certificate
metadata: {name: crontab-webhook-cert, namespace: conv-system}
spec:
  secretName: crontab-webhook-tls
  dnsNames: [crontab-webhook.conv-system.svc]
  issuerRef: {name: selfsigned}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: unrelated, namespace: conv-system}
`, w.port)
	if err := os.WriteFile(filepath.Join(w.dir, "crds.yaml"), crdYAML, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(w.dir, "operator.yaml"), []byte(webhookYAML), 0o644); err != nil {
		t.Fatal(err)
	}
	return w
}

func portOf(s *testwebhook.Server) int {
	_, p, _ := net.SplitHostPort(s.Addr)
	n, _ := strconv.Atoi(p)
	return n
}

// serviceConversion converts through Service conv-system/name at s's port, with s's CA.
func serviceConversion(s *testwebhook.Server, name string) *apiextensionsv1.CustomResourceConversion {
	port, path := int32(portOf(s)), "/convert"
	return &apiextensionsv1.CustomResourceConversion{Strategy: apiextensionsv1.WebhookConverter, Webhook: &apiextensionsv1.WebhookConversion{
		ConversionReviewVersions: []string{"v1"},
		ClientConfig: &apiextensionsv1.WebhookClientConfig{CABundle: s.CABundle,
			Service: &apiextensionsv1.ServiceReference{Namespace: "conv-system", Name: name, Port: &port, Path: &path}}}}
}

// The release: CRDs that switch storage through a webhook Service that does not run
// yet. plan is not safe (exit 1) and names the Service and the release's documents that make
// the webhook, its runbook deploys the webhook first and asks for no consent to loss;
// upgrade --dry-run and --yes refuse with the same exit code and write nothing; once the
// webhook answers, the same upgrade goes on and completes.
func TestUpgradeWaitsForTheReleaseWebhook(t *testing.T) {
	isolateCache(t)
	rel := testwebhook.StartForTest(t, testwebhook.Options{DNSNames: []string{"crontab-webhook.conv-system.svc"}})
	w := newWebhookRelease(t, "release.conv.plugin.example.com", rel)
	before := snapshotCRDs(t, w.crd)

	p := runCluster(t, "plan", "-f", w.dir)
	if p.code != 1 {
		t.Fatalf("plan: exit %d\n%s\n%s", p.code, p.stdout, p.stderr)
	}
	mustContain(t, "plan", strings.Join(strings.Fields(p.stdout), " "), "breaking", "Conversion check (service conv-system/crontab-webhook:"+strconv.Itoa(w.port)+"/convert): not running",
		"Service conv-system/crontab-webhook does not exist",
		"1. [fix] "+w.crd+": deploy the release's conversion webhook and wait until it answers",
		"Deployment conv-system/crontab-operator ("+filepath.Join(w.dir, "operator.yaml")+" (document 1))",
		"Certificate conv-system/crontab-webhook-cert", "cert-manager.io/inject-ca-from: conv-system/crontab-webhook-cert",
		"kubectl -n conv-system rollout status deployment/crontab-operator --timeout=5m")
	if strings.Contains(p.stdout, "--allow-data-loss") || strings.Contains(p.stdout, "ConfigMap") {
		t.Errorf("plan asks for consent to a loss, or names an unrelated document:\n%s", p.stdout)
	}

	dry := runCluster(t, "upgrade", "-f", w.dir, "--dry-run")
	yes := runCluster(t, "upgrade", "-f", w.dir, "--yes", "--backup", filepath.Join(t.TempDir(), "b.yaml"))
	for _, u := range []result{dry, yes} {
		if u.code != 1 || !strings.Contains(u.stderr, "deploy the release's conversion webhook and wait until it answers") || strings.Contains(u.stderr, "--allow-data-loss") {
			t.Errorf("upgrade: exit %d (want 1, as plan)\n%s", u.code, u.stderr)
		}
	}
	if after := snapshotCRDs(t, w.crd); !slices.Equal(before, after) {
		t.Errorf("a refused upgrade wrote: %v → %v", before, after)
	}

	// --webhook: the release's webhook asked where it runs (here, by its URL), before it is
	// deployed: plan and the dry run judge the conversion through it; a run that writes still
	// needs the webhook the CRD names, which converts its writes.
	pw := runCluster(t, "plan", "-f", w.dir, "--webhook", rel.URL)
	flat := strings.Join(strings.Fields(pw.stdout), " ") // the report's lines wrap where the port's digits put them
	if pw.code != 0 || !strings.Contains(flat, "asked instead of service conv-system/crontab-webhook") || !strings.Contains(flat, "4 objects round-tripped") {
		t.Errorf("plan --webhook: exit %d\n%s\n%s", pw.code, pw.stdout, pw.stderr)
	}
	if d := runCluster(t, "upgrade", "-f", w.dir, "--dry-run", "--webhook", rel.URL); d.code != 0 {
		t.Errorf("upgrade --dry-run --webhook: exit %d\n%s", d.code, d.stderr)
	}
	y := runCluster(t, "upgrade", "-f", w.dir, "--yes", "--webhook", rel.URL, "--backup", filepath.Join(t.TempDir(), "b.yaml"))
	if y.code != 1 || !strings.Contains(y.stderr, "deploy the release's conversion webhook (service conv-system/crontab-webhook:"+strconv.Itoa(w.port)+"/convert) and wait until it answers: the upgrade's writes go through it") {
		t.Errorf("upgrade --yes --webhook, the CRD's own webhook not running: exit %d\n%s", y.code, y.stderr)
	}
	if after := snapshotCRDs(t, w.crd); !slices.Equal(before, after) {
		t.Errorf("--webhook wrote: %v → %v", before, after)
	}

	// The release's webhook answers now: the same command goes on, and completes.
	env.WebhookService(t, "conv-system", "crontab-webhook")
	u := runCluster(t, "upgrade", "-f", w.dir, "--yes", "--backup", filepath.Join(t.TempDir(), "b.yaml"))
	if u.code != 0 {
		t.Fatalf("upgrade with the webhook running: exit %d\n%s\n%s", u.code, u.stdout, u.stderr)
	}
	list, err := w.dyn.Resource(crdinfo.GVR(&apiextensionsv1.CustomResourceDefinition{Spec: apiextensionsv1.CustomResourceDefinitionSpec{Group: "release.conv.plugin.example.com", Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "crontabs"}}}, "v1")).List(context.Background(), metav1.ListOptions{})
	if err != nil || len(list.Items) != 4 {
		t.Fatalf("reading at v1 after the upgrade: %v", err)
	}
	// Removed while the webhook answers: the CRD finalizer lists the objects through it.
	if err := env.DeleteCRD(context.Background(), w.crd); err != nil {
		t.Error(err)
	}
}

func TestWebhookFlagUsage(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"upgrade", "-f", td("crds", "crontab-webhook.yaml"), "--webhook", "hook"}, "--webhook \"hook\": give https://HOST:PORT[/PATH] or NAMESPACE/SERVICE[:PORT]"},
		{[]string{"upgrade", "-f", td("crds", "crontab-webhook.yaml"), "--via", td("crds"), "--webhook", "ns/hook"}, "--webhook is for one release"},
	} {
		r := run(t, "", tc.args...)
		if r.code != ExitUsage || !strings.Contains(r.stderr, tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want exit 2 and %q", tc.args, r.code, r.stderr, tc.want)
		}
	}
}
