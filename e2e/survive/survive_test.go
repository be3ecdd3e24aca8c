// Package survive checks that upgrade's state is trusted only for the cluster and CRD objects
// it was written for, and that every way a run can end is as safe as Ctrl-C: two real API
// servers reached through one local address, the built plugin killed with SIGKILL, a finished
// upgrade run again, two runs at once.
package survive

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/yaml"

	"github.com/crdver/kubectl-crdver/internal/testcrd"
	"github.com/crdver/kubectl-crdver/internal/testenv"
)

// envA and envB are two clusters; plugin is the built kubectl-crdver.
var (
	envA, envB *testenv.Env
	plugin     string
)

func TestMain(m *testing.M) {
	check, err := testenv.IsolateCache()
	if err != nil {
		fmt.Fprintln(os.Stderr, "testenv:", err)
		os.Exit(1)
	}
	code := func() int {
		var err error
		if envA, err = testenv.Start(testenv.Options{}); err != nil {
			fmt.Fprintln(os.Stderr, "testenv:", err)
			return 1
		}
		defer envA.Stop()
		if envB, err = testenv.Start(testenv.Options{}); err != nil {
			fmt.Fprintln(os.Stderr, "testenv:", err)
			return 1
		}
		defer envB.Stop()
		dir, err := os.MkdirTemp("", "crdver-survive-")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer os.RemoveAll(dir)
		if plugin, err = testenv.BuildPlugin(dir, testenv.BuildOptions{}); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		return m.Run()
	}()
	if err := check(); err != nil {
		fmt.Fprintln(os.Stderr, "testenv:", err)
		code = 1
	}
	os.Exit(code)
}

// The release of the issue: gadgets with v1alpha1 (storage, has spec.legacy) and v1 (served);
// the new release makes v1 the storage version, drops v1alpha1 and spec.legacy.
func gadgetSpec(legacy bool) map[string]apiextensionsv1.JSONSchemaProps {
	return gadgetSpecMax(legacy, 0)
}

// gadgetSpecMax: maxSize > 0 sets spec.size's maximum (stricter: an object above it is
// accepted on write, as ratcheting allows, and rejected on re-create).
func gadgetSpecMax(legacy bool, maxSize float64) map[string]apiextensionsv1.JSONSchemaProps {
	props := map[string]apiextensionsv1.JSONSchemaProps{"size": {Type: "integer"}}
	if maxSize > 0 {
		props["size"] = apiextensionsv1.JSONSchemaProps{Type: "integer", Maximum: &maxSize}
	}
	if legacy {
		props["legacy"] = apiextensionsv1.JSONSchemaProps{Type: "string"}
	}
	return props
}

// oldGadgets is the old release: v1alpha1 the storage version, with spec.legacy; v1 served.
func oldGadgets(group string) *apiextensionsv1.CustomResourceDefinition {
	return testcrd.New(group, "Gadget", testcrd.Versions("v1alpha1", "v1"), testcrd.Storage("v1alpha1"),
		testcrd.Spec(gadgetSpec(true), "v1alpha1"), testcrd.Spec(gadgetSpec(false), "v1"))
}

// cluster is one cluster with the old release and its objects.
type cluster struct {
	env     *testenv.Env
	group   string
	crds    apiextensionsclient.Interface
	dyn     dynamic.Interface
	objects []string // names, each with spec.legacy = "legacy-<name>"
}

// setup installs the old release on env and creates n objects named prefix-<i> at v1alpha1,
// each created by "kubectl-create" (Update) and labelled by "gitops" (Apply).
//
// Each test has a group of its own, and the servers go when the package's tests end: the CRD
// is left in place (deleting it and waiting took seconds per test: the server deletes every
// object first). A CRD of the group still there from an earlier run in this process
// (go test -count=N) is deleted first.
func setup(t *testing.T, env *testenv.Env, group, prefix string, n int) *cluster {
	t.Helper()
	ctx := context.Background()
	if err := env.DeleteCRD(ctx, "gadgets."+group); err != nil && !apierrors.IsNotFound(err) {
		t.Fatalf("deleting gadgets.%s of an earlier run: %v", group, err)
	}
	old := oldGadgets(group)
	if _, err := env.CreateCRD(ctx, old); err != nil {
		t.Fatal(err)
	}
	c := &cluster{env: env, group: group}
	var err error
	if c.crds, err = apiextensionsclient.NewForConfig(env.Config); err != nil {
		t.Fatal(err)
	}
	if c.dyn, err = dynamic.NewForConfig(env.Config); err != nil {
		t.Fatal(err)
	}
	gvr := schema.GroupVersionResource{Group: group, Version: "v1alpha1", Resource: "gadgets"}
	for i := range n {
		name := fmt.Sprintf("%s-%03d", prefix, i)
		u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": group + "/v1alpha1", "kind": "Gadget",
			"metadata": map[string]any{"name": name, "namespace": "default"},
			"spec":     map[string]any{"size": int64(i), "legacy": "legacy-" + name}}}
		if _, err := c.dyn.Resource(gvr).Namespace("default").Create(ctx, u, metav1.CreateOptions{FieldManager: "kubectl-create"}); err != nil {
			t.Fatal(err)
		}
		body := fmt.Sprintf(`{"apiVersion":"%s/v1alpha1","kind":"Gadget","metadata":{"name":"%s","namespace":"default","labels":{"team":"a"}}}`, group, name)
		if _, err := c.dyn.Resource(gvr).Namespace("default").Patch(ctx, name, types.ApplyPatchType, []byte(body), metav1.PatchOptions{FieldManager: "gitops"}); err != nil {
			t.Fatal(err)
		}
		c.objects = append(c.objects, name)
	}
	return c
}

// newRelease writes the new release (v1 only, storage, no spec.legacy) into a folder.
func newRelease(t *testing.T, group string) string {
	t.Helper()
	return newReleaseMax(t, group, 0)
}

func newReleaseMax(t *testing.T, group string, maxSize float64) string {
	t.Helper()
	next := testcrd.New(group, "Gadget", testcrd.Versions("v1"), testcrd.Storage("v1"), testcrd.Spec(gadgetSpecMax(false, maxSize)))
	return writeRelease(t, "new.yaml", next)
}

// writeRelease writes a release's CRD into a file named name in a folder of its own.
func writeRelease(t *testing.T, name string, crd *apiextensionsv1.CustomResourceDefinition) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, testcrd.YAML(t, crd), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// result is one run of the plugin.
type result = testenv.Result

// newRunner is a user of the built plugin with a cache folder of its own (the checkpoints
// live there).
func newRunner(t *testing.T) *testenv.User { return testenv.NewUser(t, plugin) }

// upgradeReport is the part of `upgrade -o json` these tests read.
type upgradeReport struct {
	Resumed           bool   `json:"resumed"`
	Retries           int64  `json:"retries"`
	CheckpointIgnored string `json:"checkpointIgnored"`
	AlreadyInPlace    string `json:"alreadyInPlace"`
	Backup            *struct {
		File   string `json:"file"`
		Reused bool   `json:"reused"`
		Digest string `json:"digest"`
	} `json:"backup"`
	Steps []struct {
		Action string `json:"action"`
		State  string `json:"state"`
	} `json:"steps"`
	Outcome struct {
		ExitCode int `json:"exitCode"`
	} `json:"outcome"`
}

func parseReport(t *testing.T, res result) upgradeReport {
	t.Helper()
	var rep upgradeReport
	if err := json.Unmarshal([]byte(res.Stdout), &rep); err != nil {
		t.Fatalf("upgrade -o json (exit %d): %v\nstdout:\n%s\nstderr:\n%s", res.Code, err, res.Stdout, res.Stderr)
	}
	return rep
}

// backedUp is the spec.legacy of every object in a backup file, by name.
func backedUp(t *testing.T, path string) map[string]string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, doc := range strings.Split(string(b), "\n---\n") {
		var o map[string]any
		if err := yaml.Unmarshal([]byte(doc), &o); err != nil || o == nil {
			continue
		}
		md, _ := o["metadata"].(map[string]any)
		spec, _ := o["spec"].(map[string]any)
		if md == nil || spec == nil {
			continue
		}
		if l, ok := spec["legacy"].(string); ok {
			out[md["name"].(string)] = l
		}
	}
	return out
}

// checkUpgraded: the CRD has v1 only and storedVersions [v1]; every object is stored at v1 in
// etcd, keeps spec.size and both managers, and a server-side apply by gitops works.
func (c *cluster) checkUpgraded(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	crd, err := c.crds.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, "gadgets."+c.group, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, v := range crd.Spec.Versions {
		names = append(names, v.Name)
	}
	if !slices.Equal(names, []string{"v1"}) || !slices.Equal(crd.Status.StoredVersions, []string{"v1"}) {
		t.Errorf("%s: versions %v storedVersions %v, want [v1] [v1]", crd.Name, names, crd.Status.StoredVersions)
	}
	gvr := schema.GroupVersionResource{Group: c.group, Version: "v1", Resource: "gadgets"}
	list, err := c.dyn.Resource(gvr).Namespace("default").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != len(c.objects) {
		t.Errorf("%d objects, want %d", len(list.Items), len(c.objects))
	}
	for i, u := range list.Items {
		stored, _, err := c.env.StoredObject(ctx, c.group, "gadgets", "default", u.GetName())
		if err != nil {
			t.Fatal(err)
		}
		if stored["apiVersion"] != c.group+"/v1" {
			t.Errorf("%s: stored at %v in etcd, want v1", u.GetName(), stored["apiVersion"])
		}
		if _, ok, _ := unstructured.NestedInt64(u.Object, "spec", "size"); !ok {
			t.Errorf("%s: lost spec.size", u.GetName())
		}
		var managers []string
		for _, e := range u.GetManagedFields() {
			managers = append(managers, e.Manager)
		}
		if !slices.Contains(managers, "kubectl-create") || !slices.Contains(managers, "gitops") {
			t.Errorf("%s: managers %v, want kubectl-create and gitops kept", u.GetName(), managers)
		}
		if i%50 == 0 {
			body := fmt.Sprintf(`{"apiVersion":"%s/v1","kind":"Gadget","metadata":{"name":"%s","namespace":"default","labels":{"team":"b"}}}`, c.group, u.GetName())
			if _, err := c.dyn.Resource(gvr).Namespace("default").Patch(ctx, u.GetName(), types.ApplyPatchType, []byte(body), metav1.PatchOptions{FieldManager: "gitops"}); err != nil {
				t.Errorf("%s: server-side apply by gitops: %v", u.GetName(), err)
			}
		}
	}
}

// checkBackup: the backup holds every object's consented field.
func (c *cluster) checkBackup(t *testing.T, path string) {
	t.Helper()
	got := backedUp(t, path)
	for _, n := range c.objects {
		if got[n] != "legacy-"+n {
			t.Errorf("backup %s: %s has spec.legacy %q, want %q", filepath.Base(path), n, got[n], "legacy-"+n)
		}
	}
	for n := range got {
		if !slices.Contains(c.objects, n) {
			t.Errorf("backup %s holds %s, an object of another cluster", filepath.Base(path), n)
		}
	}
}

// snapshot is the resourceVersion of the CRD and of every object (a write changes one).
func (c *cluster) snapshot(t *testing.T) map[string]string {
	t.Helper()
	ctx := context.Background()
	crd, err := c.crds.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, "gadgets."+c.group, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{"crd": crd.ResourceVersion}
	v := crd.Spec.Versions[0].Name
	list, err := c.dyn.Resource(schema.GroupVersionResource{Group: c.group, Version: v, Resource: "gadgets"}).Namespace("default").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range list.Items {
		out[u.GetName()] = u.GetResourceVersion()
	}
	return out
}
