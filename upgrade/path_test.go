package upgrade

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/crdver/kubectl-crdver/internal/testcrd"
	"github.com/crdver/kubectl-crdver/migrate"
	"github.com/crdver/kubectl-crdver/plan"
)

// The tests of RunPath at its API, on the package's real kube-apiserver.

// lossAtHop2 is a path whose second hop loses a field: the cluster stores v1 (with
// spec.legacy); release v0.2.0 adds v2 (with legacy) as the storage version; the target
// v0.3.0 keeps only v2, without legacy. The direct jump relabels v1 objects as v2 and prunes
// legacy, so the path goes through v0.2.0; at its second hop the objects, stored at v2 by
// then, lose legacy all the same.
func lossAtHop2(t *testing.T, group string) (*runFx, PathOptions) {
	t.Helper()
	t.Setenv("XDG_CACHE_HOME", t.TempDir()) // migrate's checkpoints
	live := testcrd.New(group, "Widget", testcrd.Version("v1", true, true, widgetSchema(true)))
	mid := testcrd.New(group, "Widget", testcrd.Version("v1", true, false, widgetSchema(true)), testcrd.Version("v2", true, true, widgetSchema(true)))
	target := testcrd.New(group, "Widget", testcrd.Version("v2", true, true, widgetSchema(false)))
	f := newRunFx(t, live, target, map[string]map[string]any{
		"w-legacy": {"size": int64(1), "legacy": "keep-me"},
		"w-plain":  {"size": int64(2)},
	})
	o := PathOptions{
		Options: Options{ApplyFile: "v0.3.0/", BackupFile: f.backup, Checkpoint: f.cp},
		Via:     []plan.PathRelease{{Name: "v0.2.0", File: "v0.2.0/", CRDs: []*apiextensionsv1.CustomResourceDefinition{mid}}},
		Target:  plan.PathRelease{Name: "v0.3.0", File: "v0.3.0/", CRDs: []*apiextensionsv1.CustomResourceDefinition{target}},
	}
	o.Next = o.Target.CRDs
	return f, o
}

// clusterMark is what a refused run must leave as it was: the CRD's resourceVersion and the
// etcd revision of the objects and the CRD.
func (f *runFx) clusterMark(t *testing.T) string {
	t.Helper()
	_, rev := f.stored(t)
	return f.live(t).ResourceVersion + "/" + strconv.FormatInt(rev, 10)
}

// wroteNothing checks that a refused run left the cluster as clusterMark found it (before)
// and took no backup.
func (f *runFx) wroteNothing(t *testing.T, before string) {
	t.Helper()
	if after := f.clusterMark(t); after != before {
		t.Errorf("the refused path wrote: CRD resourceVersion/etcd revision %s, was %s", after, before)
	}
	if _, err := os.Stat(f.backup); !os.IsNotExist(err) {
		t.Errorf("the refused path wrote a backup (%v)", err)
	}
}

// TestRunPathRefusesALossAtTheSecondHop: the loss at hop 2 refuses the path before any write
// (nothing in etcd changed, no backup, no hop run) and names the hop, the object and the
// field; with AllowDataLoss the path completes, the backup holding the field.
func TestRunPathRefusesALossAtTheSecondHop(t *testing.T) {
	ctx := context.Background()
	f, o := lossAtHop2(t, "hop2loss.run.example.com")
	before := f.clusterMark(t)

	rep, err := RunPath(ctx, f.c, o)
	if !errors.Is(err, ErrRefused) {
		t.Fatalf("RunPath without AllowDataLoss: %v, want ErrRefused", err)
	}
	if rep.Path == nil || len(rep.Path.Hops) != 2 || rep.Path.Hops[0].Release != "v0.2.0" {
		t.Fatalf("path: %+v", rep.Path)
	}
	if rep.Outcome.Result != ResultRefused || rep.Outcome.ExitCode != 1 || !slices.Contains(rep.Outcome.Refusals, plan.KindDataLoss) {
		t.Errorf("outcome %+v, want refused, exit 1, for data-loss", rep.Outcome)
	}
	if len(rep.Hops) != 0 {
		t.Errorf("%d hops ran, want none", len(rep.Hops))
	}
	if len(rep.Preflight) != 2 || len(rep.Preflight[0].Refusals) != 0 {
		t.Fatalf("preflight: %+v, want 2 hops, the first refusing nothing", rep.Preflight)
	}
	hp := rep.Preflight[1]
	if len(hp.DataLoss) != 1 || hp.DataLoss[0].Name != "w-legacy" || !slices.Contains(hp.DataLoss[0].Fields, "spec.legacy") {
		t.Errorf("hop 2's data loss: %+v, want w-legacy losing spec.legacy", hp.DataLoss)
	}
	for _, want := range []string{"hop 2 (v0.3.0)", "w-legacy (spec.legacy)", "--allow-data-loss", "nothing was written"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the refusal does not say %q: %v", want, err)
		}
	}
	f.wroteNothing(t, before)

	o.AllowDataLoss = true
	rep, err = RunPath(ctx, f.c, o)
	if err != nil {
		t.Fatalf("RunPath with AllowDataLoss: %v", err)
	}
	if rep.Outcome.Result != ResultComplete || !rep.Outcome.Applied || len(rep.Hops) != 2 {
		t.Errorf("outcome %+v after %d hops, want complete after 2", rep.Outcome, len(rep.Hops))
	}
	live := f.live(t)
	if !slices.Equal(versionNames(live), []string{"v2"}) || !slices.Equal(live.Status.StoredVersions, []string{"v2"}) {
		t.Errorf("live: versions %v storedVersions %v, want [v2] and [v2]", versionNames(live), live.Status.StoredVersions)
	}
	got, err := f.res("v2").Get(ctx, "w-legacy", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, found, _ := unstructured.NestedFieldNoCopy(got.Object, "spec", "legacy"); found {
		t.Errorf("w-legacy still has spec.legacy: %v", got.Object["spec"])
	}
	b, err := os.ReadFile(f.backup)
	if err != nil || !strings.Contains(string(b), "legacy: keep-me") {
		t.Errorf("the path's backup lacks spec.legacy (%v):\n%s", err, b)
	}
}

// TestRunPathHoldsOneLease: the path holds its CRDs' lease from before the first hop to the
// end of the last: between the hops another run finds it held (each hop's upgrade used to
// release it at its end); a lease another live run holds stops the path before any write.
func TestRunPathHoldsOneLease(t *testing.T) {
	ctx := context.Background()
	f, o := lossAtHop2(t, "hop2lease.run.example.com")
	crd := "widgets.hop2lease.run.example.com"

	// Another run (another machine) holds the CRD: refused before any write.
	now := metav1.NewMicroTime(time.Now())
	holder, secs := "kubectl crdver migrate, pid 1 on elsewhere", int32(60)
	leases := f.c.Kube.CoordinationV1().Leases(migrate.LeaseNamespace)
	if _, err := leases.Create(ctx, &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: migrate.LeaseName(crd), Annotations: map[string]string{"crdver.io/host": "elsewhere", "crdver.io/pid": "1"}},
		Spec:       coordinationv1.LeaseSpec{HolderIdentity: &holder, LeaseDurationSeconds: &secs, AcquireTime: &now, RenewTime: &now},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	before := f.clusterMark(t)
	o.AllowDataLoss = true
	_, err := RunPath(ctx, f.c, o)
	var held *migrate.HeldError
	if !errors.As(err, &held) || held.CRD != crd {
		t.Fatalf("RunPath while another run holds %s: %v, want its HeldError", crd, err)
	}
	if after := f.clusterMark(t); after != before {
		t.Errorf("the path wrote while another run held the lease: %s, was %s", after, before)
	}
	if err := leases.Delete(ctx, migrate.LeaseName(crd), metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}

	// Between the hops, the lease is this run's.
	var between []string
	o.Notify = func(line string) {
		if strings.HasPrefix(line, "hop 2/2") {
			h, err := migrate.LeaseHolder(ctx, f.c, crd)
			switch {
			case err != nil:
				between = append(between, err.Error())
			case h == nil:
				between = append(between, "no run holds the lease")
			case !strings.Contains(h.Holder, "a release path"):
				between = append(between, "held by "+h.Holder)
			default:
				between = append(between, "ok")
			}
		}
	}
	rep, err := RunPath(ctx, f.c, o)
	if err != nil {
		t.Fatalf("RunPath: %v", err)
	}
	if len(rep.Hops) != 2 || rep.Outcome.Result != ResultComplete {
		t.Fatalf("%d hops, outcome %+v", len(rep.Hops), rep.Outcome)
	}
	if !slices.Equal(between, []string{"ok"}) {
		t.Errorf("between hop 1 and hop 2: %v, want the lease held by this path", between)
	}
	if h, err := migrate.LeaseHolder(ctx, f.c, crd); err != nil || h != nil {
		t.Errorf("after the path: holder %v (%v), want the lease released", h, err)
	}
}

// interruptInHop2 runs the path o until its second hop has done its backup step (the path's,
// already taken), then cancels it.
func interruptInHop2(t *testing.T, f *runFx, o PathOptions) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	inHop2 := false
	o.Notify = func(line string) {
		switch {
		case strings.HasPrefix(line, "hop 2/2"):
			inHop2 = true
		case inHop2 && strings.HasPrefix(line, "step 2/"):
			cancel()
		}
	}
	if _, err := RunPath(ctx, f.c, o); !errors.Is(err, ErrInterrupted) {
		t.Fatalf("RunPath cancelled in hop 2: %v, want ErrInterrupted", err)
	}
}

// onlyFile checks that the run's checkpoint is the one file of its folder besides the backup:
// no file per hop beside it.
func onlyFile(t *testing.T, f *runFx, checkpoint string) {
	t.Helper()
	entries, err := os.ReadDir(filepath.Dir(checkpoint))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		if e.Name() != filepath.Base(f.backup) {
			names = append(names, e.Name())
		}
	}
	if !slices.Equal(names, []string{filepath.Base(checkpoint)}) {
		t.Errorf("beside the backup: %v, want the one checkpoint %s", names, filepath.Base(checkpoint))
	}
}

// TestGetPathStatus: a path interrupted in its second hop, after that hop's backup step: the
// status names the path's hops, the hop it is at (2 of 2, v0.3.0) and the step done in it,
// read from the one checkpoint (no file per hop), and says to continue; once the path is run
// again to its end, nothing is left.
func TestGetPathStatus(t *testing.T) {
	f, o := lossAtHop2(t, "hop2status.run.example.com")
	o.AllowDataLoss = true
	interruptInHop2(t, f, o)
	onlyFile(t, f, o.Checkpoint)

	st, err := GetPathStatus(context.Background(), f.c, o.Via, o.Target, o.Checkpoint, "")
	if err != nil {
		t.Fatal(err)
	}
	p := st.Path
	if p == nil || !p.Found || p.NotThisCluster != "" || !slices.Equal(p.Hops, []string{"v0.2.0", "v0.3.0"}) || p.Hop != 2 || p.Release != "v0.3.0" || p.Complete {
		t.Fatalf("path status %+v, want found, hops [v0.2.0 v0.3.0], at hop 2 (v0.3.0)", p)
	}
	if p.Checkpoint != o.Checkpoint || p.HopCheckpoint != o.Checkpoint || st.Checkpoint != o.Checkpoint || !st.Found {
		t.Errorf("checkpoints: path %q, hop %q, status %q (found %v), want %s for each", p.Checkpoint, p.HopCheckpoint, st.Checkpoint, st.Found, o.Checkpoint)
	}
	if len(st.Done) != 1 || !strings.HasPrefix(st.Done[0], plan.ActionBackup+"|") || st.Next != NextContinue {
		t.Errorf("hop 2: done %v, next %s; want its backup step done and continue", st.Done, st.Next)
	}
	if len(st.CRDs) != 1 || !slices.Equal(st.CRDs[0].Extra, []string{"v1"}) {
		t.Errorf("hop 2's CRD as the cluster has it: %+v, want v1 still to remove", st.CRDs)
	}

	o.Notify = nil
	if _, err := RunPath(context.Background(), f.c, o); err != nil {
		t.Fatalf("RunPath again: %v", err)
	}
	st, err = GetPathStatus(context.Background(), f.c, o.Via, o.Target, o.Checkpoint, "")
	if err != nil {
		t.Fatal(err)
	}
	if !st.Path.Complete || st.Path.Hop != 0 || st.Next != NextNothing {
		t.Errorf("after the path: %+v, next %s; want complete, nothing", st.Path, st.Next)
	}
	onlyFile(t, f, o.Checkpoint)
}

// TestRunPathResumesTheLayoutOfEarlierBuilds: a path interrupted in its second hop, its
// checkpoint then written as an earlier build kept it — the path's file (its binding and hops,
// "done": [], no layout) and hop 2's steps in CHECKPOINT.hop2, bound to that hop's release —:
// the status reads hop 2's steps from the hop's file, the same command resumes hop 2 with them
// and ends complete, writing the one file in this build's layout and leaving the hop's file as
// it was.
func TestRunPathResumesTheLayoutOfEarlierBuilds(t *testing.T) {
	f, o := lossAtHop2(t, "oldlayout.run.example.com")
	o.AllowDataLoss = true
	interruptInHop2(t, f, o)
	var now state
	if b, err := os.ReadFile(o.Checkpoint); err != nil || json.Unmarshal(b, &now) != nil {
		t.Fatalf("reading %s: %v", o.Checkpoint, err)
	}
	if now.Layout != layoutOneFile || now.Hop != 1 || len(now.Done) != 1 || now.Backup == nil {
		t.Fatalf("the checkpoint in hop 2: layout %d, hop %d, done %v, backup %v; want %d, 1, its backup step, the path's backup", now.Layout, now.Hop, now.Done, now.Backup, layoutOneFile)
	}
	crd := o.Target.CRDs[0].Name
	old := now
	old.Layout, old.steps = 0, steps{Done: []string{}}
	hop := state{binding: binding{Release: releaseKey(f.c.Server, o.Target.CRDs), Cluster: now.Cluster, Server: now.Server,
		CRDs: map[string]string{crd: now.CRDs[crd]}, BackupFile: now.BackupFile}, steps: now.steps}
	hopFile := o.Checkpoint + ".hop2"
	var hopBody []byte
	for file, s := range map[string]*state{o.Checkpoint: &old, hopFile: &hop} {
		b, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(b), `"layout"`) {
			t.Fatalf("the earlier layout has no layout field: %s", b)
		}
		if err := os.WriteFile(file, b, 0o600); err != nil {
			t.Fatal(err)
		}
		if file == hopFile {
			hopBody = b
		}
	}

	st, err := GetPathStatus(context.Background(), f.c, o.Via, o.Target, o.Checkpoint, "")
	if err != nil {
		t.Fatal(err)
	}
	if st.Path == nil || st.Path.Hop != 2 || !slices.Equal(st.Done, now.Done) || st.Next != NextContinue || st.Backup == nil {
		t.Errorf("status of the earlier layout: path %+v, done %v, next %s, backup %v; want hop 2, done %v (from %s), continue, the path's backup", st.Path, st.Done, st.Next, st.Backup, now.Done, hopFile)
	}

	rep, err := RunPath(context.Background(), f.c, o)
	if err != nil {
		t.Fatalf("RunPath from the earlier layout: %v", err)
	}
	if !rep.Resumed || rep.StartHop != 2 || len(rep.Hops) != 1 || !rep.Hops[0].Resumed || rep.Outcome.Result != ResultComplete {
		t.Errorf("resumed %v at hop %d, %d hops (the hop resumed: %v), outcome %+v; want hop 2 resumed with its steps, complete", rep.Resumed, rep.StartHop, len(rep.Hops), len(rep.Hops) > 0 && rep.Hops[0].Resumed, rep.Outcome)
	}
	live := f.live(t)
	if !slices.Equal(versionNames(live), []string{"v2"}) || !slices.Equal(live.Status.StoredVersions, []string{"v2"}) {
		t.Errorf("live: versions %v storedVersions %v, want [v2] and [v2]", versionNames(live), live.Status.StoredVersions)
	}
	var after state
	if b, err := os.ReadFile(o.Checkpoint); err != nil || json.Unmarshal(b, &after) != nil {
		t.Fatalf("reading %s: %v", o.Checkpoint, err)
	}
	if after.Layout != layoutOneFile || !after.Complete || !slices.Equal(after.Hops, []string{"v0.2.0", "v0.3.0"}) {
		t.Errorf("the checkpoint after: layout %d, complete %v, hops %v; want %d, complete, both hops", after.Layout, after.Complete, after.Hops, layoutOneFile)
	}
	if b, err := os.ReadFile(hopFile); err != nil || string(b) != string(hopBody) {
		t.Errorf("the earlier build's %s was changed (%v): %s", hopFile, err, b)
	}
	if b, err := os.ReadFile(f.backup); err != nil || !strings.Contains(string(b), "legacy: keep-me") {
		t.Errorf("the path's backup lacks spec.legacy (%v)", err)
	}
}

// TestAPathOfOneHopIsTheReleaseRun: a path of one hop is the release's own run, with one
// checkpoint: interrupted in its hop, the release's status (no path) reads the hop's steps from
// it, and the release's own upgrade resumes it to its end, which ends the path too: run again,
// the path has nothing to resume, finds its one hop in place and is complete, as its status
// says.
func TestAPathOfOneHopIsTheReleaseRun(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", t.TempDir()) // the default checkpoints
	group := "onehop.run.example.com"
	live := testcrd.New(group, "Widget", testcrd.Version("v1", true, true, widgetSchema(true)))
	next := testcrd.New(group, "Widget", testcrd.Version("v1", true, false, widgetSchema(true)), testcrd.Version("v2", true, true, widgetSchema(true)))
	f := newRunFx(t, live, next, map[string]map[string]any{"w-one": {"size": int64(1)}, "w-two": {"size": int64(2)}})
	target := plan.PathRelease{Name: "v0.2.0", File: "v0.2.0/", CRDs: []*apiextensionsv1.CustomResourceDefinition{next}}
	o := PathOptions{Options: Options{ApplyFile: target.File, BackupFile: f.backup}, Target: target}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	o.Notify = func(line string) {
		if strings.HasPrefix(line, "step 1/") {
			cancel()
		}
	}
	if _, err := RunPath(ctx, f.c, o); !errors.Is(err, ErrInterrupted) {
		t.Fatalf("RunPath cancelled after its hop's first step: %v, want ErrInterrupted", err)
	}
	st, err := GetStatus(context.Background(), f.c, target.CRDs, "", "")
	if err != nil {
		t.Fatal(err)
	}
	if !st.Found || len(st.Done) != 1 || st.Next != NextContinue {
		t.Fatalf("the release's status after the path's hop stopped: found %v, done %v, next %s; want its first step done, continue", st.Found, st.Done, st.Next)
	}

	rep, err := Run(context.Background(), f.c, Options{Next: target.CRDs, ApplyFile: target.File, BackupFile: f.backup})
	if err != nil {
		t.Fatalf("Run of the hop's release: %v", err)
	}
	if !rep.Resumed || rep.Checkpoint != st.Checkpoint || rep.Outcome.Result != ResultComplete {
		t.Errorf("Run of the hop's release: resumed %v from %s (status read %s), outcome %+v; want the hop's run resumed to its end", rep.Resumed, rep.Checkpoint, st.Checkpoint, rep.Outcome)
	}

	o.Notify = nil
	prep, err := RunPath(context.Background(), f.c, o)
	if err != nil {
		t.Fatalf("RunPath again: %v", err)
	}
	if len(prep.Hops) != 1 {
		t.Fatalf("RunPath again: %d hops, want 1", len(prep.Hops))
	}
	if prep.Resumed || prep.Checkpoint != st.Checkpoint || prep.Hops[0].AlreadyInPlace == "" || !prep.Outcome.Applied {
		t.Errorf("RunPath again: resumed %v from %s, in place %q, outcome %+v; want nothing to resume in %s (the release's run completed it), its one hop found in place", prep.Resumed, prep.Checkpoint, prep.Hops[0].AlreadyInPlace, prep.Outcome, st.Checkpoint)
	}
	ps, err := GetPathStatus(context.Background(), f.c, nil, target, "", "")
	if err != nil {
		t.Fatal(err)
	}
	if ps.Path == nil || !ps.Path.Complete || ps.Next != NextNothing || ps.Checkpoint != st.Checkpoint {
		t.Errorf("the path's status: %+v, next %s, hop checkpoint %s; want complete, nothing, %s", ps.Path, ps.Next, ps.Checkpoint, st.Checkpoint)
	}
}

// TestAPathOfOneReleaseFromAnEarlierBuild: an earlier build gave a path of one release a key of
// its own (chainKey) and kept its hop's steps in CHECKPOINT.hop1; that path is now the
// release's run, keyed as the release: its status reads the hop's steps from the hop's file.
func TestAPathOfOneReleaseFromAnEarlierBuild(t *testing.T) {
	group := "oldonehop.run.example.com"
	live := testcrd.New(group, "Widget", testcrd.Version("v1", true, true, widgetSchema(true)))
	next := testcrd.New(group, "Widget", testcrd.Version("v1", true, false, widgetSchema(true)), testcrd.Version("v2", true, true, widgetSchema(true)))
	f := newRunFx(t, live, next, map[string]map[string]any{"w-one": {"size": int64(1)}})
	target := plan.PathRelease{Name: "v0.2.0", File: "v0.2.0/", CRDs: []*apiextensionsv1.CustomResourceDefinition{next}}
	cluster := f.c.ClusterID(context.Background())
	uids := map[string]string{next.Name: string(f.live(t).UID)}
	done := []string{plan.ActionBackup + "|" + next.Name + "||"}
	path := state{binding: binding{Release: chainKey(f.c.Server, []plan.PathRelease{target}), Cluster: cluster, Server: f.c.Server, CRDs: uids, BackupFile: f.backup},
		Hops: []string{target.Name}, steps: steps{Done: []string{}}}
	hop := state{binding: binding{Release: releaseKey(f.c.Server, target.CRDs), Cluster: cluster, Server: f.c.Server, CRDs: uids, BackupFile: f.backup}, steps: steps{Done: done}}
	for file, s := range map[string]*state{f.cp: &path, f.cp + ".hop1": &hop} {
		b, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(file, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	st, err := GetPathStatus(context.Background(), f.c, nil, target, f.cp, "")
	if err != nil {
		t.Fatal(err)
	}
	if st.Path == nil || !st.Path.Found || st.Path.NotThisCluster != "" || st.Path.Hop != 1 || !slices.Equal(st.Done, done) || st.Next != NextContinue {
		t.Errorf("status of an earlier build's path of one release: path %+v, done %v, next %s; want found, at hop 1, done %v, continue", st.Path, st.Done, st.Next, done)
	}
}
