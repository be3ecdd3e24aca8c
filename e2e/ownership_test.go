package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/yaml"

	crdinfo "github.com/crdver/kubectl-crdver/crd"
	"github.com/crdver/kubectl-crdver/internal/testenv"
	"github.com/crdver/kubectl-crdver/plugin"
	"github.com/crdver/kubectl-crdver/preflight"
	"github.com/crdver/kubectl-crdver/upgrade"
)

// typechangeCluster is testdata/typechange's pair on e: the live CRD (v1 only) with
// objects.yaml's objects, each created by editor (an Update) and labelled by gitops (a
// server-side apply, an Apply), both at v1. It returns the CRD's name and the new release's
// file.
type typechangeCluster struct {
	e       *testenv.Env
	name    string
	newFile string
	dyn     dynamic.Interface
	names   []string
	home    string
}

func newTypechangeCluster(t *testing.T, e *testenv.Env) *typechangeCluster {
	t.Helper()
	ctx := context.Background()
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(root, "testdata", "typechange")
	b, err := os.ReadFile(filepath.Join(dir, "live.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	live, err := crdinfo.Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.CreateCRD(ctx, live); err != nil {
		t.Fatal(err)
	}
	deleteAtEnd(t, e, live.Name)
	c := &typechangeCluster{e: e, name: live.Name, newFile: filepath.Join(dir, "new.yaml"), dyn: dynamic.NewForConfigOrDie(e.Config), home: t.TempDir()}
	t.Setenv("HOME", c.home)
	t.Setenv("XDG_CACHE_HOME", filepath.Join(c.home, ".cache"))
	ob, err := os.ReadFile(filepath.Join(dir, "objects.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, doc := range strings.Split(string(ob), "\n---\n") {
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal([]byte(doc), &u.Object); err != nil {
			t.Fatal(err)
		}
		if _, err := c.ri("v1").Create(ctx, u, metav1.CreateOptions{FieldManager: "editor"}); err != nil {
			t.Fatal(err)
		}
		body := `{"apiVersion":"typechange.example.com/v1","kind":"Broker","metadata":{"name":"` + u.GetName() + `","namespace":"default","labels":{"team":"data"}}}`
		if _, err := c.ri("v1").Patch(ctx, u.GetName(), types.ApplyPatchType, []byte(body), metav1.PatchOptions{FieldManager: "gitops"}); err != nil {
			t.Fatal(err)
		}
		c.names = append(c.names, u.GetName())
	}
	return c
}

// deleteAtEnd deletes the CRD (and so its objects) when the test ends, and waits until it is
// gone: the server is shared (olderServer), and the next test creates the same CRD.
func deleteAtEnd(t *testing.T, e *testenv.Env, name string) {
	t.Cleanup(func() {
		if err := e.DeleteCRD(context.Background(), name); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("deleting %s: %v", name, err)
		}
	})
}

func (c *typechangeCluster) ri(v string) dynamic.ResourceInterface {
	return c.dyn.Resource(schema.GroupVersionResource{Group: "typechange.example.com", Version: v, Resource: "brokers"}).Namespace("default")
}

// crdver runs the plugin's root command in-process against c's API server.
func (c *typechangeCluster) crdver(t *testing.T, args ...string) crdverResult {
	t.Helper()
	streams, _, out, errOut := genericiooptions.NewTestIOStreams()
	root := plugin.NewRootCmd(streams)
	root.SetArgs(append(args, "--kubeconfig", c.e.Kubeconfig))
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	err := root.ExecuteContext(ctx)
	if err != nil {
		errOut.WriteString(plugin.ErrorLine(err) + "\n")
	}
	return crdverResult{stdout: out.String(), stderr: errOut.String(), code: plugin.ExitCode(err)}
}

// state is each object's resourceVersion and managers, read at v.
func (c *typechangeCluster) state(t *testing.T, v string) (map[string]string, map[string][]string) {
	t.Helper()
	list, err := c.ri(v).List(context.Background(), metav1.ListOptions{})
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

// applyNew applies the new release's CRD (as kubectl apply would) and waits until v2 is served.
func (c *typechangeCluster) applyNew(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	b, err := os.ReadFile(c.newFile)
	if err != nil {
		t.Fatal(err)
	}
	next, err := crdinfo.Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	cs := apiextensionsclient.NewForConfigOrDie(c.e.Config)
	cur, err := cs.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, c.name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cur.Spec.Versions = next.Spec.Versions
	if _, err := cs.ApiextensionsV1().CustomResourceDefinitions().Update(ctx, cur, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	err = wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 20*time.Second, true, func(ctx context.Context) (bool, error) {
		_, err := c.ri("v2").List(ctx, metav1.ListOptions{Limit: 1})
		return !apierrors.IsNotFound(err), nil
	})
	if err != nil {
		t.Fatalf("v2 is not served: %v", err)
	}
}

// TestUpgradeOwnershipOnOlderServer: the typechange pair on kube-apiserver 1.34 (which drops
// every managedFields entry of an object it cannot type), the new release's CRD applied by hand
// (so that the preflight's server dry runs of the rewrite at v2 run), each object with an
// Update manager (editor) and an Apply manager (gitops):
//
//   - upgrade refuses before any write, listing per object the values of another type and the
//     managers the rewrite drops (text-config and opaque: both; plain: none);
//   - with --allow-ownership-loss it still refuses before any write: the type-mismatch finding
//     has no override (decision table), and the refusal no longer counts the consented
//     ownership loss among its reasons;
//   - with --fix-values it takes the backup and stops for a person at opaque (its text spells
//     no map), writing no object; after the person's change of the text at v1 the same command
//     converts both objects' values and ends applied and verified, every manager kept.
//
// Neither refused run writes: every object's resourceVersion and managers, the CRD, and no
// backup file.
func TestUpgradeOwnershipOnOlderServer(t *testing.T) {
	older := olderServer(t)
	c := newTypechangeCluster(t, older)
	c.applyNew(t)
	ctx := context.Background()
	cs := apiextensionsclient.NewForConfigOrDie(older.Config)
	crd, err := cs.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, c.name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	rvs, mgrs := c.state(t, "v2")
	dir := t.TempDir()
	wantLost := map[string][]string{}
	for _, n := range []string{"opaque", "text-config"} {
		wantLost[n] = mgrs[n]
	}
	for _, consent := range []bool{false, true} {
		args := []string{"upgrade", "-f", c.newFile, "--yes", "--allow-data-loss", "--backup", filepath.Join(dir, "backup.yaml"), "--checkpoint", filepath.Join(dir, "cp.json"), "-o", "json"}
		if consent {
			args = append(args, "--allow-ownership-loss")
		}
		r := c.crdver(t, args...)
		if r.code != 1 {
			t.Fatalf("upgrade (consent %v): exit %d, want 1\n%s\n%s", consent, r.code, r.stdout, r.stderr)
		}
		var rep upgrade.Report
		if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
			t.Fatalf("upgrade -o json: %v\n%s", err, r.stdout)
		}
		pf := rep.Preflight
		lost, mismatched := map[string][]string{}, []string{}
		for _, f := range pf.OwnershipLoss {
			lost[f.Name] = slices.Sorted(slices.Values(f.Managers))
		}
		for _, f := range pf.TypeMismatch {
			mismatched = append(mismatched, f.Name)
		}
		slices.Sort(mismatched)
		if fmt.Sprint(lost) != fmt.Sprint(wantLost) || !slices.Equal(mismatched, []string{"opaque", "text-config"}) {
			t.Errorf("consent %v: preflight lists managers lost %v (want %v) and type mismatches %v", consent, lost, wantLost, mismatched)
		}
		if !pf.Refused || !strings.Contains(pf.Reason, "values whose type does not fit") || strings.Contains(pf.Reason, "would lose field managers") != !consent {
			t.Errorf("consent %v: refused %v: %s", consent, pf.Refused, pf.Reason)
		}
		if after, am := c.state(t, "v2"); fmt.Sprint(after) != fmt.Sprint(rvs) || fmt.Sprint(am) != fmt.Sprint(mgrs) {
			t.Errorf("consent %v: the refused upgrade wrote: %v %v → %v %v", consent, rvs, mgrs, after, am)
		}
		if now, err := cs.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, c.name, metav1.GetOptions{}); err != nil || now.ResourceVersion != crd.ResourceVersion {
			t.Errorf("consent %v: the refused upgrade changed the CRD (%v)", consent, err)
		}
		if _, err := os.Stat(filepath.Join(dir, "backup.yaml")); err == nil {
			t.Errorf("consent %v: the refused upgrade wrote a backup", consent)
		}
	}

	// With --fix-values (the CRD applied first, as the old advice had it: v2 is the storage
	// version already): the run stops after the backup for opaque, whose text spells no map; a
	// person changes the text at v1 (which keeps its managers: the API server types it there);
	// the same command then converts both objects' values and ends applied and verified, every
	// manager kept (at v2), the person's kubectl-patch beside them.
	args := []string{"upgrade", "-f", c.newFile, "--yes", "--fix-values", "--allow-data-loss", "--backup", filepath.Join(dir, "backup-fix.yaml"), "--checkpoint", filepath.Join(dir, "cp-fix.json")}
	r := c.crdver(t, args...)
	if r.code != 1 || !strings.Contains(r.stderr, "opaque") || !strings.Contains(r.stderr, "then run the same command again") {
		t.Fatalf("upgrade --fix-values: exit %d, want 1 (stopped for a person, naming opaque)\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	if after, am := c.state(t, "v2"); fmt.Sprint(after) != fmt.Sprint(rvs) || fmt.Sprint(am) != fmt.Sprint(mgrs) {
		t.Errorf("the run stopped for a person wrote objects: %v %v → %v %v", rvs, mgrs, after, am)
	}
	u, err := c.ri("v1").Patch(ctx, "opaque", types.MergePatchType, []byte(`{"spec":{"config":"words: just\n"}}`), metav1.PatchOptions{FieldManager: "kubectl-patch"})
	if err != nil {
		t.Fatal(err)
	}
	if m, _ := preflight.LostManagers(u.GetManagedFields(), nil); len(m) != 3 {
		t.Errorf("opaque: managers %v after the person's change at v1, want editor, gitops and kubectl-patch", m)
	}
	if r = c.crdver(t, args...); r.code != 0 {
		t.Fatalf("upgrade --fix-values after the person's change: exit %d, want 0\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	_, after := c.state(t, "v2")
	for n, want := range map[string][]string{
		"text-config": {"editor (Update at typechange.example.com/v2)", "gitops (Apply at typechange.example.com/v2)"},
		"opaque":      {"editor (Update at typechange.example.com/v2)", "gitops (Apply at typechange.example.com/v2)", "kubectl-patch (Update at typechange.example.com/v2)"},
		"plain":       {"editor (Update at typechange.example.com/v2)", "gitops (Apply at typechange.example.com/v2)"},
	} {
		if !slices.Equal(after[n], want) {
			t.Errorf("%s: managers %v after the upgrade, want %v", n, after[n], want)
		}
	}
}

// TestUpgradeMovesEntriesOfARemovedVersion: the typechange pair's CRD with a served v1alpha1
// (never stored) that gitops applied one object at; the new release removes v1alpha1. On
// kube-apiserver 1.34 the upgrade needs no --allow-ownership-loss and loses no manager: its
// rewrite moves the v1alpha1 entry to v2 (a write the API server could not otherwise convert
// for that entry, which 1.34 would drop), and every entry ends at v2.
func TestUpgradeMovesEntriesOfARemovedVersion(t *testing.T) {
	older := olderServer(t)
	ctx := context.Background()
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(root, "testdata", "typechange")
	b, err := os.ReadFile(filepath.Join(dir, "live.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	live, err := crdinfo.Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	v0 := live.Spec.Versions[0].DeepCopy()
	v0.Name, v0.Storage = "v1alpha1", false
	live.Spec.Versions = append(live.Spec.Versions, *v0)
	if _, err := older.CreateCRD(ctx, live); err != nil {
		t.Fatal(err)
	}
	deleteAtEnd(t, older, live.Name)
	c := &typechangeCluster{e: older, name: live.Name, newFile: filepath.Join(dir, "new.yaml"), dyn: dynamic.NewForConfigOrDie(older.Config), home: t.TempDir()}
	t.Setenv("HOME", c.home)
	t.Setenv("XDG_CACHE_HOME", filepath.Join(c.home, ".cache"))
	for n, v := range map[string]string{"old-applied": "v1alpha1", "current": "v1"} {
		u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "typechange.example.com/v1", "kind": "Broker",
			"metadata": map[string]any{"name": n, "namespace": "default"}, "spec": map[string]any{"replicas": int64(1)}}}
		if _, err := c.ri("v1").Create(ctx, u, metav1.CreateOptions{FieldManager: "editor"}); err != nil {
			t.Fatal(err)
		}
		body := `{"apiVersion":"typechange.example.com/` + v + `","kind":"Broker","metadata":{"name":"` + n + `","namespace":"default","labels":{"team":"data"}}}`
		if _, err := c.ri(v).Patch(ctx, n, types.ApplyPatchType, []byte(body), metav1.PatchOptions{FieldManager: "gitops"}); err != nil {
			t.Fatal(err)
		}
	}
	tmp := t.TempDir()
	r := c.crdver(t, "upgrade", "-f", c.newFile, "--yes", "--backup", filepath.Join(tmp, "backup.yaml"), "--checkpoint", filepath.Join(tmp, "cp.json"))
	if r.code != 0 {
		t.Fatalf("upgrade: exit %d, want 0\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	_, mgrs := c.state(t, "v2")
	want := []string{"editor (Update at typechange.example.com/v2)", "gitops (Apply at typechange.example.com/v2)"}
	for _, n := range []string{"old-applied", "current"} {
		if !slices.Equal(mgrs[n], want) {
			t.Errorf("%s: managers %v after the upgrade, want %v", n, mgrs[n], want)
		}
	}
}
