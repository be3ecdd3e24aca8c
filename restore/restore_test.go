package restore

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/crdver/kubectl-crdver/convert"
	crdinfo "github.com/crdver/kubectl-crdver/crd"
	"github.com/crdver/kubectl-crdver/internal/testcrd"
	"github.com/crdver/kubectl-crdver/internal/testwebhook"
	"github.com/crdver/kubectl-crdver/migrate"
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
	crd := testcrd.New("x.test", "Thing", testcrd.Versions("v1beta1"), testcrd.Unserved("v1beta1"), testcrd.Spec(map[string]apiextensionsv1.JSONSchemaProps{
		"gitImplementation": {Type: "string", Default: &apiextensionsv1.JSON{Raw: []byte(`"go-git"`)}},
		"timeout":           {Type: "string", Default: &apiextensionsv1.JSON{Raw: []byte(`"60s"`)}},
		"legacy":            {Type: "string"},
	}))
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

// lostLeaves maps convert's lost paths onto what a restore restores: a lost map takes every
// leaf under it, a loss inside a list names its path in the leaves' notation, a null or a
// field the backup does not have is nothing.
func TestLostLeaves(t *testing.T) {
	obj := map[string]any{"apiVersion": "example.com/v1", "kind": "Widget",
		"metadata": map[string]any{"name": "w", "labels": map[string]any{"app.kubernetes.io/name": "demo"}},
		"spec":     map[string]any{"url": "u", "nested": map[string]any{"a": "x", "b": "y"}, "acls": []any{map[string]any{"op": "Read", "k.v": "z"}}, "none": nil}}
	got := lostLeaves(obj, []string{".spec.nested", `.spec.acls[0]["k.v"]`, ".spec.none", ".spec.gitImplementation", ".apiVersion", `.metadata.labels["app.kubernetes.io/name"]`})
	slices.Sort(got)
	want := []string{"metadata.labels.app.kubernetes.io/name", "spec.acls[0].k.v", "spec.nested.a", "spec.nested.b"}
	if !slices.Equal(got, want) {
		t.Errorf("lostLeaves = %q, want %q", got, want)
	}
}

// The backup's version is no longer served (and then no longer listed at all): the object goes
// to the storage version through the CRD's own webhook, a real HTTPS server, with convert's
// client and loss rule. A good webhook converts it and loses nothing; a lossy one loses what
// the round trip does not give back; an answer the API server refuses (a review of another
// kind, another uid, a failed result) is refused here too, naming convert's check.
func TestViaWebhook(t *testing.T) {
	srv := testwebhook.StartForTest(t, testwebhook.Options{})
	b, err := os.ReadFile(filepath.Join("..", "testdata", "crds", "crontab-webhook.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	served, err := crdinfo.Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	served.Spec.Conversion = srv.WebhookConversion()
	for i := range served.Spec.Versions {
		if served.Spec.Versions[i].Name == "v1beta1" {
			served.Spec.Versions[i].Served = false
		}
	}
	unlisted := served.DeepCopy()
	unlisted.Spec.Versions = slices.DeleteFunc(unlisted.Spec.Versions, func(v apiextensionsv1.CustomResourceDefinitionVersion) bool { return v.Name == "v1beta1" })
	backup := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "stable.example.com/v1beta1", "kind": "CronTab",
		"metadata": map[string]any{"name": "nightly", "namespace": "default", "labels": map[string]any{"app": "backup"}},
		"spec":     map[string]any{"cronSpec": "0 3 * * *", "image": "backup:1.2", "hostPort": "db.example.com:5432"}}}
	r := &runner{c: &migrate.Clients{}}
	for _, tc := range []struct {
		name      string
		crd       *apiextensionsv1.CustomResourceDefinition
		behaviour testwebhook.Behaviour
		notHeld   []string
		refused   string // the check named in the error
	}{
		{"good", served, testwebhook.Good, []string{}, ""},
		{"good, the version unlisted", unlisted, testwebhook.Good, []string{}, ""},
		{"lossy", served, testwebhook.Lossy, []string{"spec.hostPort"}, ""},
		{"another review kind", served, testwebhook.WrongReviewKind, nil, convert.CheckReviewKind},
		{"another uid", served, testwebhook.WrongUID, nil, convert.CheckResponseUID},
		{"another kind of object", served, testwebhook.WrongKind, nil, convert.CheckKindUnchanged},
		{"failed", served, testwebhook.Failed, nil, convert.CheckResultStatus},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv.Set(tc.behaviour)
			defer srv.Set(testwebhook.Good)
			conv, notHeld, err := r.viaWebhook(context.Background(), tc.crd, cleaned(backup), "v1beta1", "v1")
			if tc.refused != "" {
				if err == nil || !strings.Contains(err.Error(), tc.refused) {
					t.Fatalf("err = %v, want a refusal naming %s", err, tc.refused)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(notHeld, tc.notHeld) {
				t.Errorf("not held %q, want %q", notHeld, tc.notHeld)
			}
			spec, _, _ := unstructured.NestedMap(conv.Object, "spec")
			if conv.GetAPIVersion() != "stable.example.com/v1" || spec["host"] != "db.example.com" || spec["port"] != "5432" || conv.GetLabels()["app"] != "backup" {
				t.Errorf("converted: %v", conv.Object)
			}
		})
	}
}
