package doctor

import (
	"context"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	"github.com/crdver/kubectl-crdver/internal/testcrd"
)

// Webhook configurations the API server's CRD validation no longer accepts (but older
// servers stored): checked without a cluster.
func TestWebhookConfigChecks(t *testing.T) {
	url := "https://127.0.0.1:1/convert"
	mk := func(reviewVersions []string, caBundle []byte) *apiextensionsv1.CustomResourceDefinition {
		return testcrd.New("x.test", "Thing", testcrd.Versions("v1"), testcrd.Storage("v1"), testcrd.Webhook(url, caBundle, reviewVersions...))
	}
	run := func(crd *apiextensionsv1.CustomResourceDefinition) []Finding {
		k := &checker{ctx: context.Background(), opts: Options{Now: time.Now, WebhookTimeout: time.Second}, crd: crd, res: crdResult{objects: -1}}
		k.checkWebhook()
		return k.res.findings
	}
	fs := run(mk([]string{"v2"}, nil))
	expect(t, fs, CheckWebhook, SeverityError, "conversionReviewVersions [v2] holds neither v1 nor v1beta1")
	expectNo(t, run(mk([]string{"v1beta1"}, nil)), CheckWebhook, SeverityWarning)
	for _, f := range run(mk([]string{"v1beta1"}, nil)) {
		if f.Severity == SeverityError && f.Message != "webhook is down: url https://127.0.0.1:1/convert: connect: connection refused" {
			t.Errorf("unexpected error: %s", f.Message)
		}
	}
	expect(t, run(mk([]string{"v1"}, []byte("not a certificate"))), CheckWebhook, SeverityError, "caBundle holds no PEM certificate")
}
