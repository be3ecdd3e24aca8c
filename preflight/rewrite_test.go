package preflight

import (
	"context"
	"path/filepath"
	"slices"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/crdver/kubectl-crdver/internal/testcrd"
	"github.com/crdver/kubectl-crdver/internal/testenv"
	"github.com/crdver/kubectl-crdver/migrate"
)

// CheckRewrite is the preflight bound to the rewrite's checkpoint: a rewrite in progress at
// the target has written the objects up to its Through key, so only the later ones are
// checked; any other checkpoint (none, a finished run, another storage version) checks them
// all. KafkaConnect stored at v1beta2 with v1 the storage version: spec.logging is lost.
func TestCheckRewrite(t *testing.T) {
	ctx := context.Background()
	crd := testcrd.With(testenv.LoadCRD(t, "kafkaconnects.yaml"), testcrd.Group("rewrite.preflight.example.com"))
	dyn := setup(t, crd, "pf-rw")
	for _, name := range []string{"a-logging", "z-logging"} {
		create(t, dyn, crd, "v1beta2", "pf-rw", name, map[string]any{"bootstrapServers": "kafka:9092", "groupId": "connect", "logging": "debug"})
	}
	c := fresh(t, crd.Name)
	for i := range c.Spec.Versions {
		c.Spec.Versions[i].Storage = c.Spec.Versions[i].Name == "v1"
	}
	if _, err := apiextensionsclient.NewForConfigOrDie(env.Config).ApiextensionsV1().CustomResourceDefinitions().Update(ctx, c, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	live := fresh(t, crd.Name)
	mc, err := migrate.NewClients(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	running := func(state, storage string) *migrate.Checkpoint {
		return &migrate.Checkpoint{Server: mc.Server, CRD: live.Name, UID: string(live.UID), StorageVersion: storage,
			Generation: live.Generation, State: state, Through: "pf-rw/m"}
	}
	for _, tc := range []struct {
		name string
		cp   *migrate.Checkpoint
		want []string
	}{
		{"no checkpoint", nil, []string{"a-logging", "z-logging"}},
		{"rewrite in progress through pf-rw/m", running(migrate.StateRunning, "v1"), []string{"z-logging"}},
		{"finished run", running(migrate.StateComplete, "v1"), []string{"a-logging", "z-logging"}},
		{"run at another storage version", running(migrate.StateRunning, "v1beta2"), []string{"a-logging", "z-logging"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cpPath := filepath.Join(t.TempDir(), "checkpoint.json")
			if tc.cp != nil {
				if err := tc.cp.Save(cpPath); err != nil {
					t.Fatal(err)
				}
			}
			var calls int
			r, err := CheckRewrite(ctx, mc, live, RewriteOptions{Target: "v1", Checkpoint: cpPath, ChunkSize: 1, Progress: func(_, _ int64) { calls++ }})
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, l := range r.Losses {
				got = append(got, l.Name)
			}
			if !slices.Equal(got, tc.want) || r.RejectedCount != 0 {
				t.Errorf("losses %v (rejected %d), want %v", got, r.RejectedCount, tc.want)
			}
			if calls == 0 {
				t.Errorf("progress never called")
			}
		})
	}
}

// WebhookTransport: none without a webhook, the URL directly, a service only through the
// API server's service proxy.
func TestWebhookTransport(t *testing.T) {
	url := "https://127.0.0.1:9443/convert"
	webhook := func(cc *apiextensionsv1.WebhookClientConfig) *apiextensionsv1.CustomResourceDefinition {
		crd := testenv.LoadCRD(t, "crontab.yaml")
		crd.Spec.Conversion = &apiextensionsv1.CustomResourceConversion{Strategy: apiextensionsv1.WebhookConverter,
			Webhook: &apiextensionsv1.WebhookConversion{ClientConfig: cc, ConversionReviewVersions: []string{"v1"}}}
		return crd
	}
	service := &apiextensionsv1.WebhookClientConfig{Service: &apiextensionsv1.ServiceReference{Namespace: "crontab", Name: "conversion"}}
	proxy := kubernetes.NewForConfigOrDie(env.Config).CoreV1().RESTClient()
	for _, tc := range []struct {
		name  string
		crd   *apiextensionsv1.CustomResourceDefinition
		proxy bool
		want  bool
	}{
		{"conversion None", testenv.LoadCRD(t, "crontab.yaml"), true, false},
		{"webhook url", webhook(&apiextensionsv1.WebhookClientConfig{URL: &url}), false, true},
		{"webhook service through the proxy", webhook(service), true, true},
		{"webhook service without a proxy", webhook(service), false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var tr any
			if tc.proxy {
				tr = WebhookTransport(context.Background(), tc.crd, proxy)
			} else {
				tr = WebhookTransport(context.Background(), tc.crd, nil)
			}
			if got := tr != nil; got != tc.want {
				t.Errorf("transport %T, want one: %v", tr, tc.want)
			}
		})
	}
}
