package restore

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/crdver/kubectl-crdver/convert"
)

// What a restore compares: every top-level field but status, descended through maps, lists
// whole, each label and annotation; never server-set metadata.
func TestLeavesOfCleanedBackup(t *testing.T) {
	b := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "example.com/v1beta1", "kind": "Widget",
		"metadata": map[string]any{
			"name": "w", "namespace": "ns", "uid": "u-1", "resourceVersion": "42", "generation": int64(3),
			"labels": map[string]any{"app.kubernetes.io/name": "demo"}, "annotations": map[string]any{"note": "x"},
			"managedFields": []any{map[string]any{"manager": "gitops"}}, "finalizers": []any{"f"},
		},
		"spec":   map[string]any{"size": int64(3), "legacy": "keep", "ports": []any{int64(80)}, "nested": map[string]any{"a": map[string]any{"b": true}}, "empty": map[string]any{}, "none": nil},
		"data":   "top-level",
		"status": map[string]any{"ready": true},
	}}
	var got []string
	for _, l := range leaves(cleaned(b).Object) {
		got = append(got, l.String())
	}
	want := []string{"data", "metadata.labels.app.kubernetes.io/name", "metadata.annotations.note", "spec.empty", "spec.legacy", "spec.nested.a.b", "spec.ports", "spec.size"}
	if !slices.Equal(got, want) {
		t.Errorf("leaves:\n got %v\nwant %v", got, want)
	}
}

func TestLookupAndSame(t *testing.T) {
	obj := map[string]any{"spec": map[string]any{"size": int64(1), "name": "x"}}
	if v, found, blocked := lookup(obj, []string{"spec", "size"}); !found || blocked || !same(v, float64(1)) {
		t.Errorf("spec.size: %v %v %v", v, found, blocked)
	}
	if _, found, blocked := lookup(obj, []string{"spec", "name", "inner"}); found || !blocked {
		t.Errorf("spec.name.inner: found %v blocked %v, want blocked (a string on the way)", found, blocked)
	}
	if _, found, blocked := lookup(obj, []string{"spec", "legacy"}); found || blocked {
		t.Errorf("spec.legacy: found %v blocked %v, want absent", found, blocked)
	}
	if same([]any{"a", "b"}, []any{"b", "a"}) {
		t.Errorf("lists in another order are not the same value")
	}
	p := map[string]any{}
	set(p, []string{"spec", "legacy"}, "keep")
	set(p, []string{"metadata", "labels", "a.b"}, "c")
	if !same(p, map[string]any{"spec": map[string]any{"legacy": "keep"}, "metadata": map[string]any{"labels": map[string]any{"a.b": "c"}}}) {
		t.Errorf("set: %v", p)
	}
}

// A list whose items lost a field is the backup's list pruned: restored whole, the lost
// fields reported; any other difference is a change since the backup.
func TestPrunedFrom(t *testing.T) {
	backup := []any{map[string]any{"resource": "topic", "operation": "Read"}, map[string]any{"resource": "group", "operation": "Write"}}
	for _, tc := range []struct {
		name    string
		live    any
		ok      bool
		missing []string
	}{
		{"items lost a field", []any{map[string]any{"resource": "topic"}, map[string]any{"resource": "group"}}, true, []string{"spec.acls[0].operation", "spec.acls[1].operation"}},
		{"same", backup, true, nil},
		{"a value changed", []any{map[string]any{"resource": "topic", "operation": "Write"}, map[string]any{"resource": "group"}}, false, nil},
		{"an item more", append(slices.Clone(backup), map[string]any{"resource": "x"}), false, nil},
		{"a field added", []any{map[string]any{"resource": "topic", "operations": []any{"Read"}}, map[string]any{"resource": "group"}}, false, nil},
		{"not a list", "x", false, nil},
	} {
		var missing []string
		ok := prunedFrom(backup, tc.live, "spec.acls", &missing)
		if ok != tc.ok || (ok && !slices.Equal(missing, tc.missing)) {
			t.Errorf("%s: %v %v, want %v %v", tc.name, ok, missing, tc.ok, tc.missing)
		}
	}
}

// A field no served version holds whose backup value is the default of the backup version's
// schema (in the live CRD) is a default, not data; another value, or a version the live CRD
// no longer lists, stays not held.
func TestSplitDefaults(t *testing.T) {
	crd := &apiextensionsv1.CustomResourceDefinition{Spec: apiextensionsv1.CustomResourceDefinitionSpec{Versions: []apiextensionsv1.CustomResourceDefinitionVersion{
		{Name: "v1beta1", Served: false, Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
			Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{"spec": {Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{
				"gitImplementation": {Type: "string", Default: &apiextensionsv1.JSON{Raw: []byte(`"go-git"`)}},
				"timeout":           {Type: "string", Default: &apiextensionsv1.JSON{Raw: []byte(`"60s"`)}},
				"legacy":            {Type: "string"},
			}}},
		}}},
	}}}
	backup := map[string]any{"spec": map[string]any{"gitImplementation": "go-git", "timeout": "20s", "legacy": "x"}}
	notHeld := []string{"spec.gitImplementation", "spec.legacy", "spec.timeout"}
	held, defaults := splitDefaults(crd, "v1beta1", backup, notHeld)
	if !slices.Equal(held, []string{"spec.legacy", "spec.timeout"}) || !slices.Equal(defaults, []string{"spec.gitImplementation"}) {
		t.Errorf("v1beta1: held %v defaults %v", held, defaults)
	}
	held, defaults = splitDefaults(crd, "v1alpha1", backup, notHeld)
	if !slices.Equal(held, notHeld) || len(defaults) != 0 {
		t.Errorf("a version the CRD does not list: held %v defaults %v, want all held", held, defaults)
	}
}

func TestReadsBack(t *testing.T) {
	backup := map[string]any{"spec": map[string]any{"gitImplementation": "go-git", "n": int64(1)}}
	read := map[string]any{"spec": map[string]any{"gitImplementation": "go-git", "n": float64(2)}}
	if !readsBack(read, backup, "spec.gitImplementation") {
		t.Errorf("spec.gitImplementation is read back at the backup's value")
	}
	if readsBack(read, backup, "spec.n") || readsBack(read, backup, "spec.absent") || readsBack(read, backup, "spec.list[0].x") {
		t.Errorf("another value, an absent field or a list item is not read back")
	}
}

// A path preview names pruned counts as lost only when the backup has it: a field the target
// version's own defaulting added (and the storage version pruned) is not the backup's data.
func TestInObject(t *testing.T) {
	obj := map[string]any{"spec": map[string]any{"url": "u", "acls": []any{map[string]any{"op": "Read"}, "x"}}}
	for p, want := range map[string]bool{
		"spec.url": true, "spec.gitImplementation": false, "spec.acls[0].op": true, "spec.acls[0].other": false,
		"spec.acls[2].op": false, "spec.acls[1]": true, "spec.url.x": false, "status.x": false,
	} {
		if got := inObject(obj, p); got != want {
			t.Errorf("inObject(%s) = %v, want %v", p, got, want)
		}
	}
}

// fakeWebhook answers ConversionReviews like a webhook that relabels apiVersion and drops
// spec.organization (or answers as told).
type fakeWebhook struct {
	status string
	uid    string
}

func (f *fakeWebhook) Describe() string { return "fake webhook" }

func (f *fakeWebhook) Post(_ context.Context, body []byte) (*convert.HTTPResponse, error) {
	var req apiextensionsv1.ConversionReview
	if err := json.Unmarshal(body, &req); err != nil {
		return nil, err
	}
	var objs []apiextensionsv1.JSON
	for _, o := range req.Request.Objects {
		var m map[string]any
		_ = json.Unmarshal(o.Raw, &m)
		m["apiVersion"] = req.Request.DesiredAPIVersion
		delete(m["spec"].(map[string]any), "organization")
		raw, _ := json.Marshal(m)
		objs = append(objs, apiextensionsv1.JSON{Raw: raw})
	}
	uid := req.Request.UID
	if f.uid != "" {
		uid = types.UID(f.uid)
	}
	st := metav1.StatusSuccess
	if f.status != "" {
		st = f.status
	}
	out, _ := json.Marshal(map[string]any{"apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview",
		"response": map[string]any{"uid": uid, "convertedObjects": objs, "result": map[string]any{"status": st, "message": "no"}}})
	return &convert.HTTPResponse{StatusCode: 200, Body: out}, nil
}

func TestReviewThroughWebhook(t *testing.T) {
	obj := map[string]any{"apiVersion": "cert-manager.io/v1alpha2", "kind": "Certificate", "metadata": map[string]any{"name": "c"},
		"spec": map[string]any{"secretName": "s", "organization": []any{"o"}}}
	got, err := review(context.Background(), &fakeWebhook{}, "v1", obj, "cert-manager.io/v1")
	if err != nil || got["apiVersion"] != "cert-manager.io/v1" || !same(got["spec"], map[string]any{"secretName": "s"}) {
		t.Fatalf("review: %v %v", got, err)
	}
	if _, err := review(context.Background(), &fakeWebhook{status: metav1.StatusFailure}, "v1", obj, "cert-manager.io/v1"); err == nil || !strings.Contains(err.Error(), "refused") {
		t.Errorf("a failed conversion: %v", err)
	}
	if _, err := review(context.Background(), &fakeWebhook{uid: "other"}, "v1", obj, "cert-manager.io/v1"); err == nil {
		t.Errorf("an answer for another uid is not taken")
	}
}
