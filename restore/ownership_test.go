package restore

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/yaml"

	crdinfo "github.com/crdver/kubectl-crdver/crd"
	"github.com/crdver/kubectl-crdver/internal/testenv"
	"github.com/crdver/kubectl-crdver/migrate"
	"github.com/crdver/kubectl-crdver/preflight"
)

// ownershipFx is the typechange pair (testdata/typechange) after a release that serves v2
// only: text-config still holds v1's values (a string where v2 types an object, a string where
// it types a list, an integer where it types a string: ratcheting lets them through unchanged),
// plain holds none of them. Each object was created by editor (an Update) and has a label
// server-side applied by gitops (an Apply), both at v1. The backup holds each object with an
// annotation the live object lacks, so that the restore writes each (at v2, the only served
// version).
type ownershipFx struct {
	c      *migrate.Clients
	ri     dynamic.ResourceInterface
	backup string
}

func newOwnershipFx(t *testing.T, e *testenv.Env, group string) *ownershipFx {
	t.Helper()
	ctx := context.Background()
	read := func(name string) *apiextensionsv1.CustomResourceDefinition {
		b, err := os.ReadFile(filepath.Join("..", "testdata", "typechange", name))
		if err != nil {
			t.Fatal(err)
		}
		crd, err := crdinfo.Decode(b)
		if err != nil {
			t.Fatal(err)
		}
		crd.Spec.Group = group
		crd.Name = crd.Spec.Names.Plural + "." + group
		return crd
	}
	live, next := read("live.yaml"), read("new.yaml")
	if _, err := e.CreateCRD(ctx, live); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.DeleteCRD(context.Background(), live.Name) })
	dyn := dynamic.NewForConfigOrDie(e.Config)
	gvr := func(v string) schema.GroupVersionResource {
		return schema.GroupVersionResource{Group: group, Version: v, Resource: "brokers"}
	}
	specs := map[string]map[string]any{
		"text-config": {"config": "a: 1\n", "hosts": "h", "port": int64(1)},
		"plain":       {"replicas": int64(1)},
	}
	var docs []string
	for _, n := range slices.Sorted(maps.Keys(specs)) {
		u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": group + "/v1", "kind": "Broker",
			"metadata": map[string]any{"name": n, "namespace": runNS}, "spec": specs[n]}}
		if _, err := dyn.Resource(gvr("v1")).Namespace(runNS).Create(ctx, u, metav1.CreateOptions{FieldManager: "editor"}); err != nil {
			t.Fatal(err)
		}
		body := `{"apiVersion":"` + group + `/v1","kind":"Broker","metadata":{"name":"` + n + `","namespace":"` + runNS + `","labels":{"team":"data"}}}`
		if _, err := dyn.Resource(gvr("v1")).Namespace(runNS).Patch(ctx, n, types.ApplyPatchType, []byte(body), metav1.PatchOptions{FieldManager: "gitops"}); err != nil {
			t.Fatal(err)
		}
		u.SetAnnotations(map[string]string{"example.com/note": "from the backup"})
		u.SetLabels(map[string]string{"team": "data"})
		b, err := yaml.Marshal(u.Object)
		if err != nil {
			t.Fatal(err)
		}
		docs = append(docs, string(b))
	}
	cs := apiextensionsclient.NewForConfigOrDie(e.Config)
	cur, err := cs.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, live.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cur.Spec.Versions = next.Spec.Versions
	cur.Spec.Versions[0].Served = false // v1 (status.storedVersions keeps it in the spec)
	if _, err := cs.ApiextensionsV1().CustomResourceDefinitions().Update(ctx, cur, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	// Wait until the API server serves v2 and no longer v1.
	err = wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 20*time.Second, true, func(ctx context.Context) (bool, error) {
		_, err2 := dyn.Resource(gvr("v2")).List(ctx, metav1.ListOptions{Limit: 1})
		_, err1 := dyn.Resource(gvr("v1")).List(ctx, metav1.ListOptions{Limit: 1})
		return err2 == nil && apierrors.IsNotFound(err1), nil
	})
	if err != nil {
		t.Fatalf("v2 only is not served: %v", err)
	}
	f := &ownershipFx{ri: dyn.Resource(gvr("v2")).Namespace(runNS), backup: filepath.Join(t.TempDir(), "backup.yaml")}
	if f.c, err = migrate.NewClients(e.Config); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(f.backup, []byte(strings.Join(docs, "---\n")), 0o600); err != nil {
		t.Fatal(err)
	}
	return f
}

// state is each object's resourceVersion and managers ("manager (Operation at apiVersion)").
func (f *ownershipFx) state(t *testing.T) (map[string]string, map[string][]string) {
	t.Helper()
	list, err := f.ri.List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	rvs, mgrs := map[string]string{}, map[string][]string{}
	for _, u := range list.Items {
		rvs[u.GetName()] = u.GetResourceVersion()
		all, _ := preflight.LostManagers(u.GetManagedFields(), nil)
		mgrs[u.GetName()] = slices.Sorted(slices.Values(all))
	}
	return rvs, mgrs
}

func lostByObject(rep *Report) map[string][]string {
	out := map[string][]string{}
	for _, o := range rep.Objects {
		if len(o.LostManagers) > 0 {
			out[o.Name] = slices.Sorted(slices.Values(o.LostManagers))
		}
	}
	return out
}

// TestRestoreOwnershipOnOlderServer: on kube-apiserver 1.34, which drops every managedFields
// entry of an object it cannot type, the restore's write of text-config (at v2, where its
// values do not fit) would drop both its managers: the dry run lists them per object, Run
// refuses before its first write without AllowOwnershipLoss (nothing written), and with it
// exactly those managers are lost (plain keeps its own and gains the restore's; text-config
// gains none: the server resets its managedFields).
func TestRestoreOwnershipOnOlderServer(t *testing.T) {
	older := testenv.StartBuiltMinor(t, "1.34")
	f := newOwnershipFx(t, older, "own.restore.example.com")
	ownershipCase(t, f, map[string][]string{"text-config": {"editor (Update at own.restore.example.com/v1)", "gitops (Apply at own.restore.example.com/v1)"}})
}

// TestRestoreOwnershipAgreesWithServer: the same on the current kube-apiserver, which keeps
// the managedFields of a write it cannot type (kubernetes#136949, without recording the
// restore's): no manager is listed, and none is lost.
func TestRestoreOwnershipAgreesWithServer(t *testing.T) {
	f := newOwnershipFx(t, env, "cur.restore.example.com")
	ownershipCase(t, f, map[string][]string{})
}

func ownershipCase(t *testing.T, f *ownershipFx, want map[string][]string) {
	ctx := context.Background()
	rvs, mgrs := f.state(t)

	// The dry run lists the managers each write drops.
	rep, err := Run(ctx, f.c, Options{Files: []string{f.backup}, DryRun: true, AnyCluster: true})
	if err != nil {
		t.Fatal(err)
	}
	if got := lostByObject(rep); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("dry run: managers lost %v, want %v", got, want)
	}
	for _, o := range rep.Objects {
		if o.State != StateRestored || o.Version != "v2" {
			t.Errorf("dry run: %s %s at %s (%s)", o.Name, o.State, o.Version, o.Reason)
		}
	}

	// Without consent: refused before the first write.
	confirmed := false
	rep, err = Run(ctx, f.c, Options{Files: []string{f.backup}, AnyCluster: true, Confirm: func(*Report) (bool, error) { confirmed = true; return true, nil }})
	var oe *OwnershipLossError
	if len(want) > 0 {
		if !errors.As(err, &oe) || len(oe.Objects) != len(want) || !strings.Contains(err.Error(), "broker default/text-config") {
			t.Fatalf("Run without consent: %v, want an OwnershipLossError naming text-config", err)
		}
		if confirmed {
			t.Errorf("asked for confirmation after an ownership refusal")
		}
		if after, _ := f.state(t); fmt.Sprint(after) != fmt.Sprint(rvs) {
			t.Errorf("the refused restore wrote: %v → %v", rvs, after)
		}
		// With consent.
		rep, err = Run(ctx, f.c, Options{Files: []string{f.backup}, AnyCluster: true, AllowOwnershipLoss: true})
	}
	if err != nil {
		t.Fatal(err)
	}
	if got := lostByObject(rep); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("restore: managers reported lost %v, want %v", got, want)
	}
	_, after := f.state(t)
	for n, before := range mgrs {
		// What the server kept: the managers before, less those listed, plus the restore's.
		var lost []string
		for _, m := range before {
			if !slices.Contains(after[n], m) {
				lost = append(lost, m)
			}
		}
		if fmt.Sprint(lost) != fmt.Sprint(want[n]) {
			t.Errorf("%s: managers %v after the restore, %v before: lost %v, want %v", n, after[n], before, lost, want[n])
		}
		if n == "plain" && !slices.ContainsFunc(after[n], func(m string) bool { return strings.HasPrefix(m, FieldManager+" (Update") }) {
			t.Errorf("%s: no entry of the restore's manager: %v", n, after[n])
		}
	}
	for _, o := range rep.Objects {
		u, err := f.ri.Get(ctx, o.Name, metav1.GetOptions{})
		if err != nil || u.GetAnnotations()["example.com/note"] != "from the backup" {
			t.Errorf("%s: not restored (%v): %v", o.Name, err, u.GetAnnotations())
		}
	}
}

// TestOwnedOnly: an entry owning only fields a forced restore overwrites is not a lost manager
// (its loss is the overwrite the user asked for); one owning anything else is.
func TestOwnedOnly(t *testing.T) {
	e := func(fields string) metav1.ManagedFieldsEntry {
		return metav1.ManagedFieldsEntry{Manager: "m", Operation: metav1.ManagedFieldsOperationUpdate, FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte(fields)}}
	}
	for _, c := range []struct {
		fields string
		paths  []string
		want   bool
	}{
		{`{"f:spec":{"f:color":{}}}`, []string{"spec.color"}, true},
		{`{"f:spec":{"f:items":{}}}`, []string{"spec.items"}, true},
		{`{"f:spec":{"f:color":{},"f:size":{}}}`, []string{"spec.color"}, false},
		{`{"f:spec":{"f:colors":{}}}`, []string{"spec.color"}, false},
		{`{"f:spec":{"f:color":{}}}`, nil, false},
		{`{}`, []string{"spec.color"}, false},
		{`{"f:metadata":{"f:labels":{".":{},"f:a":{}}}}`, []string{"metadata.labels.a"}, false},
	} {
		if got := ownedOnly(e(c.fields), c.paths); got != c.want {
			t.Errorf("ownedOnly(%s, %v) = %v, want %v", c.fields, c.paths, got, c.want)
		}
	}
}
