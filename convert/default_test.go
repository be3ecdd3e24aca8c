package convert

import (
	"context"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	"github.com/crdver/kubectl-crdver/internal/testcrd"
	"github.com/crdver/kubectl-crdver/internal/testwebhook"
)

// defaultCRD is a CRD whose v1beta1 defaults spec.mode and whose v1 does not have it.
func defaultCRD() *apiextensionsv1.CustomResourceDefinition {
	return testcrd.New("default.example.com", "Repo", testcrd.Versions("v1beta1", "v1"), testcrd.Storage("v1"),
		testcrd.Spec(map[string]apiextensionsv1.JSONSchemaProps{
			"url":  {Type: "string"},
			"mode": {Type: "string", Default: &apiextensionsv1.JSON{Raw: []byte(`"go-git"`)}},
		}, "v1beta1"),
		testcrd.Spec(map[string]apiextensionsv1.JSONSchemaProps{"url": {Type: "string"}}, "v1"))
}

// TestDefaultIsNotALoss: a field the input does not set, which only v1beta1's default puts
// there, is not lost when v1 drops it (neither pruned-fields nor round-trip fails; both list it
// as a dropped default); the same field set by the input, even to the default's value, is
// lost. The same through a webhook (one that only rewrites apiVersion) as with conversion None.
func TestDefaultIsNotALoss(t *testing.T) {
	objects := []Object{
		{Source: "unset", Object: map[string]any{"apiVersion": "default.example.com/v1beta1", "kind": "Repo",
			"metadata": map[string]any{"name": "unset", "namespace": "default"}, "spec": map[string]any{"url": "u"}}},
		{Source: "set", Object: map[string]any{"apiVersion": "default.example.com/v1beta1", "kind": "Repo",
			"metadata": map[string]any{"name": "set", "namespace": "default"}, "spec": map[string]any{"url": "u", "mode": "go-git"}}},
	}
	srv := testwebhook.StartForTest(t, testwebhook.Options{})
	srv.Set(testwebhook.Identity)
	webhook := defaultCRD()
	webhook.Spec.Conversion = srv.WebhookConversion()
	for _, crd := range []*apiextensionsv1.CustomResourceDefinition{defaultCRD(), webhook} {
		t.Run(string(crd.Spec.Conversion.Strategy), func(t *testing.T) {
			opts := Options{CRD: crd, To: "v1", RoundTrip: true}
			if crd.Spec.Conversion.Strategy == apiextensionsv1.WebhookConverter {
				opts.Transport = transport(t, crd, TransportOptions{})
			}
			r, err := Run(context.Background(), opts, objects)
			if err != nil {
				t.Fatal(err)
			}
			failed := map[string]bool{}
			for _, f := range r.Findings {
				if f.Path != ".spec.mode" {
					t.Errorf("finding %+v", f)
				}
				failed[f.Object+" "+f.Check] = true
			}
			if len(failed) != 2 || !failed["set "+CheckPruned] || !failed["set "+CheckRoundTrip] {
				t.Errorf("failed: %v; want the object that sets spec.mode pruned and lost on the round trip", failed)
			}
			dropped := map[string]bool{}
			for _, c := range r.Added {
				if c.Kind == DiffDefaultDropped && c.Path == ".spec.mode" {
					dropped[c.Object+" "+c.Direction] = true
				}
			}
			if len(dropped) != 2 || !dropped["unset v1beta1 -> v1"] || !dropped["unset v1beta1 -> v1 -> v1beta1"] {
				t.Errorf("dropped defaults: %v; want the object that does not set spec.mode, both ways (%+v)", dropped, r.Added)
			}
			if r.Converted != 1 || len(r.Failed) != 1 || r.Failed[0].Source != "set" {
				t.Errorf("converted %d, failed %+v; want 1 and the object that sets spec.mode", r.Converted, r.Failed)
			}
		})
	}
}
