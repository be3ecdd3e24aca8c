package plugin

import (
	"context"
	"fmt"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/crdver/kubectl-crdver/internal/testcrd"
)

// benchCRD is a CRD of typical size: three versions, each with a schema of 40 fields.
func benchCRD(i int) *apiextensionsv1.CustomResourceDefinition {
	group := fmt.Sprintf("bench%03d.example.com", i)
	props := map[string]apiextensionsv1.JSONSchemaProps{}
	for f := 0; f < 40; f++ {
		props[fmt.Sprintf("field%02d", f)] = apiextensionsv1.JSONSchemaProps{
			Type: "string", Description: "A field of the benchmark CRD, with a description of ordinary length.", MaxLength: ptr.To[int64](253),
		}
	}
	schema := apiextensionsv1.JSONSchemaProps{
		Type: "object",
		Properties: map[string]apiextensionsv1.JSONSchemaProps{
			"spec":   {Type: "object", Properties: props},
			"status": {Type: "object", XPreserveUnknownFields: ptr.To(true)},
		},
	}
	return testcrd.New(group, "Thing", testcrd.Versions("v1alpha1", "v1beta1", "v1"), testcrd.Storage("v1"), testcrd.Schema(schema))
}

// BenchmarkVersionsAll200 runs `versions --all` against the local API server holding 200 CRDs
// (target: under 1 s). The CRDs are created once, before timing.
func BenchmarkVersionsAll200(b *testing.B) {
	ctx := context.Background()
	cs, err := newCRDClient(env.Config)
	if err != nil {
		b.Fatal(err)
	}
	for i := 0; i < 200; i++ {
		_, err := cs.ApiextensionsV1().CustomResourceDefinitions().Create(ctx, benchCRD(i), metav1.CreateOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			b.Fatal(err)
		}
	}
	for i := 0; i < 200; i++ {
		if _, err := env.WaitEstablished(ctx, benchCRD(i).Name); err != nil {
			b.Fatal(err)
		}
	}
	raw, err := cs.ApiextensionsV1().RESTClient().Get().AbsPath("/apis/apiextensions.k8s.io/v1/customresourcedefinitions").SetHeader("Accept", "application/json").DoRaw(ctx)
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		r := runCluster(b, "versions", "--all")
		if r.code != 0 {
			b.Fatalf("exit %d: %s", r.code, r.stderr)
		}
	}
	b.ReportMetric(float64(len(raw))/1e6, "list-MB-json")
}
