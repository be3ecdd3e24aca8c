package preflight

import (
	"os"
	"testing"

	"github.com/google/go-cmp/cmp"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"
)

func loadTypechangeCRD(t *testing.T, name string) *apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	b, err := os.ReadFile("../testdata/typechange/" + name)
	if err != nil {
		t.Fatal(err)
	}
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := yaml.UnmarshalStrict(b, crd); err != nil {
		t.Fatal(err)
	}
	return crd
}

// TestTypeCheckerFindsEachChangedType: the object written at v1 fits v1 and, read at v2 (the
// same content), does not fit v2 in each of the three changed fields, with
// structured-merge-diff's own errors; the convertible values come with their conversion.
func TestTypeCheckerFindsEachChangedType(t *testing.T) {
	c, err := NewTypeChecker(loadTypechangeCRD(t, "new.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	obj := map[string]any{
		"apiVersion": "typechange.example.com/v1", "kind": "Broker",
		"metadata": map[string]any{"name": "text-config", "namespace": "default"},
		"spec":     map[string]any{"config": "retention: 7d\npartitions: 3\n", "hosts": "broker-0.example.com", "port": int64(9092), "replicas": int64(3)},
	}
	if got := c.Check(obj, "v1"); got != nil {
		t.Fatalf("at v1: %v, want it to fit", got)
	}
	got := c.Check(obj, "v2")
	for i := range got {
		t.Logf("%+v", got[i])
		got[i].Error, got[i].Value = "", ""
	}
	want := []TypeMismatch{
		{Path: ".spec.config", ValueType: "string", Expected: "map", Converted: `{"partitions":3,"retention":"7d"}`},
		{Path: ".spec.hosts", ValueType: "string", Expected: "list", Converted: `["broker-0.example.com"]`},
		{Path: ".spec.port", ValueType: "integer", Expected: "string", Converted: `"9092"`},
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("mismatches at v2 (-want +got):\n%s", d)
	}
	plain := map[string]any{"apiVersion": "typechange.example.com/v1", "kind": "Broker",
		"metadata": map[string]any{"name": "plain"}, "spec": map[string]any{"replicas": int64(1)}}
	if got := c.Check(plain, "v2"); got != nil {
		t.Errorf("plain at v2: %v, want it to fit", got)
	}
	opaque := map[string]any{"apiVersion": "typechange.example.com/v1", "kind": "Broker",
		"metadata": map[string]any{"name": "opaque"}, "spec": map[string]any{"config": "just words"}}
	if got := c.Check(opaque, "v2"); len(got) != 1 || got[0].Converted != "" || got[0].Expected != "map" {
		t.Errorf("opaque at v2: %+v, want one mismatch at .spec.config that does not convert", got)
	}
}
