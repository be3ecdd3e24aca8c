package testenv

import (
	"bufio"
	"bytes"
	"io"
	"os"
	"path/filepath"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	crdinfo "github.com/crdver/kubectl-crdver/crd"
)

// CRDFile is the path of a shared test CRD: <repo>/testdata/crds/<name>.
func CRDFile(t testing.TB, name string) string {
	t.Helper()
	root, err := RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Join(root, "testdata", "crds", name)
}

// ReadDocuments returns the non-empty YAML (or JSON) documents of a file.
func ReadDocuments(t testing.TB, path string) [][]byte {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out [][]byte
	r := utilyaml.NewYAMLReader(bufio.NewReaderSize(f, 64*1024))
	for {
		doc, err := r.Read()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if len(bytes.TrimSpace(doc)) > 0 {
			out = append(out, doc)
		}
	}
	return out
}

// ReadCRDs decodes every CRD of a file (v1 or v1beta1, several documents) as the API server
// would (crd.Decode).
func ReadCRDs(t testing.TB, path string) []*apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	var out []*apiextensionsv1.CustomResourceDefinition
	for _, doc := range ReadDocuments(t, path) {
		crd, err := crdinfo.Decode(doc)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		out = append(out, crd)
	}
	return out
}

// LoadCRD is the first CRD of testdata/crds/<name>.
func LoadCRD(t testing.TB, name string) *apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	crds := ReadCRDs(t, CRDFile(t, name))
	if len(crds) == 0 {
		t.Fatalf("testdata/crds/%s holds no CustomResourceDefinition", name)
	}
	return crds[0]
}

// ForServer makes crd installable on the test server: conversion webhooks cannot be reached,
// so conversion becomes None; apiextensions.k8s.io/v1 refuses preserveUnknownFields: true
// (the default of v1beta1 files), so it becomes false; status and server-set metadata are
// cleared.
func ForServer(crd *apiextensionsv1.CustomResourceDefinition) *apiextensionsv1.CustomResourceDefinition {
	c := crd.DeepCopy()
	c.Spec.PreserveUnknownFields = false
	c.Status = apiextensionsv1.CustomResourceDefinitionStatus{}
	c.ResourceVersion, c.UID, c.CreationTimestamp = "", "", metav1.Time{}
	if c.Spec.Conversion != nil && c.Spec.Conversion.Strategy == apiextensionsv1.WebhookConverter {
		c.Spec.Conversion = &apiextensionsv1.CustomResourceConversion{Strategy: apiextensionsv1.NoneConverter}
	}
	return c
}
