package fleet

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/crdver/kubectl-crdver/fleet"
	"github.com/crdver/kubectl-crdver/internal/docblock"
	"github.com/crdver/kubectl-crdver/internal/testcrd"
	"github.com/crdver/kubectl-crdver/internal/testenv"
	"github.com/crdver/kubectl-crdver/migrate"
	"github.com/crdver/kubectl-crdver/upgrade"
)

// gadgets is a release of Gadgets in group: with legacy, v1alpha1 (the storage version, with
// spec.legacy) and v1 (served); without, v1 alone (storage), which has no spec.legacy.
func gadgets(group string, legacy bool) *apiextensionsv1.CustomResourceDefinition {
	size := map[string]apiextensionsv1.JSONSchemaProps{"size": {Type: "integer"}}
	if !legacy {
		return testcrd.New(group, "Gadget", testcrd.Versions("v1"), testcrd.Storage("v1"), testcrd.Spec(size))
	}
	return testcrd.New(group, "Gadget", testcrd.Versions("v1alpha1", "v1"), testcrd.Storage("v1alpha1"),
		testcrd.Spec(map[string]apiextensionsv1.JSONSchemaProps{"size": {Type: "integer"}, "legacy": {Type: "string"}}, "v1alpha1"), testcrd.Spec(size, "v1"))
}

// gadgetFleet installs the old release of group on three servers, named a (1.37), b (1.34) and
// c (1.37), with n Gadgets each at v1alpha1; those of the clusters in legacy hold spec.legacy,
// which the new release drops (its upgrade refuses). It returns the new release (the folder
// releases/v2.0.0, written in dir) and a kubeconfig with the three contexts.
func gadgetFleet(t *testing.T, dir, group string, n int, legacy ...string) (release, kubeconfig string, byName map[string]*testenv.Env) {
	t.Helper()
	byName = map[string]*testenv.Env{"a": servers["new-a"], "b": servers["old-a"], "c": servers["new-b"]}
	for name, e := range byName {
		install(t, e, gadgets(group, true))
		var objs []map[string]any
		for i := range n {
			spec := map[string]any{"size": int64(i)}
			if slices.Contains(legacy, name) {
				spec["legacy"] = "keep-me"
			}
			objs = append(objs, map[string]any{"apiVersion": group + "/v1alpha1", "kind": "Gadget",
				"metadata": map[string]any{"name": fmt.Sprintf("g%03d", i), "namespace": "default"}, "spec": spec})
		}
		create(t, e, "gadgets", objs...)
	}
	_, kubeconfig = kubeconfigs(t, byName, nil)
	return writeRelease(t, filepath.Join(dir, "releases"), "v2.0.0", gadgets(group, false)), kubeconfig, byName
}

// liveState is what a cluster holds of a CRD and its objects: every resourceVersion.
func liveState(t *testing.T, e *testenv.Env, group string) string {
	t.Helper()
	c := clientsOf(t, e)
	crd, err := c.crds.ApiextensionsV1().CustomResourceDefinitions().Get(context.Background(), "gadgets."+group, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	list, err := c.dyn.Resource(schema.GroupVersionResource{Group: group, Version: "v1alpha1", Resource: "gadgets"}).Namespace("default").List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s := crd.ResourceVersion + " " + strings.Join(crd.Status.StoredVersions, ",")
	for _, o := range list.Items {
		s += " " + o.GetResourceVersion()
	}
	return s
}

// upgraded checks that the new release is in place on e: v1 alone, stored at v1 alone.
func upgraded(t *testing.T, e *testenv.Env, name, group string) {
	t.Helper()
	c := clientsOf(t, e)
	crd, err := c.crds.ApiextensionsV1().CustomResourceDefinitions().Get(context.Background(), "gadgets."+group, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(crd.Spec.Versions) != 1 || !slices.Equal(crd.Status.StoredVersions, []string{"v1"}) {
		t.Errorf("%s: versions %d, storedVersions %v: the release is not in place", name, len(crd.Spec.Versions), crd.Status.StoredVersions)
	}
}

// TestFleetUpgradeInWaves: three clusters of two Kubernetes minors, waves 1,rest, one cluster
// at a time. The canary is upgraded; the next wave stops at the cluster that refuses (objects
// would lose spec.legacy), and nothing is written to the cluster after it. Once its objects are fixed, the same
// command skips the canary (the release is in place there, as upgrade status says) and
// finishes; upgrade status of the fleet says every cluster is done. The second run has a cache
// folder of its own (no local checkpoint of the first): what is done is read from each cluster.
// The three runs, printed for people, are docs/commands/fleet.md's transcripts, run in a folder
// laid out as the page's (releases/; the backups in the current folder).
func TestFleetUpgradeInWaves(t *testing.T) {
	pages := docblock.OpenTranscripts(t, "docs/commands/fleet.md")
	const group = "waves.example.com"
	backups := t.TempDir() // the working folder
	_, kubeconfig, byName := gadgetFleet(t, backups, group, 3, "b")
	r := newRunner(t, "KUBECONFIG="+kubeconfig) // the contexts through KUBECONFIG, as kubectl reads it
	r.Dir = backups
	shown := []string{"upgrade", "-f", "releases/v2.0.0", "--contexts", "a,b,c", "--waves", "1,rest", "--parallel", "1", "--yes"}
	args := append(slices.Clip(shown), "-o", "json")

	before := liveState(t, byName["c"], group)
	res := r.Run(args...)
	rep := report(t, res)
	t.Logf("first run: exit %d; %s", res.Code, lastLine(res.Stderr))
	pages.Check(shown, forPeople(t, res, rep, "--waves 1,rest"), res.Code)
	if res.Code != 1 || !strings.Contains(rep.Stopped, "wave 2 of 2 at b") {
		t.Errorf("exit %d, stopped %q: want 1, stopped at b", res.Code, rep.Stopped)
	}
	if !slices.Equal(rep.Waves[0], []string{"a"}) || !slices.Equal(rep.Waves[1], []string{"b", "c"}) {
		t.Errorf("waves: %v", rep.Waves)
	}
	if a := rep.Row("a"); !a.Upgraded || a.Verdict != upgrade.ResultComplete || a.Wave != 1 {
		t.Errorf("a: %+v", a)
	}
	if b := rep.Row("b"); b.Verdict != upgrade.ResultRefused || b.ExitCode != 1 || !strings.Contains(b.Blocker, "legacy") {
		t.Errorf("b: %+v", b)
	}
	if row := rep.Row("c"); row.State != fleet.StateNotStarted {
		t.Errorf("c: %+v", row)
	}
	if now := liveState(t, byName["c"], group); now != before {
		t.Errorf("c was written to after b refused: %s → %s", before, now)
	}
	upgraded(t, byName["a"], "a", group)
	if files, _ := filepath.Glob(filepath.Join(backups, "crdver-backup-a-*.yaml")); len(files) != 1 {
		t.Errorf("a's backup: %v", files)
	}

	// Fix b's objects (drop spec.legacy), then the same command.
	c := clientsOf(t, byName["b"])
	for i := range 3 {
		patch := `{"spec":{"legacy":null}}`
		if _, err := c.dyn.Resource(schema.GroupVersionResource{Group: group, Version: "v1alpha1", Resource: "gadgets"}).Namespace("default").
			Patch(context.Background(), fmt.Sprintf("g%03d", i), types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// From a machine that never ran it (a cache folder of its own, no local checkpoint): the
	// canary is recognised as done from the cluster itself.
	fresh := newRunner(t, "KUBECONFIG="+kubeconfig)
	fresh.Dir = backups
	res = fresh.Run(args...)
	rep = report(t, res)
	t.Logf("second run, a fresh cache folder: exit %d; %s", res.Code, lastLine(res.Stderr))
	pages.Check(shown, forPeople(t, res, rep, "--waves 1,rest"), res.Code)
	if res.Code != 0 || rep.Stopped != "" {
		t.Fatalf("exit %d, stopped %q\n%s", res.Code, rep.Stopped, res.Stderr)
	}
	if a := rep.Row("a"); a.State != fleet.StateSkipped || a.InPlace == nil || !*a.InPlace {
		t.Errorf("a, upgraded before: %+v", a)
	}
	upgraded(t, byName["a"], "a", group)
	for _, n := range []string{"b", "c"} {
		if row := rep.Row(n); !row.Upgraded || row.Verdict != upgrade.ResultComplete {
			t.Errorf("%s: %+v", n, row)
		}
		upgraded(t, byName[n], n, group)
	}
	if files, _ := filepath.Glob(filepath.Join(backups, "crdver-backup-a-*.yaml")); len(files) != 1 {
		t.Errorf("a's backups after the second run: %v (it was upgraded once)", files)
	}

	status := []string{"upgrade", "status", "-f", "releases/v2.0.0", "--all-contexts"}
	st := r.Run(append(slices.Clip(status), "-o", "json")...)
	srep := report(t, st)
	pages.Check(status, forPeople(t, st, srep, ""), st.Code)
	if st.Code != 0 {
		t.Errorf("upgrade status of the fleet: exit %d\n%s", st.Code, st.Stderr)
	}
	for _, row := range srep.Rows {
		if row.Verdict != upgrade.NextNothing || row.InPlace == nil || !*row.InPlace {
			t.Errorf("upgrade status %s: %+v", row.Name, row)
		}
	}
}

// resourceVersions are the resourceVersions of e's Gadgets of group, by name (read at v1, which
// both releases serve).
func resourceVersions(t *testing.T, e *testenv.Env, group string) map[string]string {
	t.Helper()
	list, err := clientsOf(t, e).dyn.Resource(schema.GroupVersionResource{Group: group, Version: "v1", Resource: "gadgets"}).Namespace("default").List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	rvs := map[string]string{}
	for _, o := range list.Items {
		rvs[o.GetName()] = o.GetResourceVersion()
	}
	return rvs
}

// rewriteOf is the checkpoint of the storage migration (the rewrite of the objects) of crd on
// the cluster at host, as runs with the cache folder cache keep it; nil when there is none.
func rewriteOf(cache, host, crd string) *migrate.Checkpoint {
	files, _ := filepath.Glob(filepath.Join(cache, "kubectl-crdver", "migrate", crd+"-*.json"))
	for _, f := range files {
		cp, err := migrate.LoadCheckpoint(f)
		if err == nil && cp != nil && strings.TrimSuffix(cp.Server, "/") == strings.TrimSuffix(host, "/") {
			return cp
		}
	}
	return nil
}

// TestFleetUpgradeSurvivesSIGKILL: the fleet run is killed with SIGKILL in the middle of its
// second wave, while b's objects are being rewritten (its child has recorded a first page of
// the rewrite, of ten objects; the kernel sends the child SIGTERM and it stops as on Ctrl-C).
// Before the same command runs again, upgrade status says b's run is to be continued; the
// same command finishes: every cluster ends with the release applied and verified, the canary
// upgraded once (skipped by the second run), b's upgrade resumed (its rewrite the one begun
// before the kill, its first backup kept, the objects rewritten before the kill not written
// again), one backup file each. 200 objects a cluster, pages of ten: the child stops within a
// few pages of the kill, long before its rewrite's end.
func TestFleetUpgradeSurvivesSIGKILL(t *testing.T) {
	const group, n = "killed.example.com", 200
	release, kubeconfig, byName := gadgetFleet(t, t.TempDir(), group, n)
	r := newRunner(t)
	backups := t.TempDir()
	args := []string{"upgrade", "-f", release, "--kubeconfig", kubeconfig, "--contexts", "a,b,c", "--waves", "1,rest", "--parallel", "1", "--yes", "--backup-dir", backups, "--chunk-size", "10", "-o", "json"}

	before := resourceVersions(t, byName["b"], group)
	bHost := byName["b"].Config.Host
	var seen *migrate.Checkpoint // b's rewrite when the kill was sent
	res := r.RunKilledWhen(func() bool {
		if seen != nil { // killed: keep what was seen then
			return true
		}
		cp := rewriteOf(r.Home, bHost, "gadgets."+group)
		if cp != nil && cp.State == migrate.StateRunning && cp.Pages >= 1 {
			seen = cp
			return true
		}
		return false
	}, args...)
	if !res.Killed {
		t.Fatalf("the run ended before b's rewrite was caught under way: exit %d\n%s", res.Code, res.Stderr)
	}
	waitNoProcess(t, kubeconfig)
	upgraded(t, byName["a"], "a", group)

	// The kill landed in the middle of b's upgrade: some of its objects rewritten, not all,
	// the release not applied.
	killedAt := resourceVersions(t, byName["b"], group)
	var rewritten []string
	for name, rv := range killedAt {
		if rv != before[name] {
			rewritten = append(rewritten, name)
		}
	}
	t.Logf("killed with b's rewrite at page %d (%d objects); %d of %d objects rewritten when b's child stopped", seen.Pages, seen.Counts.Total(), len(rewritten), n)
	if len(rewritten) == 0 || len(rewritten) == n {
		t.Errorf("%d of %d of b's objects rewritten when the run was killed: the kill did not land in the middle of b's upgrade", len(rewritten), n)
	}
	crd, err := clientsOf(t, byName["b"]).crds.ApiextensionsV1().CustomResourceDefinitions().Get(context.Background(), "gadgets."+group, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(crd.Spec.Versions) != 2 {
		t.Errorf("b: the release was applied before the kill (versions %d, storedVersions %v)", len(crd.Spec.Versions), crd.Status.StoredVersions)
	}
	st := r.Run("upgrade", "status", "-f", release, "--kubeconfig", kubeconfig, "--contexts", "b", "-o", "json")
	srep := report(t, st)
	if b := srep.Row("b"); b == nil || b.Verdict != upgrade.NextContinue {
		t.Errorf("upgrade status of b after the kill (exit %d): %+v, want %s\n%s", st.Code, b, upgrade.NextContinue, st.Stderr)
	} else {
		t.Logf("upgrade status of b after the kill: %s (%s)", b.Verdict, b.Blocker)
	}
	bBackups, _ := filepath.Glob(filepath.Join(backups, "crdver-backup-b-*.yaml"))
	if len(bBackups) != 1 {
		t.Errorf("b's backups after the kill: %v, want the one its rewrite began after", bBackups)
	}

	res = r.Run(args...)
	rep := report(t, res)
	t.Logf("after the kill: exit %d; %s", res.Code, lastLine(res.Stderr))
	if res.Code != 0 {
		t.Fatalf("exit %d\n%s", res.Code, res.Stderr)
	}
	if a := rep.Row("a"); a.State != fleet.StateSkipped {
		t.Errorf("a was upgraded again: %+v", a)
	}
	for _, name := range []string{"b", "c"} {
		if row := rep.Row(name); row.State != fleet.StateDone || !row.Upgraded || row.Verdict != upgrade.ResultComplete {
			t.Errorf("%s: %+v", name, row)
		}
	}
	for name, e := range byName {
		upgraded(t, e, name, group)
		files, _ := filepath.Glob(filepath.Join(backups, "crdver-backup-"+name+"-*.yaml"))
		if len(files) != 1 {
			t.Errorf("%s's backups: %v, want one", name, files)
		}
	}
	// b's upgrade was resumed, not begun afresh: its first backup is the only one (a new run
	// would have taken one in the file this run named), and the objects rewritten before the
	// kill were not written again; the others were rewritten by this run.
	if files, _ := filepath.Glob(filepath.Join(backups, "crdver-backup-b-*.yaml")); len(bBackups) == 1 && !slices.Equal(files, bBackups) {
		t.Errorf("b's backups: %v, want the first run's %v alone (the run was resumed)", files, bBackups)
	}
	if cp := rewriteOf(r.Home, bHost, "gadgets."+group); cp == nil || cp.State != migrate.StateComplete || !cp.StartedAt.Equal(seen.StartedAt) || cp.Counts.Total() != n {
		t.Errorf("b's rewrite after the second run: %+v; want the one begun before the kill (started %s), complete, %d objects", cp, seen.StartedAt, n)
	} else {
		t.Logf("b's rewrite, begun before the kill and resumed: %d pages, %+v", cp.Pages, cp.Counts)
	}
	after := resourceVersions(t, byName["b"], group)
	for name, rv := range after {
		switch {
		case killedAt[name] != before[name] && rv != killedAt[name]:
			t.Errorf("b's %s was rewritten before the kill and written again after it (resourceVersion %s, %s, %s)", name, before[name], killedAt[name], rv)
		case killedAt[name] == before[name] && rv == before[name]:
			t.Errorf("b's %s was never rewritten (resourceVersion %s)", name, rv)
		}
	}
	if leftovers, _ := filepath.Glob(filepath.Join(backups, "*.partial")); len(leftovers) > 0 {
		t.Errorf("temporary files of a backup left: %v", leftovers)
	}
}
