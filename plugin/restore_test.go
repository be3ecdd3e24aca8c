package plugin

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/yaml"

	"github.com/crdver/kubectl-crdver/internal/testcrd"
	"github.com/crdver/kubectl-crdver/internal/testwebhook"
	"github.com/crdver/kubectl-crdver/migrate"
	"github.com/crdver/kubectl-crdver/restore"
)

// The small case (issue 20 C): a CRD at v1beta1 whose objects hold spec.legacy; the
// new release has v1 only, without legacy. Upgraded with --allow-data-loss, taken back with
// upgrade -f OLD, then restored from the first upgrade's backup.

type restoreCase struct {
	group          string
	ns             string
	oldDir, newDir string
	crds           apiextensionsclient.Interface
	dyn            dynamic.Interface
	names          []string
}

func writeRelease(t *testing.T, crds ...*apiextensionsv1.CustomResourceDefinition) string {
	t.Helper()
	dir := t.TempDir()
	for _, c := range crds {
		b, err := yaml.Marshal(c)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, c.Spec.Names.Plural+".yaml"), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func setupRestoreCase(t *testing.T, group string) *restoreCase {
	t.Helper()
	ctx := context.Background()
	rc := &restoreCase{group: group, ns: "default"}
	old := testcrd.New(group, "Widget", testcrd.Version("v1beta1", true, true, upgradeSchema(true, 0, "")))
	next := testcrd.New(group, "Widget", testcrd.Version("v1", true, true, upgradeSchema(false, 0, "")))
	rc.oldDir, rc.newDir = writeRelease(t, old), writeRelease(t, next)
	if _, err := env.CreateCRD(ctx, old.DeepCopy()); err != nil {
		t.Fatal(err)
	}
	var err error
	if rc.crds, err = apiextensionsclient.NewForConfig(env.Config); err != nil {
		t.Fatal(err)
	}
	if rc.dyn, err = dynamic.NewForConfig(env.Config); err != nil {
		t.Fatal(err)
	}
	gvr := rc.gvr("v1beta1")
	for i := 1; i <= 6; i++ {
		name := fmt.Sprintf("w-%d", i)
		rc.names = append(rc.names, name)
		spec := map[string]any{"size": int64(i), "color": "red", "legacy": fmt.Sprintf("keep-%d", i)}
		obj := map[string]any{"apiVersion": group + "/v1beta1", "kind": "Widget",
			"metadata": map[string]any{"name": name, "namespace": rc.ns, "labels": map[string]any{"app": "demo", "n": fmt.Sprint(i)}},
			"spec":     spec}
		if i%2 == 1 {
			// kubectl apply (client side): the last-applied annotation, manager kubectl-client-side-apply.
			last, _ := json.Marshal(obj)
			obj["metadata"].(map[string]any)["annotations"] = map[string]any{"kubectl.kubernetes.io/last-applied-configuration": string(last) + "\n"}
			if _, err := rc.dyn.Resource(gvr).Namespace(rc.ns).Create(ctx, &unstructured.Unstructured{Object: obj}, metav1.CreateOptions{FieldManager: "kubectl-client-side-apply"}); err != nil {
				t.Fatal(err)
			}
			// ... and a second manager, a GitOps applier, owning one annotation.
			body := fmt.Sprintf(`{"apiVersion":"%s/v1beta1","kind":"Widget","metadata":{"name":"%s","namespace":"%s","annotations":{"owner":"team-a"}}}`, group, name, rc.ns)
			if _, err := rc.dyn.Resource(gvr).Namespace(rc.ns).Patch(ctx, name, types.ApplyPatchType, []byte(body), metav1.PatchOptions{FieldManager: "gitops"}); err != nil {
				t.Fatal(err)
			}
		} else {
			b, _ := json.Marshal(obj)
			if _, err := rc.dyn.Resource(gvr).Namespace(rc.ns).Patch(ctx, name, types.ApplyPatchType, b, metav1.PatchOptions{FieldManager: "gitops"}); err != nil {
				t.Fatal(err)
			}
		}
	}
	return rc
}

func (rc *restoreCase) gvr(v string) schema.GroupVersionResource {
	return schema.GroupVersionResource{Group: rc.group, Version: v, Resource: "widgets"}
}

// objects are the objects' spec, labels and annotations (JSON), resourceVersion and managers,
// read at version v.
type restoreSnap struct {
	data     map[string]string
	rv       map[string]string
	managers map[string][]string
}

func (rc *restoreCase) snap(t *testing.T, v string) restoreSnap {
	t.Helper()
	s := restoreSnap{data: map[string]string{}, rv: map[string]string{}, managers: map[string][]string{}}
	list, err := rc.dyn.Resource(rc.gvr(v)).Namespace(rc.ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range list.Items {
		b, _ := json.Marshal(map[string]any{"spec": u.Object["spec"], "labels": u.GetLabels(), "annotations": u.GetAnnotations()})
		s.data[u.GetName()] = string(b)
		s.rv[u.GetName()] = u.GetResourceVersion()
		var ms []string
		for _, e := range u.GetManagedFields() {
			ms = append(ms, e.Manager)
		}
		sort.Strings(ms)
		s.managers[u.GetName()] = ms
	}
	return s
}

func decodeRestore(t *testing.T, out string) *restore.Report {
	t.Helper()
	var r restore.Report
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("restore -o json: %v\n%s", err, out)
	}
	return &r
}

func outcomeOf(r *restore.Report, name string) restore.Outcome {
	for _, o := range r.Objects {
		if o.Name == name {
			return o
		}
	}
	return restore.Outcome{}
}

// TestRestoreAfterUpgradeAndBack: the whole way back, on the real API server.
func TestRestoreAfterUpgradeAndBack(t *testing.T) {
	isolateCache(t)
	ctx := context.Background()
	rc := setupRestoreCase(t, "back.restore.example.com")
	before := rc.snap(t, "v1beta1")
	if len(before.data) != 6 {
		t.Fatalf("setup: %d objects", len(before.data))
	}
	backup := filepath.Join(t.TempDir(), "backup.yaml")

	// 1. Upgrade to the new release, accepting the loss of spec.legacy.
	res := runCluster(t, "upgrade", "-f", rc.newDir, "--yes", "--allow-data-loss", "--backup", backup)
	if res.code != 0 {
		t.Fatalf("upgrade --allow-data-loss: exit %d\n%s\n%s", res.code, res.stdout, res.stderr)
	}
	for name, d := range rc.snap(t, "v1").data {
		if strings.Contains(d, `"legacy":`) {
			t.Fatalf("%s still holds spec.legacy after the upgrade: %s", name, d)
		}
	}

	// 2. Restore onto the new release: no served version holds spec.legacy → reported, exit 1,
	// nothing written.
	onNew := rc.snap(t, "v1")
	res = runCluster(t, "restore", "-f", backup, "--yes", "-o", "json")
	if res.code != 1 {
		t.Fatalf("restore onto the new release: exit %d, want 1\n%s\n%s", res.code, res.stdout, res.stderr)
	}
	rep := decodeRestore(t, res.stdout)
	t.Logf("restore -o json onto the new release:\n%s", res.stdout)
	for _, name := range rc.names {
		o := outcomeOf(rep, name)
		if o.State != restore.StateNotHeld || !slices.Equal(o.NotHeld, []string{"spec.legacy"}) || o.Version != "v1" {
			t.Errorf("%s on the new release: %+v, want %q with notHeld [spec.legacy] at v1", name, o, restore.StateNotHeld)
		}
	}
	mustContain(t, "restore onto the new release", res.stderr, "no served version holds", "kubectl crdver upgrade -f OLD-RELEASE")
	if after := rc.snap(t, "v1"); !mapsEqual(onNew.rv, after.rv) {
		t.Errorf("restore onto the new release wrote: %v → %v", onNew.rv, after.rv)
	}
	res = runCluster(t, "restore", "-f", backup, "--dry-run", "--progress-interval", "1ms")
	t.Logf("restore --dry-run onto the new release: exit %d\n%s%s", res.code, res.stdout, res.stderr)
	mustContain(t, "human restore onto the new release", res.stdout, "Fields no served version holds", "widget default/w-1: spec.legacy")
	// The progress line's total is the number of documents the backup's closing line names.
	b, err := os.ReadFile(backup)
	if err != nil {
		t.Fatal(err)
	}
	trailer := regexp.MustCompile(`(?m)^# end of backup: (\d+) objects$`).FindStringSubmatch(string(b))
	if trailer == nil || trailer[1] != strconv.Itoa(strings.Count(string(b), "\nkind: ")) {
		t.Fatalf("backup's closing line %v, want the count of its %d documents", trailer, strings.Count(string(b), "\nkind: "))
	}
	if !regexp.MustCompile(`(?m)^restore: [1-9]\d*/` + trailer[1] + ` objects compared`).MatchString(res.stderr) {
		t.Errorf("no progress line with the backup's %s documents as its total:\n%s", trailer[1], res.stderr)
	}

	// 3. Back to the old release.
	res = runCluster(t, "upgrade", "-f", rc.oldDir, "--yes", "--backup", filepath.Join(t.TempDir(), "backup-2.yaml"))
	if res.code != 0 {
		t.Fatalf("upgrade -f OLD: exit %d\n%s\n%s", res.code, res.stdout, res.stderr)
	}
	crd, err := rc.crds.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, "widgets."+rc.group, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if vs := []string{crd.Spec.Versions[0].Name}; len(crd.Spec.Versions) != 1 || vs[0] != "v1beta1" || !slices.Equal(crd.Status.StoredVersions, []string{"v1beta1"}) {
		t.Fatalf("after upgrade -f OLD: versions %v storedVersions %v, want [v1beta1] [v1beta1]", crd.Spec.Versions, crd.Status.StoredVersions)
	}
	for _, name := range rc.names {
		stored, _, err := env.StoredObject(ctx, rc.group, "widgets", rc.ns, name)
		if err != nil {
			t.Fatal(err)
		}
		if stored["apiVersion"] != rc.group+"/v1beta1" {
			t.Errorf("%s: stored at %v after going back, want v1beta1", name, stored["apiVersion"])
		}
	}

	// After the backup: w-3's color changed by someone; w-6 deleted.
	gvr := rc.gvr("v1beta1")
	if _, err := rc.dyn.Resource(gvr).Namespace(rc.ns).Patch(ctx, "w-3", types.MergePatchType, []byte(`{"spec":{"color":"purple"}}`), metav1.PatchOptions{FieldManager: "someone"}); err != nil {
		t.Fatal(err)
	}
	if err := rc.dyn.Resource(gvr).Namespace(rc.ns).Delete(ctx, "w-6", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}

	// 4. Dry run: the outcomes, nothing written.
	back := rc.snap(t, "v1beta1")
	res = runCluster(t, "restore", "-f", backup, "--dry-run")
	if res.code != 1 {
		t.Fatalf("restore --dry-run (a conflict, a deleted object): exit %d, want 1\n%s\n%s", res.code, res.stdout, res.stderr)
	}
	t.Logf("restore --dry-run after going back: exit %d\n%s%s", res.code, res.stdout, res.stderr)
	mustContain(t, "restore --dry-run", res.stdout, "would restore", "spec.legacy", "conflict", "spec.color", "missing", "Dry run: nothing was written.")
	mustContain(t, "restore --dry-run", res.stderr, "--force", "--recreate")
	if after := rc.snap(t, "v1beta1"); !mapsEqual(back.rv, after.rv) {
		t.Errorf("restore --dry-run wrote: %v → %v", back.rv, after.rv)
	}

	// 5. Restore: every object but the changed one and the deleted one equals the object before
	// the upgrade; managers kept; the changed one left alone.
	res = runCluster(t, "restore", "-f", backup, "--yes", "-o", "json")
	if res.code != 1 {
		t.Fatalf("restore --yes: exit %d, want 1 (a conflict, a deleted object)\n%s\n%s", res.code, res.stdout, res.stderr)
	}
	rep = decodeRestore(t, res.stdout)
	if o := outcomeOf(rep, "w-3"); o.State != restore.StateConflict || !slices.Equal(o.Conflicts, []string{"spec.color"}) {
		t.Errorf("w-3: %+v, want a conflict on spec.color", o)
	}
	if o := outcomeOf(rep, "w-6"); o.State != restore.StateMissing {
		t.Errorf("w-6: %+v, want missing", o)
	}
	if o := outcomeOf(rep, "w-1"); o.State != restore.StateRestored || !slices.Equal(o.Restored, []string{"spec.legacy"}) || o.Version != "v1beta1" {
		t.Errorf("w-1: %+v, want spec.legacy restored at v1beta1", o)
	}
	now := rc.snap(t, "v1beta1")
	for _, name := range []string{"w-1", "w-2", "w-4", "w-5"} {
		if now.data[name] != before.data[name] {
			t.Errorf("%s after restore:\n%s\nwant (before the upgrade):\n%s", name, now.data[name], before.data[name])
		}
		for _, m := range before.managers[name] {
			if !slices.Contains(now.managers[name], m) {
				t.Errorf("%s: manager %s lost (before %v, after %v)", name, m, before.managers[name], now.managers[name])
			}
		}
		if !slices.Contains(now.managers[name], restore.FieldManager) {
			t.Errorf("%s: managers %v lack %s", name, now.managers[name], restore.FieldManager)
		}
	}
	if now.rv["w-3"] != back.rv["w-3"] || strings.Contains(now.data["w-3"], `"legacy":`) {
		t.Errorf("w-3 (changed since the backup) was written: %s", now.data["w-3"])
	}
	// Every manager can still server-side apply (no stale managedFields): a dry run.
	for _, name := range []string{"w-1", "w-2"} {
		body := fmt.Sprintf(`{"apiVersion":"%s/v1beta1","kind":"Widget","metadata":{"name":"%s","namespace":"%s","annotations":{"owner":"team-b"}}}`, rc.group, name, rc.ns)
		if _, err := rc.dyn.Resource(gvr).Namespace(rc.ns).Patch(ctx, name, types.ApplyPatchType, []byte(body), metav1.PatchOptions{FieldManager: "gitops", DryRun: []string{metav1.DryRunAll}}); err != nil {
			t.Errorf("%s: server-side apply by gitops after the restore: %v", name, err)
		}
	}

	// 6. --force --recreate: w-3 overwritten, w-6 re-created; everything equals the backup again.
	res = runCluster(t, "restore", "-f", backup, "--yes", "--force", "--recreate")
	if res.code != 0 {
		t.Fatalf("restore --force --recreate: exit %d\n%s\n%s", res.code, res.stdout, res.stderr)
	}
	t.Logf("restore --yes --force --recreate: exit %d\n%s%s", res.code, res.stdout, res.stderr)
	mustContain(t, "restore --force --recreate", res.stdout, "re-created", "overwritten: spec.color")
	now = rc.snap(t, "v1beta1")
	for _, name := range []string{"w-3", "w-6"} {
		if now.data[name] != before.data[name] {
			t.Errorf("%s after restore --force --recreate:\n%s\nwant:\n%s", name, now.data[name], before.data[name])
		}
	}
	if !slices.Equal(now.managers["w-6"], []string{restore.FieldManager}) {
		t.Errorf("w-6 re-created: managers %v, want [%s]", now.managers["w-6"], restore.FieldManager)
	}
	// Run again: everything unchanged, exit 0, nothing written.
	again := rc.snap(t, "v1beta1")
	res = runCluster(t, "restore", "-f", backup, "--yes", "-o", "json")
	if res.code != 0 {
		t.Fatalf("restore a second time: exit %d\n%s\n%s", res.code, res.stdout, res.stderr)
	}
	if rep := decodeRestore(t, res.stdout); rep.Counts[restore.StateUnchanged] != 6 {
		t.Errorf("restore a second time: counts %v, want 6 unchanged", rep.Counts)
	}
	if after := rc.snap(t, "v1beta1"); !mapsEqual(again.rv, after.rv) {
		t.Errorf("a restore with nothing to restore wrote: %v → %v", again.rv, after.rv)
	}

	// 7. Up again to the same release: a new upgrade with a backup of its own (the first run's
	// checkpoint is complete: not resumed, its backup not reused), holding the restored fields.
	backup3 := filepath.Join(t.TempDir(), "backup-3.yaml")
	res = runCluster(t, "upgrade", "-f", rc.newDir, "--yes", "--allow-data-loss", "--backup", backup3, "-o", "json")
	if res.code != 0 {
		// Before the fix in migrate's manager check, the restore's own manager (owning only
		// the restored spec.legacy, dropped again with consent) counted as a lost manager.
		t.Fatalf("upgrade -f NEW a second time: exit %d\n%s", res.code, res.stderr)
	}
	var up struct {
		Resumed bool `json:"resumed"`
		Backup  struct {
			File   string `json:"file"`
			Reused bool   `json:"reused"`
		} `json:"backup"`
	}
	if err := json.Unmarshal([]byte(res.stdout), &up); err != nil || up.Resumed || up.Backup.Reused || up.Backup.File != backup3 {
		t.Errorf("upgrade -f NEW a second time: resumed %v backup %+v (%v), want a new run with backup %s", up.Resumed, up.Backup, err, backup3)
	}
	if b, err := os.ReadFile(backup3); err != nil || strings.Count(string(b), "legacy: keep-") != 6 {
		t.Errorf("the second upgrade's backup lacks the restored spec.legacy of the 6 objects (%v)", err)
	}
}

// TestRestoreAsks: without --yes the restore asks after the dry run; "n" writes nothing.
func TestRestoreAsks(t *testing.T) {
	isolateCache(t)
	rc := setupRestoreCase(t, "asks.restore.example.com")
	backup := filepath.Join(t.TempDir(), "backup.yaml")
	if res := runCluster(t, "upgrade", "-f", rc.newDir, "--yes", "--allow-data-loss", "--backup", backup); res.code != 0 {
		t.Fatalf("upgrade: exit %d\n%s\n%s", res.code, res.stdout, res.stderr)
	}
	if res := runCluster(t, "upgrade", "-f", rc.oldDir, "--yes", "--backup", backup+".2"); res.code != 0 {
		t.Fatalf("upgrade -f OLD: exit %d\n%s\n%s", res.code, res.stdout, res.stderr)
	}
	before := rc.snap(t, "v1beta1")
	res := run(t, "n\n", "restore", "-f", backup, "--kubeconfig", env.Kubeconfig)
	if res.code != 3 {
		t.Fatalf("restore answered n: exit %d, want 3\n%s\n%s", res.code, res.stdout, res.stderr)
	}
	mustContain(t, "restore answered n", res.stdout, "would restore")
	mustContain(t, "restore answered n", res.stderr, "[y/N]", "nothing was written")
	if after := rc.snap(t, "v1beta1"); !mapsEqual(before.rv, after.rv) {
		t.Errorf("restore answered n wrote: %v → %v", before.rv, after.rv)
	}
}

// TestRestoreBadInput: a backup that is not YAML, a missing file, no -f.
func TestRestoreBadInput(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(bad, []byte("apiVersion: v1\nkind: [\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"restore"}, 2, "give the backup with -f FILE"},
		{[]string{"restore", "-f", bad, "--dry-run", "--yes"}, 2, "--dry-run writes nothing"},
		{[]string{"restore", "-f", bad, "--concurrency", "0"}, 2, "--concurrency must be between 1 and 64"},
		{[]string{"restore", "-f", bad, "--dry-run"}, 2, "bad.yaml"},
		{[]string{"restore", "-f", filepath.Join(dir, "none.yaml"), "--dry-run"}, 2, "none.yaml"},
	} {
		res := runCluster(t, tc.args...)
		if res.code != tc.code || !strings.Contains(res.stderr, tc.want) || strings.Count(strings.TrimSpace(res.stderr), "\n") > 0 {
			t.Errorf("%v: exit %d, stderr %q; want exit %d and one line naming %q", tc.args, res.code, res.stderr, tc.code, tc.want)
		}
	}
}

// TestRestoreInterrupted: Ctrl-C (the context cancelled) after the first object of the pass
// that writes stops the restore there: an error, and no later object written (one document at
// a time: restore's TestRunInterruptedConcurrently has the writes in flight of several).
func TestRestoreInterrupted(t *testing.T) {
	isolateCache(t)
	rc := setupRestoreCase(t, "stop.restore.example.com")
	backup := filepath.Join(t.TempDir(), "backup.yaml")
	if res := runCluster(t, "upgrade", "-f", rc.newDir, "--yes", "--allow-data-loss", "--backup", backup); res.code != 0 {
		t.Fatalf("upgrade: exit %d\n%s\n%s", res.code, res.stdout, res.stderr)
	}
	if res := runCluster(t, "upgrade", "-f", rc.oldDir, "--yes", "--backup", backup+".2"); res.code != 0 {
		t.Fatalf("upgrade -f OLD: exit %d\n%s\n%s", res.code, res.stdout, res.stderr)
	}
	c, err := migrate.NewClients(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	writing := false
	rep, err := restore.Run(ctx, c, restore.Options{Files: []string{backup}, Concurrency: 1,
		Confirm: func(*restore.Report) (bool, error) { writing = true; return true, nil },
		OnObject: func(restore.Outcome) {
			if writing {
				cancel()
			}
		}})
	if err == nil || ctx.Err() == nil {
		t.Fatalf("interrupted restore: err %v, want an error", err)
	}
	if rep != nil && len(rep.Objects) != 1 {
		t.Errorf("interrupted restore handled %d objects, want 1", len(rep.Objects))
	}
	now := rc.snap(t, "v1beta1")
	restored := 0
	for _, d := range now.data {
		if strings.Contains(d, `"legacy":`) {
			restored++
		}
	}
	if restored != 1 {
		t.Errorf("%d objects hold spec.legacy after the interruption, want 1 (the first)", restored)
	}
	// Running it again restores the rest, the backup read from stdin: copied once, both passes
	// read it (the pass that writes found stdin empty, and wrote nothing).
	b, err := os.ReadFile(backup)
	if err != nil {
		t.Fatal(err)
	}
	res := run(t, string(b), "restore", "-f", "-", "--yes", "--kubeconfig", env.Kubeconfig)
	if res.code != 0 {
		t.Errorf("restore -f - after the interruption: exit %d\n%s\n%s", res.code, res.stdout, res.stderr)
	}
	mustContain(t, "restore -f -", res.stdout, "Restore: ", "stdin was copied to a temporary file")
	restored = 0
	for _, d := range rc.snap(t, "v1beta1").data {
		if strings.Contains(d, `"legacy":`) {
			restored++
		}
	}
	if restored != len(now.data) || restored < 2 {
		t.Errorf("%d of %d objects hold spec.legacy after restore -f -", restored, len(now.data))
	}
}

// TestRestoreWebhookCRD: a CRD converting through a webhook: the backup's own version is
// written (the API server converts through the webhook), never a relabelled copy; once that
// version is no longer served the object fails with what to do, exit 1.
func TestRestoreWebhookCRD(t *testing.T) {
	isolateCache(t)
	ctx := context.Background()
	srv := testwebhook.StartForTest(t, testwebhook.Options{})
	srv.Set(testwebhook.Identity)
	group := "hook.restore.example.com"
	crd := testcrd.New(group, "Sprocket", testcrd.Version("v1beta1", true, true, upgradeSchema(true, 0, "")), testcrd.Version("v1", true, false, upgradeSchema(false, 0, "")))
	crd.Spec.Conversion = srv.WebhookConversion()
	if _, err := env.CreateCRD(ctx, crd); err != nil {
		t.Fatal(err)
	}
	dyn, err := dynamic.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	at := func(v string) dynamic.ResourceInterface {
		return dyn.Resource(schema.GroupVersionResource{Group: group, Version: v, Resource: "sprockets"}).Namespace("default")
	}
	for i, legacy := range []string{"a", "b"} {
		obj := map[string]any{"apiVersion": group + "/v1beta1", "kind": "Sprocket", "metadata": map[string]any{"name": fmt.Sprintf("g-%d", i+1)},
			"spec": map[string]any{"size": int64(i + 1), "legacy": legacy}}
		if _, err := at("v1beta1").Create(ctx, &unstructured.Unstructured{Object: obj}, metav1.CreateOptions{FieldManager: "kubectl-create"}); err != nil {
			t.Fatal(err)
		}
	}
	// The backup as upgrade writes it: every object at each version (v1 lacks spec.legacy).
	var b strings.Builder
	for _, v := range []string{"v1beta1", "v1"} {
		list, err := at(v).List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&b, "# sprockets.%s.%s\n", v, group)
		for _, u := range list.Items {
			y, _ := yaml.Marshal(u.Object)
			fmt.Fprintf(&b, "---\n%s", y)
		}
	}
	backup := filepath.Join(t.TempDir(), "backup.yaml")
	if err := os.WriteFile(backup, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := at("v1beta1").Patch(ctx, "g-1", types.MergePatchType, []byte(`{"spec":{"legacy":null}}`), metav1.PatchOptions{FieldManager: "someone"}); err != nil {
		t.Fatal(err)
	}
	before := srv.Requests()
	res := runCluster(t, "restore", "-f", backup, "--yes", "-o", "json")
	if res.code != 0 {
		t.Fatalf("restore: exit %d\n%s\n%s", res.code, res.stdout, res.stderr)
	}
	rep := decodeRestore(t, res.stdout)
	if len(rep.Objects) != 4 || rep.Counts[restore.StateRestored] != 1 || rep.Counts[restore.StateUnchanged] != 3 {
		t.Errorf("restore: counts %v of %d, want 1 restored and 3 unchanged of 4", rep.Counts, len(rep.Objects))
	}
	for _, o := range rep.Objects {
		if want := strings.TrimPrefix(o.APIVersion, group+"/"); o.Version != want {
			t.Errorf("%s (backed up at %s) written at %s: a webhook CRD is written at the backup's own version", o.Name, o.APIVersion, o.Version)
		}
		if o.Name == "g-1" && o.Version == "v1beta1" && !slices.Equal(o.Restored, []string{"spec.legacy"}) {
			t.Errorf("g-1 at v1beta1: %+v, want spec.legacy restored", o)
		}
	}
	if srv.Requests() == before {
		t.Errorf("the webhook was never called: the v1 reads and writes go through it")
	}
	g1, err := at("v1beta1").Get(ctx, "g-1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if l, _, _ := unstructured.NestedString(g1.Object, "spec", "legacy"); l != "a" {
		t.Errorf("g-1 spec.legacy after the restore = %q, want a", l)
	}

	// v1beta1 no longer served: its backup documents are converted to v1 by the CRD's own
	// webhook and compared there; spec.legacy, which v1 lacks, is reported not held (exit 1).
	live, err := apiextensionsclient.NewForConfigOrDie(env.Config).ApiextensionsV1().CustomResourceDefinitions().Get(ctx, crd.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	live.Spec.Versions[0].Served = false
	if _, err := apiextensionsclient.NewForConfigOrDie(env.Config).ApiextensionsV1().CustomResourceDefinitions().Update(ctx, live, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := env.WaitEstablished(ctx, crd.Name); err != nil {
		t.Fatal(err)
	}
	res = runCluster(t, "restore", "-f", backup, "--dry-run", "-o", "json")
	if res.code != 1 {
		t.Fatalf("restore with v1beta1 unserved: exit %d, want 1\n%s\n%s", res.code, res.stdout, res.stderr)
	}
	rep = decodeRestore(t, res.stdout)
	for _, o := range rep.Objects {
		if o.APIVersion == group+"/v1beta1" && (o.State != restore.StateNotHeld || o.Version != "v1" || !slices.Equal(o.NotHeld, []string{"spec.legacy"})) {
			t.Errorf("%s at v1beta1 with v1beta1 unserved: %+v, want converted through the webhook to v1, spec.legacy not held", o.Name, o)
		}
	}
}

// TestUpgradeBackRefusesLoss: going back with `upgrade -f OLD` has the guarantees of any
// upgrade. The new release added spec.legacy (v1), which the old one (v1beta1) lacks; an object
// holding it stops the way back before any write (objects and CRD unchanged); with
// --allow-data-loss it goes back, and the backup holds the field, which restore reports as not
// held by the old CRDs (exit 1).
func TestUpgradeBackRefusesLoss(t *testing.T) {
	isolateCache(t)
	ctx := context.Background()
	group := "guard.restore.example.com"
	old := testcrd.New(group, "Widget", testcrd.Version("v1beta1", true, true, upgradeSchema(false, 0, "")))
	next := testcrd.New(group, "Widget", testcrd.Version("v1", true, true, upgradeSchema(true, 0, "")))
	oldDir, newDir := writeRelease(t, old), writeRelease(t, next)
	if _, err := env.CreateCRD(ctx, old.DeepCopy()); err != nil {
		t.Fatal(err)
	}
	rc := &restoreCase{group: group, ns: "default"}
	var err error
	if rc.crds, err = apiextensionsclient.NewForConfig(env.Config); err != nil {
		t.Fatal(err)
	}
	if rc.dyn, err = dynamic.NewForConfig(env.Config); err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= 3; i++ {
		obj := map[string]any{"apiVersion": group + "/v1beta1", "kind": "Widget", "metadata": map[string]any{"name": fmt.Sprintf("w-%d", i), "namespace": rc.ns},
			"spec": map[string]any{"size": int64(i)}}
		if _, err := rc.dyn.Resource(rc.gvr("v1beta1")).Namespace(rc.ns).Create(ctx, &unstructured.Unstructured{Object: obj}, metav1.CreateOptions{FieldManager: "kubectl-create"}); err != nil {
			t.Fatal(err)
		}
	}
	if res := runCluster(t, "upgrade", "-f", newDir, "--yes", "--backup", filepath.Join(t.TempDir(), "up.yaml")); res.code != 0 {
		t.Fatalf("upgrade -f NEW: exit %d\n%s\n%s", res.code, res.stdout, res.stderr)
	}
	// On the new release, someone uses the new field.
	if _, err := rc.dyn.Resource(rc.gvr("v1")).Namespace(rc.ns).Patch(ctx, "w-2", types.MergePatchType, []byte(`{"spec":{"legacy":"new-only"}}`), metav1.PatchOptions{FieldManager: "someone"}); err != nil {
		t.Fatal(err)
	}
	before := rc.snap(t, "v1")
	crdRV := func() string {
		c, err := rc.crds.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, next.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return c.ResourceVersion
	}
	rv := crdRV()
	backup := filepath.Join(t.TempDir(), "back.yaml")
	res := runCluster(t, "upgrade", "-f", oldDir, "--yes", "--backup", backup)
	if res.code != 1 {
		t.Fatalf("upgrade -f OLD with an object holding a field OLD lacks: exit %d, want 1\n%s\n%s", res.code, res.stdout, res.stderr)
	}
	mustContain(t, "the refused way back", res.stdout, "w-2", "spec.legacy")
	mustContain(t, "the refused way back", res.stderr, "nothing was written", "--allow-data-loss")
	if after := rc.snap(t, "v1"); !mapsEqual(before.rv, after.rv) || crdRV() != rv {
		t.Errorf("the refused way back wrote: objects %v → %v, CRD %s → %s", before.rv, after.rv, rv, crdRV())
	}
	if _, err := os.Stat(backup); err == nil {
		t.Errorf("the refused way back wrote a backup")
	}
	if res := runCluster(t, "upgrade", "-f", oldDir, "--yes", "--allow-data-loss", "--backup", backup); res.code != 0 {
		t.Fatalf("upgrade -f OLD --allow-data-loss: exit %d\n%s\n%s", res.code, res.stdout, res.stderr)
	}
	if b, err := os.ReadFile(backup); err != nil || !strings.Contains(string(b), "legacy: new-only") {
		t.Errorf("the way back's backup lacks w-2's spec.legacy (%v)", err)
	}
	res = runCluster(t, "restore", "-f", backup, "--dry-run", "-o", "json")
	if res.code != 1 {
		t.Fatalf("restore onto the old release: exit %d, want 1\n%s\n%s", res.code, res.stdout, res.stderr)
	}
	if o := outcomeOf(decodeRestore(t, res.stdout), "w-2"); !slices.Equal(o.NotHeld, []string{"spec.legacy"}) {
		t.Errorf("w-2 restored onto the old release: %+v, want spec.legacy not held", o)
	}
}
