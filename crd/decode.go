package crd

import (
	"fmt"
	"strings"

	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/install"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"sigs.k8s.io/yaml"
)

var (
	crdScheme = runtime.NewScheme()
	crdCodecs serializer.CodecFactory
)

func init() {
	install.Install(crdScheme)
	crdCodecs = serializer.NewCodecFactory(crdScheme)
}

// Scheme returns the scheme that knows apiextensions.k8s.io (internal, v1 and v1beta1).
func Scheme() *runtime.Scheme { return crdScheme }

// IsCRD reports whether a document's apiVersion and kind name a CustomResourceDefinition.
func IsCRD(apiVersion, kind string) bool {
	return kind == "CustomResourceDefinition" &&
		(apiVersion == "apiextensions.k8s.io/v1" || apiVersion == "apiextensions.k8s.io/v1beta1")
}

// Decode decodes one CRD document (YAML or JSON, apiextensions.k8s.io/v1 or v1beta1) the way
// the API server does: into the internal type with the version's defaults applied (v1beta1
// defaults preserveUnknownFields to true and copies spec.validation into every version), then
// converted to v1.
func Decode(data []byte) (*apiextensionsv1.CustomResourceDefinition, error) {
	js, err := yaml.YAMLToJSON(data)
	if err != nil {
		return nil, fmt.Errorf("malformed YAML: %w", err)
	}
	internal := &apiextensions.CustomResourceDefinition{}
	obj, gvk, err := crdCodecs.UniversalDecoder().Decode(js, nil, internal)
	if err != nil {
		if gvk != nil && !IsCRD(gvk.GroupVersion().String(), gvk.Kind) {
			return nil, fmt.Errorf("%s is not a CustomResourceDefinition", describeGVK(gvk.GroupVersion().String(), gvk.Kind))
		}
		return nil, fmt.Errorf("not a valid CustomResourceDefinition: %s", firstLine(err.Error()))
	}
	in, ok := obj.(*apiextensions.CustomResourceDefinition)
	if !ok {
		return nil, fmt.Errorf("%s is not a CustomResourceDefinition", describeGVK(gvk.GroupVersion().String(), gvk.Kind))
	}
	out := &apiextensionsv1.CustomResourceDefinition{}
	if err := crdScheme.Convert(in, out, nil); err != nil {
		return nil, fmt.Errorf("converting to apiextensions.k8s.io/v1: %w", err)
	}
	out.APIVersion, out.Kind = apiextensionsv1.SchemeGroupVersion.String(), "CustomResourceDefinition"
	return out, nil
}

func describeGVK(apiVersion, kind string) string {
	if apiVersion == "" && kind == "" {
		return "a document with no apiVersion and kind"
	}
	return fmt.Sprintf("%s %s", apiVersion, kind)
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}
