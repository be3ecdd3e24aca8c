package preflight

import (
	"os"
	"testing"

	"github.com/google/go-cmp/cmp"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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

// TestLostManagers: entries are matched by manager, operation and subresource (a relabelled
// apiVersion or a new entry is no loss); no entry left at all is a reset.
func TestLostManagers(t *testing.T) {
	e := func(m string, op metav1.ManagedFieldsOperationType, v, sub string) metav1.ManagedFieldsEntry {
		return metav1.ManagedFieldsEntry{Manager: m, Operation: op, APIVersion: "g/" + v, Subresource: sub}
	}
	before := []metav1.ManagedFieldsEntry{e("editor", "Update", "v1", ""), e("gitops", "Apply", "v1", ""), e("ctl", "Update", "v1", "status")}
	lost, reset := LostManagers(before, []metav1.ManagedFieldsEntry{e("editor", "Update", "v2", ""), e("gitops", "Apply", "v1", ""), e("crdver", "Update", "v2", "")})
	if want := []string{"ctl (Update at g/v1, /status)"}; !cmp.Equal(lost, want) || reset {
		t.Errorf("lost %v reset %v, want %v", lost, reset, want)
	}
	lost, reset = LostManagers(before, nil)
	if len(lost) != 3 || !reset {
		t.Errorf("all gone: lost %v reset %v", lost, reset)
	}
	if lost, reset := LostManagers(nil, nil); lost != nil || reset {
		t.Errorf("nothing before: %v %v", lost, reset)
	}
}
