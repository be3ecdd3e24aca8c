package upgrade

import (
	"bytes"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"
)

// Manifest is crds as one YAML stream for kubectl apply -f (upgrade --intermediate-crds
// prints Intermediates with it): each CRD's ApplyBody after a "---" line, in order.
func Manifest(crds []*apiextensionsv1.CustomResourceDefinition) ([]byte, error) {
	var out bytes.Buffer
	for _, crd := range crds {
		body, err := ApplyBody(crd)
		if err != nil {
			return nil, err
		}
		y, err := yaml.JSONToYAML(body)
		if err != nil {
			return nil, err
		}
		out.WriteString("---\n")
		out.Write(y)
	}
	return out.Bytes(), nil
}
