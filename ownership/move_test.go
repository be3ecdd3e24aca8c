package ownership

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"
	"sigs.k8s.io/structured-merge-diff/v6/value"
)

const (
	gOld = "stable.example.com/v1beta1"
	gNew = "stable.example.com/v1"
)

func entry(manager string, op metav1.ManagedFieldsOperationType, apiVersion, fields string, at time.Time) metav1.ManagedFieldsEntry {
	t := metav1.NewTime(at)
	return metav1.ManagedFieldsEntry{Manager: manager, Operation: op, APIVersion: apiVersion, Time: &t, FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte(fields)}}
}

func obj(t *testing.T, js string) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(js), &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// canonical re-encodes a FieldsV1 so that two sets compare regardless of key order.
func canonical(t *testing.T, raw []byte) string {
	t.Helper()
	s := fieldpath.NewSet()
	if err := s.FromJSON(strings.NewReader(string(raw))); err != nil {
		t.Fatal(err)
	}
	b, err := s.ToJSON()
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestMoveSamePathsRelabelsOnly(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	in := []metav1.ManagedFieldsEntry{
		entry("applier", metav1.ManagedFieldsOperationApply, gOld, `{"f:metadata":{"f:labels":{".":{},"f:app":{}}},"f:spec":{"f:size":{},"f:ports":{"k:{\"name\":\"http\"}":{".":{},"f:name":{},"f:port":{}}}}}`, now),
		entry("updater", metav1.ManagedFieldsOperationUpdate, gNew, `{"f:spec":{"f:color":{}}}`, now),
	}
	target := obj(t, `{"apiVersion":"stable.example.com/v1","kind":"W","metadata":{"name":"a","labels":{"app":"x"}},"spec":{"size":1,"color":"red","ports":[{"name":"http","port":80}]}}`)
	need, err := NeedsSource(in, gOld, target)
	if err != nil || need {
		t.Fatalf("NeedsSource = %v, %v; want false: every owned path exists at the target", need, err)
	}
	out, res, err := Move(in, gOld, gNew, nil, target)
	if err != nil {
		t.Fatal(err)
	}
	if res.Moved != 1 || res.Converted != 0 || res.Unresolved != "" {
		t.Fatalf("result %+v", res)
	}
	if out[0].APIVersion != gNew || out[0].Manager != "applier" || out[0].Operation != metav1.ManagedFieldsOperationApply || !out[0].Time.Equal(in[0].Time) {
		t.Fatalf("moved entry %+v", out[0])
	}
	if d := cmp.Diff(canonical(t, in[0].FieldsV1.Raw), canonical(t, out[0].FieldsV1.Raw)); d != "" {
		t.Fatalf("field set changed (-want +got):\n%s", d)
	}
	if d := cmp.Diff(in[1], out[1]); d != "" {
		t.Fatalf("entry of the target version changed:\n%s", d)
	}
	if in[0].APIVersion != gOld {
		t.Fatal("Move modified its input")
	}
}

func TestMoveRenamedFieldGoesToItsOwner(t *testing.T) {
	now := time.Now()
	in := []metav1.ManagedFieldsEntry{
		entry("applier", metav1.ManagedFieldsOperationApply, gOld, `{"f:spec":{"f:hostPort":{},"f:size":{}}}`, now),
		entry("updater", metav1.ManagedFieldsOperationUpdate, gNew, `{"f:spec":{"f:color":{}}}`, now),
	}
	source := obj(t, `{"apiVersion":"stable.example.com/v1beta1","spec":{"hostPort":"h:80","size":1,"color":"red"}}`)
	target := obj(t, `{"apiVersion":"stable.example.com/v1","spec":{"host":"h","port":"80","size":1,"color":"red"}}`)
	need, err := NeedsSource(in, gOld, target)
	if err != nil || !need {
		t.Fatalf("NeedsSource = %v, %v; want true (spec.hostPort is not at v1)", need, err)
	}
	if _, _, err := Move(in, gOld, gNew, nil, target); err == nil {
		t.Fatal("Move without the source object succeeded although a path is missing at the target")
	}
	out, res, err := Move(in, gOld, gNew, source, target)
	if err != nil {
		t.Fatal(err)
	}
	if res.Moved != 1 || res.Converted != 1 || res.Unresolved != "" {
		t.Fatalf("result %+v", res)
	}
	want := canonical(t, []byte(`{"f:spec":{"f:host":{},"f:port":{},"f:size":{}}}`))
	if d := cmp.Diff(want, canonical(t, out[0].FieldsV1.Raw)); d != "" {
		t.Fatalf("converted field set (-want +got):\n%s", d)
	}
}

func TestMoveAmbiguousRenameIsUnresolved(t *testing.T) {
	now := time.Now()
	in := []metav1.ManagedFieldsEntry{
		entry("a", metav1.ManagedFieldsOperationApply, gOld, `{"f:spec":{"f:hostPort":{}}}`, now),
		entry("b", metav1.ManagedFieldsOperationApply, gOld, `{"f:spec":{"f:oldName":{}}}`, now),
	}
	source := obj(t, `{"spec":{"hostPort":"h:80","oldName":"x"}}`)
	target := obj(t, `{"spec":{"host":"h","port":"80","newName":"x"}}`)
	out, res, err := Move(in, gOld, gNew, source, target)
	if err != nil {
		t.Fatal(err)
	}
	if res.Unresolved == "" || res.Moved != 0 {
		t.Fatalf("two managers' renamed fields were attributed: %+v", res)
	}
	if !strings.Contains(res.Unresolved, "unknown") {
		t.Errorf("reason does not say it is unknown: %s", res.Unresolved)
	}
	if d := cmp.Diff(in, out); d != "" {
		t.Fatalf("entries changed although unresolved:\n%s", d)
	}
}

func TestMoveRenameOfAnUnownedFieldIsUnresolved(t *testing.T) {
	// spec.extra vanished too, but nobody owns it: the new fields may come from it.
	in := []metav1.ManagedFieldsEntry{entry("a", metav1.ManagedFieldsOperationApply, gOld, `{"f:spec":{"f:hostPort":{}}}`, time.Now())}
	source := obj(t, `{"spec":{"hostPort":"h:80","extra":"x"}}`)
	target := obj(t, `{"spec":{"host":"h","port":"80","extra2":"x"}}`)
	_, res, err := Move(in, gOld, gNew, source, target)
	if err != nil {
		t.Fatal(err)
	}
	if res.Unresolved == "" {
		t.Fatal("attributed new fields although an unowned field vanished too")
	}
}

func TestMoveMergesTheSameUpdater(t *testing.T) {
	early := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	late := early.Add(time.Hour)
	in := []metav1.ManagedFieldsEntry{
		entry("ctl", metav1.ManagedFieldsOperationUpdate, gNew, `{"f:spec":{"f:color":{}}}`, early),
		entry("ctl", metav1.ManagedFieldsOperationUpdate, gOld, `{"f:spec":{"f:size":{}}}`, late),
		entry("ctl", metav1.ManagedFieldsOperationUpdate, gOld, `{"f:spec":{"f:mode":{}}}`, late),
	}
	in[2].Subresource = "status"
	target := obj(t, `{"spec":{"color":"red","size":2,"mode":"x"}}`)
	out, res, err := Move(in, gOld, gNew, nil, target)
	if err != nil {
		t.Fatal(err)
	}
	if len(out) != 2 || res.Merged != 1 || res.Moved != 2 {
		t.Fatalf("got %d entries, result %+v", len(out), res)
	}
	if d := cmp.Diff(canonical(t, []byte(`{"f:spec":{"f:color":{},"f:size":{}}}`)), canonical(t, out[0].FieldsV1.Raw)); d != "" {
		t.Fatalf("merged set (-want +got):\n%s", d)
	}
	if !out[0].Time.Time.Equal(late) {
		t.Errorf("merged time %v, want the later %v", out[0].Time, late)
	}
	if out[1].Subresource != "status" || out[1].APIVersion != gNew {
		t.Errorf("status entry %+v", out[1])
	}
}

func TestExists(t *testing.T) {
	o := obj(t, `{"spec":{"ports":[{"name":"http","port":80}],"tags":["a","b"],"m":{"k":null}}}`)
	for _, tc := range []struct {
		path fieldpath.Path
		want bool
	}{
		{fieldpath.MakePathOrDie("spec", "ports", fieldpath.KeyByFields("name", "http"), "port"), true},
		{fieldpath.MakePathOrDie("spec", "ports", fieldpath.KeyByFields("name", "grpc")), false},
		{fieldpath.MakePathOrDie("spec", "tags", valueOf(t, `"b"`)), true},
		{fieldpath.MakePathOrDie("spec", "tags", valueOf(t, `"c"`)), false},
		{fieldpath.MakePathOrDie("spec", "tags", 1), true},
		{fieldpath.MakePathOrDie("spec", "tags", 2), false},
		{fieldpath.MakePathOrDie("spec", "m", "k"), true},
		{fieldpath.MakePathOrDie("spec", "size"), false},
	} {
		if got := Exists(o, tc.path); got != tc.want {
			t.Errorf("Exists(%s) = %v, want %v", tc.path, got, tc.want)
		}
	}
}

func valueOf(t *testing.T, js string) value.Value {
	t.Helper()
	v, err := value.FromJSON([]byte(js))
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func TestMoveDropsFieldsTheTargetDoesNotHave(t *testing.T) {
	in := []metav1.ManagedFieldsEntry{
		entry("a", metav1.ManagedFieldsOperationApply, gOld, `{"f:spec":{"f:gone":{},"f:size":{}}}`, time.Now()),
		entry("b", metav1.ManagedFieldsOperationUpdate, gOld, `{"f:spec":{"f:alsoGone":{}}}`, time.Now()),
	}
	source := obj(t, `{"spec":{"gone":"x","alsoGone":"y","size":1}}`)
	target := obj(t, `{"spec":{"size":1}}`)
	out, res, err := Move(in, gOld, gNew, source, target)
	if err != nil {
		t.Fatal(err)
	}
	if res.Unresolved != "" || res.Moved != 2 {
		t.Fatalf("result %+v", res)
	}
	if d := cmp.Diff(canonical(t, []byte(`{"f:spec":{"f:size":{}}}`)), canonical(t, out[0].FieldsV1.Raw)); d != "" {
		t.Fatalf("a's set (-want +got):\n%s", d)
	}
	if d := cmp.Diff(canonical(t, []byte(`{}`)), canonical(t, out[1].FieldsV1.Raw)); d != "" {
		t.Fatalf("b's set (-want +got):\n%s", d)
	}
}
