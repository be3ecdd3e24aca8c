package preview

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

// An object with metadata.resourceVersion (e.g. from kubectl get -o yaml): a real create fails,
// and preview says so, although a server-side dry-run accepts it.
func TestPreviewResourceVersionOnCreate(t *testing.T) {
	ctx := context.Background()
	crd := forServer(readCRDFile(t, filepath.Join("..", "testdata", "crds", "crontab.yaml"))[0])
	if _, err := env.CreateCRD(ctx, crd.DeepCopy()); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = env.DeleteCRD(ctx, crd.Name) }()
	body := []byte(`{"apiVersion":"stable.example.com/v1","kind":"CronTab","metadata":{"name":"rv","namespace":"default","resourceVersion":"5"}}`)
	srv := newServer(t)
	_, err := srv.do(ctx, srv.rc.Post().AbsPath(resourcePath(crd, "v1", "default")).SetHeader("Content-Type", "application/json").Body(body))
	if err == nil || !strings.Contains(err.Error(), "resourceVersion should not be set on objects to be created") {
		t.Fatalf("the API server did not refuse the create as expected: %v", err)
	}
	p, err := NewPreviewer(crd)
	if err != nil {
		t.Fatal(err)
	}
	r, err := p.Create(ctx, body, PreviewOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(strings.Join(r.Notes, "\n"), "resourceVersion should not be set on objects to be created") {
		t.Errorf("preview does not warn about resourceVersion: %v", r.Notes)
	}
}
