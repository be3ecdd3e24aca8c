package upgrade

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/yaml"

	crdinfo "github.com/crdver/kubectl-crdver/crd"
	"github.com/crdver/kubectl-crdver/internal/testenv"
	"github.com/crdver/kubectl-crdver/migrate"
)

// typechangeLive sets up testdata/typechange in group: the objects written at v1 by editor
// (created) and gitops (applied), then the new CRD applied (v2, which types spec.config as an
// object, the storage version). It returns the clients and the objects at v2.
func typechangeLive(t *testing.T, group string) (*migrate.Clients, func(name string) dynamic.ResourceInterface) {
	t.Helper()
	ctx := context.Background()
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	read := func(name string) []byte {
		b, err := os.ReadFile(filepath.Join(root, "testdata", "typechange", name))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	live, err := crdinfo.Decode(read("live.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	next, err := crdinfo.Decode(read("new.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	live.Spec.Group, next.Spec.Group = group, group
	live.Name, next.Name = "brokers."+group, "brokers."+group
	env.CreateCRDForTest(t, live)
	c, err := migrate.NewClients(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	dyn := dynamic.NewForConfigOrDie(env.Config)
	ri := func(v string) dynamic.ResourceInterface {
		return dyn.Resource(schema.GroupVersionResource{Group: group, Version: v, Resource: "brokers"}).Namespace("default")
	}
	for _, doc := range strings.Split(string(read("objects.yaml")), "\n---\n") {
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal([]byte(doc), &u.Object); err != nil {
			t.Fatal(err)
		}
		u.SetAPIVersion(group + "/v1")
		if _, err := ri("v1").Create(ctx, u, metav1.CreateOptions{FieldManager: "editor"}); err != nil {
			t.Fatal(err)
		}
		body := `{"apiVersion":"` + group + `/v1","kind":"Broker","metadata":{"name":"` + u.GetName() + `","namespace":"default","labels":{"team":"data"}}}`
		if _, err := ri("v1").Patch(ctx, u.GetName(), types.ApplyPatchType, []byte(body), metav1.PatchOptions{FieldManager: "gitops"}); err != nil {
			t.Fatal(err)
		}
	}
	cur, err := c.CRDs.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, live.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cur.Spec.Versions = next.Spec.Versions
	if _, err := c.CRDs.ApiextensionsV1().CustomResourceDefinitions().Update(ctx, cur, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	crd, err := env.WaitEstablished(ctx, live.Name)
	if err != nil {
		t.Fatal(err)
	}
	if err := migrate.WaitStorageVersion(ctx, c, crd, 30e9); err != nil {
		t.Fatal(err)
	}
	return c, ri
}

// managersAt lists an object's managedFields entries as manager/operation@apiVersion.
func managersAt(u *unstructured.Unstructured) []string {
	var out []string
	for _, e := range u.GetManagedFields() {
		out = append(out, e.Manager+"/"+string(e.Operation)+"@"+e.APIVersion)
	}
	slices.Sort(out)
	return out
}

// TestFixValuesFinishesWhatAStoppedRunBegan: the typechange pair with v2 the storage version;
// FixValues stops right after text-config's first write (its values converted, its entries not
// moved yet), as a kill there does. The API server left the entries either as 1.37 does (the
// old ones, at v1) or as servers before 1.37 do (none; done here by a reset). The next run
// moves them from the journal before anything else (Report.Restored), and text-config ends
// with both managers at v2, their field sets on the converted values' paths, so that
// server-side apply by gitops at v2 works; opaque, whose value converts to nothing, is left,
// untouched, and the journal is gone once nothing is pending.
func TestFixValuesFinishesWhatAStoppedRunBegan(t *testing.T) {
	for _, reset := range []bool{false, true} {
		name := map[bool]string{false: "entries-kept", true: "entries-dropped"}[reset]
		t.Run(name, func(t *testing.T) {
			group := "fix-" + name + ".upgrade.example.com"
			c, ri := typechangeLive(t, group)
			ctx := context.Background()
			journal := FixValuesJournal(filepath.Join(t.TempDir(), "cp.json"))
			opts := FixValuesOptions{CRD: "brokers." + group, Version: "v2", Journal: journal}
			opaque, err := ri("v2").Get(ctx, "opaque", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}

			stopped := errors.New("stopped")
			stopAfterFirstWrite = func(w *unstructured.Unstructured) error {
				if reset {
					w.SetManagedFields([]metav1.ManagedFieldsEntry{{}})
					if _, err := ri("v2").Update(ctx, w, metav1.UpdateOptions{}); err != nil {
						t.Fatal(err)
					}
				}
				return stopped
			}
			t.Cleanup(func() { stopAfterFirstWrite = nil })
			if _, err := FixValues(ctx, c, opts); !errors.Is(err, stopped) {
				t.Fatalf("first run: %v, want it stopped after the first write", err)
			}
			stopAfterFirstWrite = nil
			u, err := ri("v2").Get(ctx, "text-config", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if cfg, _, _ := unstructured.NestedMap(u.Object, "spec", "config"); cfg["retention"] != "7d" {
				t.Fatalf("text-config after the first write: %v", u.Object["spec"])
			}
			want := map[bool][]string{false: {"editor/Update@" + group + "/v1", "gitops/Apply@" + group + "/v1"}, true: nil}[reset]
			if got := managersAt(u); !slices.Equal(got, want) {
				t.Errorf("text-config's managers after the first write %v, want %v", got, want)
			}
			if _, err := os.Stat(journal); err != nil {
				t.Fatalf("no journal after the stopped run: %v", err)
			}

			rep, err := FixValues(ctx, c, opts)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(rep.Restored, []string{"default/text-config"}) || len(rep.Fixed) != 0 || len(rep.Left) != 1 || rep.Left[0].Name != "opaque" {
				t.Errorf("second run: restored %v, fixed %+v, left %+v", rep.Restored, rep.Fixed, rep.Left)
			}
			u, err = ri("v2").Get(ctx, "text-config", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if got, want := managersAt(u), []string{"editor/Update@" + group + "/v2", "gitops/Apply@" + group + "/v2"}; !slices.Equal(got, want) {
				t.Errorf("text-config's managers after the second run %v, want %v", got, want)
			}
			for _, e := range u.GetManagedFields() {
				if e.Manager == "editor" && !strings.Contains(string(e.FieldsV1.Raw), `"f:config":{"f:partitions":{},"f:retention":{}}`) {
					t.Errorf("editor's fields %s: not the converted config's paths", e.FieldsV1.Raw)
				}
			}
			body := `{"apiVersion":"` + group + `/v2","kind":"Broker","metadata":{"name":"text-config","namespace":"default","labels":{"team":"data"}}}`
			if _, err := ri("v2").Patch(ctx, "text-config", types.ApplyPatchType, []byte(body), metav1.PatchOptions{FieldManager: "gitops"}); err != nil {
				t.Errorf("server-side apply by gitops at v2: %v", err)
			}
			if now, err := ri("v2").Get(ctx, "opaque", metav1.GetOptions{}); err != nil || now.GetResourceVersion() != opaque.GetResourceVersion() {
				t.Errorf("opaque was written (%v)", err)
			}
			if _, err := os.Stat(journal); !os.IsNotExist(err) {
				t.Errorf("the journal is still there: %v", err)
			}
		})
	}
}
