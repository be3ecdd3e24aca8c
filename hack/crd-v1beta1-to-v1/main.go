// Command crd-v1beta1-to-v1 converts a CustomResourceDefinition written as
// apiextensions.k8s.io/v1beta1 to apiextensions.k8s.io/v1 with the API server's own code
// (k8s.io/apiextensions-apiserver: v1beta1 defaults, then v1beta1 → internal → v1), which is
// what a cluster that was installed before Kubernetes 1.22 holds for the CRD today (the server
// stored it and serves it at v1). Used for the release corpus in testdata/releases (releases
// older than the v1 CRD API, e.g. cert-manager v0.16).
//
//	go run ./hack/crd-v1beta1-to-v1 < crd-v1beta1.yaml > crd-v1.yaml
package main

import (
	"fmt"
	"io"
	"os"

	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/install"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsv1beta1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1beta1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"
)

func main() {
	if err := run(os.Stdin, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "crd-v1beta1-to-v1:", err)
		os.Exit(1)
	}
}

func run(in io.Reader, out io.Writer) error {
	raw, err := io.ReadAll(in)
	if err != nil {
		return err
	}
	scheme := runtime.NewScheme()
	install.Install(scheme)
	var old apiextensionsv1beta1.CustomResourceDefinition
	if err := yaml.UnmarshalStrict(raw, &old); err != nil {
		return err
	}
	if old.APIVersion != apiextensionsv1beta1.SchemeGroupVersion.String() || old.Kind != "CustomResourceDefinition" {
		return fmt.Errorf("not an apiextensions.k8s.io/v1beta1 CustomResourceDefinition: %s %s", old.APIVersion, old.Kind)
	}
	scheme.Default(&old)
	var internal apiextensions.CustomResourceDefinition
	if err := scheme.Convert(&old, &internal, nil); err != nil {
		return err
	}
	var v1 apiextensionsv1.CustomResourceDefinition
	if err := scheme.Convert(&internal, &v1, nil); err != nil {
		return err
	}
	v1.APIVersion, v1.Kind = apiextensionsv1.SchemeGroupVersion.String(), "CustomResourceDefinition"
	v1.Status = apiextensionsv1.CustomResourceDefinitionStatus{}
	b, err := yaml.Marshal(&v1)
	if err != nil {
		return err
	}
	_, err = out.Write(b)
	return err
}
