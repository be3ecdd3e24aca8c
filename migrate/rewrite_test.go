package migrate

import (
	"context"
	"fmt"
	"math/rand"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"

	crdinfo "github.com/crdver/kubectl-crdver/crd"
)

func TestRewriteStoresEveryObjectAtStorageVersionThenTrims(t *testing.T) {
	ctx := context.Background()
	const n = 300
	f := newFixture(t, "basic", n, false)

	before, _ := etcdVersions(t, f.group, "widgets")
	if diff := cmp.Diff(map[string]int{f.group + "/v1beta1": n}, before); diff != "" {
		t.Fatalf("before the run, etcd should hold every object at v1beta1 (-want +got):\n%s", diff)
	}
	if got := f.get(t).Status.StoredVersions; !slices.Equal(got, []string{"v1beta1", "v1"}) {
		t.Fatalf("storedVersions after the switch = %v, want [v1beta1 v1]", got)
	}

	plan, err := BuildPlan(ctx, f.clients, f.get(t), "", 40, true)
	if err != nil {
		t.Fatal(err)
	}
	if plan.Objects != n || len(plan.Namespaces) != 3 || plan.Namespaces[0].Objects != n/3 || plan.TargetVersion != "v1" {
		t.Errorf("plan = %+v, want %d objects in 3 namespaces of %d, target v1", plan, n, n/3)
	}

	cpPath := filepath.Join(t.TempDir(), "cp.json")
	res, err := newRewriter(t, f, RewriteOptions{Concurrency: 8, ChunkSize: 40, Checkpoint: cpPath}).Run(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := Counts{Rewritten: n}
	if diff := cmp.Diff(want, res.Counts); diff != "" || !res.Complete || res.Interrupted {
		t.Fatalf("counts (-want +got):\n%s\ncomplete=%v interrupted=%v failures=%v", diff, res.Complete, res.Interrupted, res.Failures)
	}
	after, _ := etcdVersions(t, f.group, "widgets")
	if diff := cmp.Diff(map[string]int{f.group + "/v1": n}, after); diff != "" {
		t.Fatalf("after the run, etcd should hold every object at v1 (-want +got):\n%s", diff)
	}
	cp, err := LoadCheckpoint(cpPath)
	if err != nil || cp == nil || cp.State != StateComplete || cp.Counts.Rewritten != n {
		t.Fatalf("checkpoint after a complete run = %+v, %v; want state complete with %d rewritten", cp, err, n)
	}
	st, err := GetStatus(f.get(t), f.clients.Server, cpPath)
	if err != nil || !st.TrimSafe || !st.Pending {
		t.Errorf("status before the trim = %+v, %v; want pending and safe to trim", st, err)
	}
	// The same CRD name at the same address, another CRD object (another cluster behind the
	// address, or the CRD created again): the record is not this CRD's.
	other := f.get(t)
	other.UID = "00000000-0000-0000-0000-000000000001"
	if st, err := GetStatus(other, f.clients.Server, cpPath); err != nil || st.LastRun != nil || st.TrimSafe || st.Next != NextMigrate {
		t.Errorf("status of another CRD object with this checkpoint = %+v, %v; want no last run, not safe to trim, next migrate", st, err)
	}

	tr, err := Trim(ctx, f.clients, EvidenceOf(res))
	if err != nil {
		t.Fatal(err)
	}
	if !tr.Trimmed || !slices.Equal(tr.After, []string{"v1"}) {
		t.Fatalf("trim = %+v, want trimmed to [v1]", tr)
	}
	if got := f.get(t).Status.StoredVersions; !slices.Equal(got, []string{"v1"}) {
		t.Fatalf("storedVersions read back = %v, want [v1]", got)
	}

	// A second run finds every object current: the API server skips identical writes.
	res2, err := newRewriter(t, f, RewriteOptions{Concurrency: 8, ChunkSize: 40}).Run(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(Counts{Current: n}, res2.Counts); diff != "" {
		t.Errorf("second run counts (-want +got):\n%s", diff)
	}
}

func TestTrimRefusesWithoutProof(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, "refuse", 5, false)
	crd := f.get(t)
	base := Evidence{CRD: crd.Name, UID: string(crd.UID), StorageVersion: "v1", Generation: crd.Generation, Complete: true, Engine: "this run"}
	for _, tc := range []struct {
		name   string
		change func(*Evidence)
		want   string
	}{
		{"failed objects", func(e *Evidence) { e.Failed = 2 }, "2 objects could not be rewritten"},
		{"incomplete", func(e *Evidence) { e.Complete = false }, "did not reach every object"},
		{"storage changed", func(e *Evidence) { e.StorageVersion = "v1beta1" }, "storage version changed"},
		{"spec changed", func(e *Evidence) { e.Generation-- }, "spec changed"},
		{"recreated", func(e *Evidence) { e.UID = "other" }, "deleted and created again"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ev := base
			tc.change(&ev)
			tr, err := Trim(ctx, f.clients, ev)
			if err != nil {
				t.Fatal(err)
			}
			if tr.Trimmed || tr.Safe || !strings.Contains(tr.Reason, tc.want) {
				t.Errorf("trim = %+v, want refused with a reason containing %q", tr, tc.want)
			}
			if got := f.get(t).Status.StoredVersions; !slices.Equal(got, []string{"v1beta1", "v1"}) {
				t.Errorf("storedVersions = %v, want them untouched", got)
			}
		})
	}
}

func TestRewriteWithConcurrentWriters(t *testing.T) {
	ctx := context.Background()
	const n = 450
	f := newFixture(t, "writers", n, false)

	// Writers update (through the old version, v1beta1) and delete objects while the rewrite
	// runs, and create new ones.
	var (
		stop      atomic.Bool
		wg        sync.WaitGroup
		updated   sync.Map // name -> color written
		deleted   sync.Map
		created   atomic.Int64
		writerErr atomic.Value
	)
	for w := 0; w < 3; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			rnd := rand.New(rand.NewSource(int64(w)))
			for i := 0; !stop.Load(); i++ {
				k := rnd.Intn(n)
				name := fmt.Sprintf("widget-%05d", k)
				ri := f.dyn.Resource(f.gvr("v1beta1")).Namespace(f.ns[k%len(f.ns)])
				switch {
				case w == 0 && i%5 == 4: // delete
					if err := ri.Delete(ctx, name, metav1.DeleteOptions{}); err == nil {
						deleted.Store(name, true)
					}
				case w == 2 && i%3 == 0: // create a new one
					obj := &unstructured.Unstructured{Object: map[string]any{
						"apiVersion": f.group + "/v1beta1", "kind": "Widget",
						"metadata": map[string]any{"name": fmt.Sprintf("new-%d-%d", w, i), "namespace": f.ns[0]},
						"spec":     map[string]any{"size": int64(1)},
					}}
					if _, err := f.dyn.Resource(f.gvr("v1beta1")).Namespace(f.ns[0]).Create(ctx, obj, metav1.CreateOptions{}); err == nil {
						created.Add(1)
					}
				default: // update
					obj, err := ri.Get(ctx, name, metav1.GetOptions{})
					if err != nil {
						continue
					}
					color := fmt.Sprintf("red-%d-%d", w, i)
					_ = unstructured.SetNestedField(obj.Object, color, "spec", "color")
					if _, err := ri.Update(ctx, obj, metav1.UpdateOptions{}); err == nil {
						updated.Store(name, color)
					} else if !apierrors.IsConflict(err) && !apierrors.IsNotFound(err) {
						writerErr.Store(err)
					}
				}
			}
		}(w)
	}
	time.Sleep(200 * time.Millisecond)
	res, err := newRewriter(t, f, RewriteOptions{Concurrency: 4, ChunkSize: 30, QPS: 300}).Run(ctx)
	stop.Store(true)
	wg.Wait()
	if err != nil {
		t.Fatal(err)
	}
	if e := writerErr.Load(); e != nil {
		t.Fatalf("a writer failed: %v", e)
	}
	if res.Failed != 0 || !res.Complete {
		t.Fatalf("result = %+v, want complete with no failures", res)
	}
	// The list is a consistent snapshot taken after the writers started: each object in it
	// is counted exactly once.
	// Bounds: objects deleted or created by the writers before the snapshot may be missing or extra.
	if lo, hi := int64(n)-countMap(&deleted), int64(n)+created.Load(); res.Total() < lo || res.Total() > hi {
		t.Errorf("counts %+v add up to %d, want between %d and %d", res.Counts, res.Total(), lo, hi)
	}
	t.Logf("counts %+v; writers updated %d, deleted %d, created %d", res.Counts, countMap(&updated), countMap(&deleted), created.Load())

	stored, _ := etcdVersions(t, f.group, "widgets")
	wantTotal := n - int(countMap(&deleted)) + int(created.Load())
	if diff := cmp.Diff(map[string]int{f.group + "/v1": wantTotal}, stored); diff != "" {
		t.Fatalf("etcd (-want +got):\n%s", diff)
	}
	// Nothing lost: every update a writer made is still there.
	updated.Range(func(k, v any) bool {
		name := k.(string)
		if _, gone := deleted.Load(name); gone {
			return true
		}
		var idx int
		fmt.Sscanf(name, "widget-%05d", &idx)
		obj, err := f.dyn.Resource(f.gvr("v1")).Namespace(f.ns[idx%len(f.ns)]).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Errorf("%s: %v", name, err)
			return true
		}
		got, _, _ := unstructured.NestedString(obj.Object, "spec", "color")
		// Another writer may have updated it later; what it holds must be some writer's value.
		if got == "blue" {
			t.Errorf("%s: spec.color = %q, the writers' update (%v) was lost", name, got, v)
		}
		return true
	})
	tr, err := Trim(ctx, f.clients, EvidenceOf(res))
	if err != nil || !tr.Trimmed {
		t.Errorf("trim = %+v, %v; want trimmed", tr, err)
	}
}

func TestInterruptedRunResumesFromCheckpoint(t *testing.T) {
	ctx := context.Background()
	const n = 600
	f := newFixture(t, "resume", n, false)
	cpPath := filepath.Join(t.TempDir(), "cp.json")

	runCtx, cancel := context.WithCancel(ctx)
	r1 := newRewriter(t, f, RewriteOptions{Concurrency: 4, ChunkSize: 50, QPS: 150, Checkpoint: cpPath})
	go func() {
		deadline := time.Now().Add(time.Minute)
		for r1.Progress().Total() < 200 && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
		cancel()
	}()
	res1, err := r1.Run(runCtx)
	if err != nil {
		t.Fatal(err)
	}
	if !res1.Interrupted || res1.Complete {
		t.Fatalf("first run = %+v, want interrupted and not complete", res1)
	}
	cp, err := LoadCheckpoint(cpPath)
	if err != nil || cp == nil || cp.State != StateRunning || cp.Continue == "" || cp.Pages == 0 {
		t.Fatalf("checkpoint after the interruption = %+v, %v; want a running checkpoint with a continue token", cp, err)
	}
	mid, _ := etcdVersions(t, f.group, "widgets")
	if mid[f.group+"/v1"] < int(cp.Counts.Rewritten) || mid[f.group+"/v1beta1"] == 0 {
		t.Fatalf("etcd after the interruption = %v, checkpoint %+v: want some objects left at v1beta1", mid, cp.Counts)
	}
	if tr, err := Trim(ctx, f.clients, EvidenceOf(res1)); err != nil || tr.Trimmed {
		t.Fatalf("an interrupted run must not trim: %+v, %v", tr, err)
	}

	res2, err := newRewriter(t, f, RewriteOptions{Concurrency: 4, ChunkSize: 50, Checkpoint: cpPath}).Run(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !res2.Resumed || !res2.Complete || res2.Failed != 0 {
		t.Fatalf("resumed run = %+v, want resumed and complete", res2)
	}
	// Every object counted once: the pages finished before the interruption come from the
	// checkpoint, the rest from the resumed run (objects of the unfinished page that the first
	// run had already rewritten come back as current).
	if res2.Total() != n || res2.Rewritten+res2.Current != n {
		t.Errorf("resumed counts %+v add up to %d, want %d", res2.Counts, res2.Total(), n)
	}
	if res2.Current > 2*50 {
		t.Errorf("resumed run found %d objects current: it should only redo the unfinished pages", res2.Current)
	}
	stored, _ := etcdVersions(t, f.group, "widgets")
	if diff := cmp.Diff(map[string]int{f.group + "/v1": n}, stored); diff != "" {
		t.Fatalf("etcd after the resumed run (-want +got):\n%s", diff)
	}
	if tr, err := Trim(ctx, f.clients, EvidenceOf(res2)); err != nil || !tr.Trimmed {
		t.Fatalf("trim after the resumed run = %+v, %v; want trimmed", tr, err)
	}
}

func countMap(m *sync.Map) int64 {
	var n int64
	m.Range(func(any, any) bool { n++; return true })
	return n
}

// A checkpoint whose continue token has expired (etcd compacted past it, as happens minutes
// after a run is interrupted) resumes from the inconsistent continue token the 410 carries:
// after the pages already done, not from the beginning.
func TestResumeAfterCompactionFollowsInconsistentContinue(t *testing.T) {
	ctx := context.Background()
	const n, page = 100, 10
	f := newFixture(t, "compact", n, false)
	crd := f.get(t)

	// A checkpoint that says the first page is done (it is not: those objects stay at
	// v1beta1, which shows where the resumed run started).
	first, err := f.dyn.Resource(f.gvr("v1")).List(ctx, metav1.ListOptions{Limit: page})
	if err != nil {
		t.Fatal(err)
	}
	cpPath := filepath.Join(t.TempDir(), "cp.json")
	cp := &Checkpoint{Server: f.clients.Server, CRD: crd.Name, UID: string(crd.UID), StorageVersion: "v1", Generation: crd.Generation,
		State: StateRunning, Continue: first.GetContinue(), Pages: 1, StartedAt: time.Now()}
	if err := cp.Save(cpPath); err != nil {
		t.Fatal(err)
	}

	// Move etcd on and compact it: the token's revision is gone.
	f.createObjects(t, f.group, "v1", n, n+1)
	if _, err := env.Compact(ctx); err != nil {
		t.Fatal(err)
	}
	// Bounded wait until the API server refuses the token.
	var lastErr error
	if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 20*time.Second, true, func(ctx context.Context) (bool, error) {
		_, lastErr = f.dyn.Resource(f.gvr("v1")).List(ctx, metav1.ListOptions{Limit: page, Continue: first.GetContinue()})
		return apierrors.IsResourceExpired(lastErr) || apierrors.IsGone(lastErr), nil
	}); err != nil {
		t.Fatalf("listing with the old continue token after compaction: err = %v, want 410 Gone", lastErr)
	}

	res, err := newRewriter(t, f, RewriteOptions{Concurrency: 4, ChunkSize: page, Checkpoint: cpPath}).Run(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !res.Resumed || !res.Complete || res.ExpiredContinues != 1 {
		t.Fatalf("result = %+v, want resumed, complete, one expired continue token followed", res)
	}
	// The 90 objects after the first page were rewritten; the one created after the snapshot at
	// v1 may or may not be in the (inconsistent) rest of the list, and is current if it is.
	if res.Rewritten != n-page || res.Failed != 0 {
		t.Errorf("counts = %+v, want %d rewritten", res.Counts, n-page)
	}
	stored, _ := etcdVersions(t, f.group, "widgets")
	if diff := cmp.Diff(map[string]int{f.group + "/v1": n - page + 1, f.group + "/v1beta1": page}, stored); diff != "" {
		t.Errorf("etcd (-want +got):\n%s", diff)
	}
}

func TestRewriteClusterScoped(t *testing.T) {
	ctx := context.Background()
	const n = 25
	crd := twoVersionCRD("scoped.migrate.example.com", "gizmos", "Gizmo")
	crd.Spec.Scope = apiextensionsv1.ClusterScoped
	env.CreateCRDForTest(t, crd)
	c, err := NewClients(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	gvr := crdinfo.GVR(crd, "v1beta1")
	for i := 0; i < n; i++ {
		obj := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": crd.Spec.Group + "/v1beta1", "kind": "Gizmo",
			"metadata": map[string]any{"name": fmt.Sprintf("gizmo-%02d", i)},
		}}
		if _, err := c.Dynamic.Resource(gvr).Create(ctx, obj, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	switched, err := SwitchStorage(ctx, c, crd.Name, "v1")
	if err != nil {
		t.Fatal(err)
	}
	plan, err := BuildPlan(ctx, c, switched, "", 10, true)
	if err != nil || plan.Objects != n || plan.Namespaced {
		t.Fatalf("plan = %+v, %v", plan, err)
	}
	r, err := NewRewriter(c, switched, RewriteOptions{ChunkSize: 10})
	if err != nil {
		t.Fatal(err)
	}
	res, err := r.Run(ctx)
	if err != nil || res.Rewritten != n || !res.Complete {
		t.Fatalf("result = %+v, %v", res, err)
	}
	stored, _ := etcdVersions(t, crd.Spec.Group, "gizmos")
	if diff := cmp.Diff(map[string]int{crd.Spec.Group + "/v1": n}, stored); diff != "" {
		t.Errorf("etcd (-want +got):\n%s", diff)
	}
}
