package ownership

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestVanished(t *testing.T) {
	entry := func(raw string) metav1.ManagedFieldsEntry {
		return metav1.ManagedFieldsEntry{Manager: "m", Operation: metav1.ManagedFieldsOperationUpdate, FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte(raw)}}
	}
	obj := map[string]any{"spec": map[string]any{"size": int64(1)}}
	for _, tc := range []struct {
		raw  string
		want bool
	}{
		{`{"f:spec":{"f:legacy":{}}}`, true},               // owned only a dropped field
		{`{"f:spec":{".":{},"f:legacy":{}}}`, true},        // ... and the map holding it
		{`{"f:spec":{"f:legacy":{},"f:size":{}}}`, false},  // also owns a field still there
		{`{"f:metadata":{"f:labels":{"f:app":{}}}}`, true}, // a label gone
		{`{}`, false}, // owns nothing: not this case
		{`{"f:spec":{"f:size":{}}}`, false},
	} {
		if got := Vanished(entry(tc.raw), obj); got != tc.want {
			t.Errorf("Vanished(%s) = %v, want %v", tc.raw, got, tc.want)
		}
	}
}
