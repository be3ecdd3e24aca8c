package explain

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/utils/ptr"
)

// With conversion strategy Webhook preview cannot convert: it previews in the object's own
// version and says that the webhook decides the rest.
func TestPreviewWebhookStrategy(t *testing.T) {
	crd := readCRDFile(t, filepath.Join("..", "testdata", "crds", "crontab.yaml"))[0]
	crd.Spec.Conversion = &apiextensionsv1.CustomResourceConversion{
		Strategy: apiextensionsv1.WebhookConverter,
		Webhook: &apiextensionsv1.WebhookConversion{
			ClientConfig:             &apiextensionsv1.WebhookClientConfig{URL: ptr.To("https://127.0.0.1:9443/convert")},
			ConversionReviewVersions: []string{"v1"},
		},
	}
	p, err := NewPreviewer(crd)
	if err != nil {
		t.Fatal(err)
	}
	obj := []byte(`{"apiVersion":"stable.example.com/v1beta1","kind":"CronTab","metadata":{"name":"a"},"spec":{"hostPort":"db:1","replicas":3}}`)
	r, err := p.Create(context.Background(), obj, PreviewOptions{ReadVersion: "v1"})
	if err != nil {
		t.Fatal(err)
	}
	if r.ReadVersion != "v1beta1" || r.Object["apiVersion"] != "stable.example.com/v1beta1" {
		t.Errorf("read version %s, apiVersion %v: want the object's own version v1beta1", r.ReadVersion, r.Object["apiVersion"])
	}
	notes := strings.Join(r.Notes, "\n")
	for _, want := range []string{"converting it to v1 needs the webhook", "converts the object through the conversion webhook"} {
		if !strings.Contains(notes, want) {
			t.Errorf("notes do not say %q:\n%s", want, notes)
		}
	}
	spec, _ := r.Object["spec"].(map[string]any)
	if spec["hostPort"] != "db:1" {
		t.Errorf("hostPort was pruned although the webhook (not strategy None) converts: %v", spec)
	}
}
