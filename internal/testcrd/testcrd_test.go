package testcrd

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

func TestNewWithOptions(t *testing.T) {
	props := map[string]apiextensionsv1.JSONSchemaProps{"size": {Type: "integer"}}
	url := "https://127.0.0.1:9443/convert"
	warning := "use v1"
	schema := &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{Type: "object",
		Properties: map[string]apiextensionsv1.JSONSchemaProps{"spec": {Type: "object", Properties: props}}}}
	got := New("example.com", "Policy", Versions("v1alpha1", "v1beta1", "v1"), Storage("v1beta1"), Unserved("v1alpha1"),
		Deprecated("v1beta1", warning), Spec(props, "v1beta1", "v1"), Webhook(url, []byte("ca")), Stored("v1alpha1", "v1beta1"), ShortNames("pol"), Cluster())
	want := &apiextensionsv1.CustomResourceDefinition{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apiextensions.k8s.io/v1", Kind: "CustomResourceDefinition"},
		ObjectMeta: metav1.ObjectMeta{Name: "policies.example.com"},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: "example.com", Scope: apiextensionsv1.ClusterScoped,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "policies", Singular: "policy", Kind: "Policy", ListKind: "PolicyList", ShortNames: []string{"pol"}},
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{
				{Name: "v1alpha1"},
				{Name: "v1beta1", Served: true, Storage: true, Deprecated: true, DeprecationWarning: &warning, Schema: schema},
				{Name: "v1", Served: true, Schema: schema},
			},
			Conversion: &apiextensionsv1.CustomResourceConversion{Strategy: apiextensionsv1.WebhookConverter, Webhook: &apiextensionsv1.WebhookConversion{
				ConversionReviewVersions: []string{"v1"}, ClientConfig: &apiextensionsv1.WebhookClientConfig{URL: &url, CABundle: []byte("ca")}}},
		},
		Status: apiextensionsv1.CustomResourceDefinitionStatus{StoredVersions: []string{"v1alpha1", "v1beta1"}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("New (-want +got):\n%s", diff)
	}
	if got.Spec.Versions[1].Schema == got.Spec.Versions[2].Schema {
		t.Error("two versions share one schema: a test changing one would change both")
	}
	if n := New("example.com", "Gateway").Name; n != "gateways.example.com" {
		t.Errorf("name %s, want gateways.example.com", n)
	}
}

func TestWithChangesACopy(t *testing.T) {
	orig := New("a.example.com", "Widget", Versions("v1"), Storage("v1"))
	moved := With(orig, Group("b.example.com"), Plural("gadgets"))
	if orig.Name != "widgets.a.example.com" || orig.Spec.Group != "a.example.com" {
		t.Errorf("With changed the original: %s %s", orig.Name, orig.Spec.Group)
	}
	if moved.Name != "gadgets.b.example.com" || moved.Spec.Group != "b.example.com" {
		t.Errorf("moved: %s %s, want gadgets.b.example.com", moved.Name, moved.Spec.Group)
	}
}

func TestYAMLIsOneDocumentEach(t *testing.T) {
	a, b := New("example.com", "Widget"), New("example.com", "Gadget")
	got := string(YAML(t, a, b))
	wa, _ := yaml.Marshal(a)
	wb, _ := yaml.Marshal(b)
	if want := string(wa) + "---\n" + string(wb); got != want {
		t.Errorf("YAML:\n%s\nwant:\n%s", got, want)
	}
}

func TestKeepPicksARelease(t *testing.T) {
	warning := "old"
	src := New("example.com", "Widget", Versions("v1beta1", "v1"), Storage("v1beta1"), Deprecated("v1beta1", warning), Unserved("v1"),
		Spec(map[string]apiextensionsv1.JSONSchemaProps{"size": {Type: "integer"}}))
	got := With(src, CopyVersion("v1", "v2"), Keep("v1beta1", "v2"))
	want := []apiextensionsv1.CustomResourceDefinitionVersion{
		{Name: "v1beta1", Served: true, Schema: src.Spec.Versions[0].Schema},
		{Name: "v2", Served: true, Storage: true, Schema: src.Spec.Versions[1].Schema},
	}
	if diff := cmp.Diff(want, got.Spec.Versions); diff != "" {
		t.Errorf("versions (-want +got):\n%s", diff)
	}
	if !src.Spec.Versions[0].Deprecated || len(src.Spec.Versions) != 2 {
		t.Error("With changed the source CRD")
	}
}
