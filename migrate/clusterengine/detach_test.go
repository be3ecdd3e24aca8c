package clusterengine_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/crdver/kubectl-crdver/migrate"
	"github.com/crdver/kubectl-crdver/plugin"
	"github.com/crdver/kubectl-crdver/retire"
	"github.com/crdver/kubectl-crdver/upgrade"
)

// childArgsEnv, when set, makes the test binary run the plugin with these arguments (separated
// by \x1f) as its own process and exit with its code (TestMain): a run that can be SIGKILLed.
const childArgsEnv = "CRDVER_CLUSTERENGINE_CHILD_ARGS"

func runChild(args []string) int {
	root := plugin.NewRootCmd(genericiooptions.IOStreams{In: os.Stdin, Out: os.Stdout, ErrOut: os.Stderr})
	root.SetArgs(args)
	return plugin.ExitCode(root.ExecuteContext(context.Background()))
}

// run runs the plugin in this process: its stdout, stderr and exit code.
func run(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	streams, _, out, errOut := genericiooptions.NewTestIOStreams()
	root := plugin.NewRootCmd(streams)
	root.SetArgs(append(args, "--kubeconfig", env.Kubeconfig))
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	err := root.ExecuteContext(ctx)
	if err != nil {
		errOut.WriteString("error: " + err.Error() + "\n")
	}
	return out.String(), errOut.String(), plugin.ExitCode(err)
}

// svmGVR is the StorageVersionMigrations' resource, at a version every API server here serves.
var svmGVR = schema.GroupVersionResource{Group: migrate.ClusterMigrationGroup, Version: "v1beta1", Resource: "storageversionmigrations"}

// detachedMigration is a fixture of group with n objects whose StorageVersionMigration
// `migrate --engine cluster --detach` left running in the cluster (exit 3), and its name.
func detachedMigration(t *testing.T, c *migrate.Clients, group string, n int) (*apiextensionsv1.CustomResourceDefinition, string) {
	t.Helper()
	crd := fixture(t, group, n)
	if _, errOut, code := run(t, "migrate", crd.Name, "--engine", "cluster", "--detach"); code != 3 {
		t.Fatalf("migrate --detach: exit %d\n%s", code, errOut)
	}
	names := migrations(t, c, group)
	if len(names) != 1 {
		t.Fatalf("migrations %v, want one", names)
	}
	return crd, names[0]
}

// migrations are the names of the StorageVersionMigrations of group's things.
func migrations(t *testing.T, c *migrate.Clients, group string) []string {
	t.Helper()
	l, err := c.Dynamic.Resource(svmGVR).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, m := range l.Items {
		if g, _, _ := unstructuredString(m.Object, "spec", "resource", "group"); g == group {
			out = append(out, m.GetName())
		}
	}
	return out
}

func unstructuredString(obj map[string]any, path ...string) (string, bool, error) {
	var cur any = obj
	for _, p := range path {
		m, ok := cur.(map[string]any)
		if !ok {
			return "", false, nil
		}
		cur = m[p]
	}
	s, ok := cur.(string)
	return s, ok, nil
}

// record is the StorageVersionMigration recorded in migrate's checkpoint of crd in the cache
// folder cache (nil when none).
func record(t *testing.T, cache, crd string) *migrate.Checkpoint {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(cache, "kubectl-crdver", "migrate", crd+"-*.json"))
	if len(files) != 1 {
		return nil
	}
	cp, err := migrate.LoadCheckpoint(files[0])
	if err != nil {
		t.Fatal(err)
	}
	return cp
}

func trimmed(t *testing.T, c *migrate.Clients, name string) []string {
	t.Helper()
	live, err := c.CRDs.ApiextensionsV1().CustomResourceDefinitions().Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return live.Status.StoredVersions
}

// --detach and a run killed while it follows, then the same commands again: (1) migrate --engine cluster --detach exits 3 once its StorageVersionMigration is
// created and recorded, says how to re-attach, and migrate status says it runs in the cluster;
// (2) a migrate following its migration is SIGKILLed while it waits;
// (3) upgrade --engine cluster --detach stops at its rewrite step the same way, and upgrade
// status says so; (4) retire --engine cluster --detach the same, its rewrite step "running in
// the cluster", the steps after it not reached; (5) a retire following its migration is
// SIGKILLed. Then the same commands again each re-attach to
// the migration recorded — none creates a second one — check every object, trim and go on:
// etcd holds every object at v1 and status.storedVersions is [v1]. Every run shares the one
// wait for the controller's first write (its migrations are created within seconds).
func TestClusterEngineDetachAndResume(t *testing.T) {
	began := time.Now()
	cache := t.TempDir()
	t.Setenv("XDG_CACHE_HOME", cache) // the checkpoints (migrate's, upgrade's): in the user's cache folder
	c, err := migrate.NewClients(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	// The controller runs from the start, as in a cluster: it takes seconds before its first
	// write (its garbage collector's cache must see the migration's revision), so the runs
	// below detach, or are killed, while their migrations run; starting it first lets that
	// wait overlap theirs.
	cm, err := env.StartStorageVersionMigrator()
	if err != nil {
		t.Fatal(err)
	}
	defer cm.Stop()
	const n = 20
	detached := fixture(t, "detach.cluster.example.com", n)
	killed := fixture(t, "killed.cluster.example.com", n)
	up := fixture(t, "upgrade-detach.cluster.example.com", n)
	retiredDetached := fixture(t, "retire-detach.cluster.example.com", n)
	retiredKilled := fixture(t, "retire-killed.cluster.example.com", n)

	// (1) Detached: exit 3, the record, the way back.
	out, errOut, code := run(t, "migrate", detached.Name, "--engine", "cluster", "--detach")
	if code != 3 || !strings.Contains(errOut, "re-attach with: kubectl crdver migrate "+detached.Name+" --engine=cluster") || !strings.Contains(out, "running in the cluster (detached") {
		t.Fatalf("migrate --detach: exit %d, want 3 and how to re-attach\n%s%s", code, out, errOut)
	}
	cp := record(t, cache, detached.Name)
	names := migrations(t, c, "detach.cluster.example.com")
	if cp == nil || cp.ClusterMigration == nil || !cp.ClusterMigration.Created || cp.ClusterMigration.DetachedAt == nil || len(names) != 1 || names[0] != cp.ClusterMigration.Name {
		t.Fatalf("after --detach: record %+v, migrations %v; want the one created, recorded as detached", cp, names)
	}
	if cp.UID != string(detached.UID) || cp.StorageVersion != "v1" || cp.Generation != detached.Generation {
		t.Errorf("the record is not bound to the CRD object: %+v", cp)
	}
	out, _, code = run(t, "migrate", "status", detached.Name)
	if code != 1 || !strings.Contains(out, "StorageVersionMigration "+names[0]) || !strings.Contains(out, "re-attach with kubectl crdver migrate "+detached.Name+" --engine cluster") {
		t.Errorf("migrate status: exit %d, want 1 and the migration running in the cluster:\n%s", code, out)
	}

	t.Logf("%s: detached", time.Since(began).Round(time.Second))
	// (2) SIGKILL while following.
	killedName := killWhileFollowing(t, cache, killed.Name, "migrate", killed.Name, "--engine", "cluster")

	t.Logf("%s: killed", time.Since(began).Round(time.Second))
	// (3) upgrade --detach: the release removes v1beta1; its rewrite step is left in the cluster.
	next := up.DeepCopy()
	next.TypeMeta = metav1.TypeMeta{APIVersion: "apiextensions.k8s.io/v1", Kind: "CustomResourceDefinition"}
	next.Spec.Versions = []apiextensionsv1.CustomResourceDefinitionVersion{{Name: "v1", Served: true, Storage: true, Schema: up.Spec.Versions[1].Schema}}
	dir := t.TempDir()
	uo := upgrade.Options{Next: []*apiextensionsv1.CustomResourceDefinition{next}, ApplyFile: "release/",
		BackupFile: filepath.Join(dir, "backup.yaml"), Checkpoint: filepath.Join(dir, "cp.json"), Engine: migrate.EngineCluster,
		Rewrite: migrate.RewriteOptions{Detach: true}}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	rep, err := upgrade.Run(ctx, c, uo)
	var de *migrate.DetachedError
	if !errorsAs(err, &de) || rep.Outcome.Result != upgrade.ResultDetached || rep.Outcome.ExitCode != 3 || len(rep.Outcome.Remaining) != 1 {
		t.Fatalf("upgrade --detach: err %v, outcome %+v; want detached, exit 3, what remains", err, rep.Outcome)
	}
	if s := rewriteStep(rep); s == nil || s.State != upgrade.StateDetached {
		t.Errorf("the rewrite step = %+v, want %q", s, upgrade.StateDetached)
	}
	st, err := upgrade.GetStatus(ctx, c, uo.Next, uo.Checkpoint, "")
	if err != nil {
		t.Fatal(err)
	}
	if st.Next != upgrade.NextContinue || len(st.InCluster) != 1 || st.InCluster[0].Name != de.Name {
		t.Errorf("upgrade status: next %s, in the cluster %+v; want continue, with %s", st.Next, st.InCluster, de.Name)
	}

	t.Logf("%s: upgrade detached", time.Since(began).Round(time.Second))
	// (4) retire --detach: exit 3, the record, the way back; the steps after the rewrite wait.
	out, errOut, code = run(t, "retire", retiredDetached.Name, "v1beta1", "--engine", "cluster", "--detach", "--yes")
	if code != 3 || !strings.Contains(errOut, "re-attach with: kubectl crdver retire "+retiredDetached.Name+" v1beta1 --engine=cluster") || !strings.Contains(out, "running in the cluster") || !strings.Contains(out, "not reached") {
		t.Fatalf("retire --detach: exit %d, want 3 and how to re-attach\n%s%s", code, out, errOut)
	}
	cp = record(t, cache, retiredDetached.Name)
	names = migrations(t, c, retiredDetached.Spec.Group)
	if cp == nil || cp.ClusterMigration == nil || !cp.ClusterMigration.Created || cp.ClusterMigration.DetachedAt == nil || len(names) != 1 || names[0] != cp.ClusterMigration.Name {
		t.Fatalf("after retire --detach: record %+v, migrations %v; want the one created, recorded as detached", cp, names)
	}
	retireDetachedName := names[0]
	// (5) A retire SIGKILLed while following.
	retireKilledName := killWhileFollowing(t, cache, retiredKilled.Name, "retire", retiredKilled.Name, "v1beta1", "--engine", "cluster", "--yes")
	t.Logf("%s: retire detached and killed", time.Since(began).Round(time.Second))

	// The same commands again.
	for _, crd := range []*apiextensionsv1.CustomResourceDefinition{detached, killed} {
		out, errOut, code := run(t, "migrate", crd.Name, "--engine", "cluster", "-o", "json")
		if code != 0 {
			t.Fatalf("%s: re-attached run: exit %d\n%s%s\nkube-controller-manager logs:\n%s", crd.Name, code, out, errOut, tail(cm.Logs(), 4000))
		}
		var rep plugin.MigrateReport
		if err := json.Unmarshal([]byte(out), &rep); err != nil {
			t.Fatal(err)
		}
		group := crd.Spec.Group
		if rep.Cluster == nil || !rep.Cluster.Reattached || !rep.Cluster.Succeeded || rep.Cluster.Check == nil || rep.Cluster.Check.Objects != n || rep.Trim == nil || !rep.Trim.Safe {
			t.Errorf("%s: re-attached run's report:\n%s", crd.Name, out)
		}
		t.Logf("%s: %s re-attached", time.Since(began).Round(time.Second), crd.Name)
		if got := migrations(t, c, group); len(got) != 1 {
			t.Errorf("%s: StorageVersionMigrations %v, want the one the first run created", crd.Name, got)
		}
		if got := stored(t, group); len(got) != 1 || got[group+"/v1"] != n {
			t.Errorf("%s: etcd = %v, want all %d at v1", crd.Name, got, n)
		}
		if got := trimmed(t, c, crd.Name); len(got) != 1 || got[0] != "v1" {
			t.Errorf("%s: storedVersions %v, want [v1]", crd.Name, got)
		}
	}
	if got := migrations(t, c, "killed.cluster.example.com"); len(got) != 1 || got[0] != killedName {
		t.Errorf("after the SIGKILL and the resumed run: migrations %v, want only %s", got, killedName)
	}
	for _, tc := range []struct {
		crd      *apiextensionsv1.CustomResourceDefinition
		recorded string
	}{{retiredDetached, retireDetachedName}, {retiredKilled, retireKilledName}} {
		out, errOut, code := run(t, "retire", tc.crd.Name, "v1beta1", "--engine", "cluster", "--yes", "-o", "json")
		if code != 0 {
			t.Fatalf("%s: re-attached retire: exit %d\n%s%s\nkube-controller-manager logs:\n%s", tc.crd.Name, code, out, errOut, tail(cm.Logs(), 4000))
		}
		var rep retire.Result
		if err := json.Unmarshal([]byte(out), &rep); err != nil {
			t.Fatal(err)
		}
		cl := rep.Cluster
		if cl == nil || !cl.Reattached || !cl.Succeeded || cl.Name != tc.recorded || cl.Check == nil || cl.Check.Objects != n || rep.Trim == nil || !rep.Trim.Safe || rep.Fields == nil || rep.Fields.Remaining.Objects != 0 {
			t.Errorf("%s: re-attached retire's report:\n%s", tc.crd.Name, out)
		}
		if rep.Plan == nil || rep.Plan.Unchecked == nil || rep.Plan.Unchecked.Name != tc.recorded {
			t.Errorf("%s: the plan does not name the migration it re-attaches to (%s):\n%s", tc.crd.Name, tc.recorded, out)
		}
		group := tc.crd.Spec.Group
		if got := migrations(t, c, group); len(got) != 1 || got[0] != tc.recorded {
			t.Errorf("%s: StorageVersionMigrations %v, want only %s, the one the first run created", tc.crd.Name, got, tc.recorded)
		}
		if got := stored(t, group); len(got) != 1 || got[group+"/v1"] != n {
			t.Errorf("%s: etcd = %v, want all %d at v1", tc.crd.Name, got, n)
		}
		if got := trimmed(t, c, tc.crd.Name); len(got) != 1 || got[0] != "v1" {
			t.Errorf("%s: storedVersions %v, want [v1]", tc.crd.Name, got)
		}
		t.Logf("%s: %s re-attached", time.Since(began).Round(time.Second), tc.crd.Name)
	}
	uo.Rewrite.Detach = false
	rep, err = upgrade.Run(ctx, c, uo)
	if err != nil || rep.Outcome.ExitCode != 0 {
		t.Fatalf("the upgrade again: %v, outcome %+v\nkube-controller-manager logs:\n%s", err, rep.Outcome, tail(cm.Logs(), 4000))
	}
	if s := rewriteStep(rep); s == nil || s.Cluster == nil || !s.Cluster.Reattached || s.Cluster.Name != de.Name {
		t.Errorf("the rewrite step = %+v, want %s re-attached", s, de.Name)
	}
	group := up.Spec.Group
	if got := migrations(t, c, group); len(got) != 1 {
		t.Errorf("upgrade: StorageVersionMigrations %v, want the one the detached run created", got)
	}
	if got := stored(t, group); len(got) != 1 || got[group+"/v1"] != n {
		t.Errorf("upgrade: etcd = %v, want all %d at v1", got, n)
	}
	if got := trimmed(t, c, up.Name); len(got) != 1 || got[0] != "v1" {
		t.Errorf("upgrade: storedVersions %v, want [v1]", got)
	}
}

// killWhileFollowing runs the plugin with args as a process of its own, SIGKILLs it once it has
// recorded the StorageVersionMigration of crd in migrate's checkpoint (in the cache folder
// cache) as created and follows it, and returns the migration's name.
func killWhileFollowing(t *testing.T, cache, crd string, args ...string) string {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childArgsEnv+"="+strings.Join(append(args, "--kubeconfig", env.Kubeconfig), "\x1f"))
	var childOut strings.Builder
	cmd.Stdout, cmd.Stderr = &childOut, &childOut
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(2 * time.Minute); ; {
		if cp := record(t, cache, crd); cp != nil && cp.ClusterMigration != nil && cp.ClusterMigration.Created {
			break
		}
		if time.Now().After(deadline) {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			t.Fatalf("%v never recorded its migration:\n%s", args, childOut.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	time.Sleep(300 * time.Millisecond) // following it now
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	return record(t, cache, crd).ClusterMigration.Name
}

func rewriteStep(rep *upgrade.Report) *upgrade.StepResult {
	for i := range rep.Steps {
		if s := &rep.Steps[i]; s.Action == "retire" || s.Action == "migrate" {
			return s
		}
	}
	return nil
}

// A recorded migration deleted before the run that re-attaches reads how it ended: the run
// says so and writes back, itself, every object the migration did not rewrite (here: all of
// them, no controller ran); it creates no other migration, and trims on its own check.
func TestClusterEngineReattachGone(t *testing.T) {
	cache := t.TempDir()
	t.Setenv("XDG_CACHE_HOME", cache)
	c, err := migrate.NewClients(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	const n = 15
	group := "gone.cluster.example.com"
	crd, name := detachedMigration(t, c, group, n)
	if err := c.Dynamic.Resource(svmGVR).Delete(context.Background(), name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	out, errOut, code := run(t, "migrate", crd.Name, "--engine", "cluster", "-o", "json")
	if code != 0 {
		t.Fatalf("re-attached run: exit %d\n%s%s", code, out, errOut)
	}
	var rep plugin.MigrateReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatal(err)
	}
	cl := rep.Cluster
	if cl == nil || !cl.Gone || cl.Succeeded || cl.Check == nil || cl.Check.WrittenHere.Rewritten != n || len(cl.Notes) != 1 || !strings.Contains(cl.Notes[0], "no longer exists") {
		t.Errorf("report:\n%s", out)
	}
	if rep.Trim == nil || !rep.Trim.Safe {
		t.Errorf("not trimmed:\n%s", out)
	}
	if got := migrations(t, c, group); len(got) != 0 {
		t.Errorf("migrations %v, want none: the run wrote back what the deleted one left", got)
	}
	if got := stored(t, group); len(got) != 1 || got[group+"/v1"] != n {
		t.Errorf("etcd = %v, want all %d at v1", got, n)
	}
}

// A record written for another CRD object (the CRD deleted and created again since) is not
// followed: the run says so and starts a migration of its own.
func TestClusterEngineRecordOfAnotherCRD(t *testing.T) {
	cache := t.TempDir()
	t.Setenv("XDG_CACHE_HOME", cache)
	c, err := migrate.NewClients(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	group := "other.cluster.example.com"
	crd, _ := detachedMigration(t, c, group, 5)
	files, _ := filepath.Glob(filepath.Join(cache, "kubectl-crdver", "migrate", crd.Name+"-*.json"))
	cp := record(t, cache, crd.Name)
	first := cp.ClusterMigration.Name
	cp.UID = "another-uid" // as if written for the CRD before it was deleted and created again
	if err := cp.Save(files[0]); err != nil {
		t.Fatal(err)
	}
	out, errOut, code := run(t, "migrate", crd.Name, "--engine", "cluster", "--detach", "-o", "json")
	if code != 3 {
		t.Fatalf("second run: exit %d\n%s%s", code, out, errOut)
	}
	var rep plugin.MigrateReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatal(err)
	}
	if rep.Cluster == nil || rep.Cluster.Reattached || rep.Cluster.Name == first || len(rep.Cluster.Notes) != 1 || !strings.Contains(rep.Cluster.Notes[0], "deleted and created again") {
		t.Errorf("report:\n%s", out)
	}
	if got := migrations(t, c, group); len(got) != 2 {
		t.Errorf("migrations %v, want the first and the second run's own", got)
	}
}

func errorsAs(err error, target **migrate.DetachedError) bool { return errors.As(err, target) }

// From 1.36 the controller trims status.storedVersions itself once its migration succeeds, so
// a retire after a detached run finds v1beta1 gone from storedVersions before any object was
// checked: it must still re-attach to the recorded migration and check every object (here the
// migration was deleted after the controller's trim, as if its controller's word were all
// there was: the objects are still stored at v1beta1), not call the rewrite done. Untrimmed,
// the retire re-attaches as well, with the client engine asked (the default): it checks the
// migration it finds recorded rather than write every object beside it.
func TestRetireReattachesAfterTheControllersTrim(t *testing.T) {
	cache := t.TempDir()
	t.Setenv("XDG_CACHE_HOME", cache)
	c, err := migrate.NewClients(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	const n = 12
	for _, trim := range []bool{true, false} {
		group := fmt.Sprintf("retire-trimmed-%v.cluster.example.com", trim)
		crd, name := detachedMigration(t, c, group, n)
		ctx := context.Background()
		if trim {
			live, err := c.CRDs.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, crd.Name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			live.Status.StoredVersions = []string{"v1"} // what the controller does when its migration succeeds
			if _, err := c.CRDs.ApiextensionsV1().CustomResourceDefinitions().UpdateStatus(ctx, live, metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		if err := c.Dynamic.Resource(svmGVR).Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		if got := stored(t, group); got[group+"/v1beta1"] != n {
			t.Fatalf("etcd = %v before the retire, want all %d still at v1beta1", got, n)
		}
		out, errOut, code := run(t, "retire", crd.Name, "v1beta1", "--yes", "-o", "json")
		if code != 0 {
			t.Fatalf("trimmed %v: retire: exit %d\n%s%s", trim, code, out, errOut)
		}
		var rep retire.Result
		if err := json.Unmarshal([]byte(out), &rep); err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		if rep.Rewrite != nil || rep.Cluster == nil || !rep.Cluster.Gone || rep.Cluster.Check == nil || rep.Cluster.Check.WrittenHere.Rewritten != n {
			t.Errorf("trimmed %v: retire did not re-attach to the recorded migration and write back what it left:\n%s", trim, out)
		}
		if got := stored(t, group); len(got) != 1 || got[group+"/v1"] != n {
			t.Errorf("trimmed %v: etcd = %v after the retire, want all %d at v1", trim, got, n)
		}
		if got := trimmed(t, c, crd.Name); len(got) != 1 || got[0] != "v1" {
			t.Errorf("trimmed %v: storedVersions %v, want [v1]", trim, got)
		}
	}
}

// migrate --engine client beside a recorded StorageVersionMigration still running (no
// controller here: it never ends) goes on — safe, both write each object back unchanged — and
// says so in one line naming the migration and the choice: on stderr before the rewrite, with
// the result (-o json: result.notes; people: a Note line). The rewrite is whole all the same.
func TestClientEngineBesideARunningMigration(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	c, err := migrate.NewClients(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	const n = 6
	for _, output := range []string{"json", "human"} {
		group := "beside-" + output + ".cluster.example.com"
		crd, name := detachedMigration(t, c, group, n)
		t.Cleanup(func() { _ = c.Dynamic.Resource(svmGVR).Delete(context.Background(), name, metav1.DeleteOptions{}) })
		args := []string{"migrate", crd.Name}
		if output == "json" {
			args = append(args, "-o", "json")
		}
		out, errOut, code := run(t, args...)
		if code != 0 {
			t.Fatalf("%s: the client run beside it: exit %d\n%s%s", output, code, out, errOut)
		}
		note := "StorageVersionMigration " + name + ", recorded in "
		choice := "still rewrites the objects in the cluster: this client rewrite goes on beside it"
		if !strings.Contains(errOut, "note: "+note) || !strings.Contains(errOut, choice) || !strings.Contains(errOut, "re-attach with: kubectl crdver migrate "+crd.Name+" --engine cluster") {
			t.Errorf("%s: stderr does not say that the migration runs beside the rewrite, and the choice:\n%s", output, errOut)
		}
		if output == "json" {
			var rep plugin.MigrateReport
			if err := json.Unmarshal([]byte(out), &rep); err != nil {
				t.Fatal(err)
			}
			if rep.Result == nil || len(rep.Result.Notes) == 0 || !strings.HasPrefix(rep.Result.Notes[0], note) || !strings.Contains(rep.Result.Notes[0], choice) || rep.Result.Rewritten != n || rep.Trim == nil || !rep.Trim.Trimmed {
				t.Errorf("-o json: want the note first in result.notes, every object rewritten and the trim:\n%s", out)
			}
		} else if !strings.Contains(out, "Note: "+note) || strings.Count(out, note) != 1 {
			t.Errorf("the report does not say it once:\n%s", out)
		}
		if got := stored(t, group); len(got) != 1 || got[group+"/v1"] != n {
			t.Errorf("%s: etcd = %v, want all %d at v1", output, got, n)
		}
		if got := migrations(t, c, group); len(got) != 1 {
			t.Errorf("%s: migrations %v, want the one recorded: a client run creates none", output, got)
		}
	}
}
