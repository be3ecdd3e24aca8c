package migrate

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	crdinfo "github.com/crdver/kubectl-crdver/crd"
	ended "github.com/crdver/kubectl-crdver/outcome"
)

// recorder is what a Go program using the library without any command line plugs into a
// Migrator: it answers the question and records what it was told.
type recorder struct {
	mu        sync.Mutex
	answer    bool
	planned   []*Plan
	asked     int
	started   []int64
	stopped   int
	lastCount Counts
	events    []Event
}

func (r *recorder) plug(m *Migrator) {
	m.Planned = func(p *Plan) { r.mu.Lock(); defer r.mu.Unlock(); r.planned = append(r.planned, p) }
	m.Confirm = func(context.Context, *Plan) (bool, error) {
		r.mu.Lock()
		defer r.mu.Unlock()
		r.asked++
		return r.answer, nil
	}
	m.Progress = func(total int64, counts func() Counts) func() {
		r.mu.Lock()
		r.started = append(r.started, total)
		r.mu.Unlock()
		return func() { r.mu.Lock(); defer r.mu.Unlock(); r.stopped++; r.lastCount = counts() }
	}
	m.Event = func(e Event) { r.mu.Lock(); defer r.mu.Unlock(); r.events = append(r.events, e) }
}

// The whole workflow through the library: plan, confirmation, storage switch, rewrite, trim.
func TestMigratorSwitchRewriteTrim(t *testing.T) {
	const n = 40
	f := newFixture(t, "migrator", n, true)
	rec := &recorder{answer: true}
	m := &Migrator{Clients: f.clients, Options: Options{To: "v1",
		Rewrite: RewriteOptions{Concurrency: 4, ChunkSize: 7, Checkpoint: filepath.Join(t.TempDir(), "cp.json")}}}
	rec.plug(m)
	report, err := m.Run(context.Background(), f.crd)
	if err != nil {
		t.Fatal(err)
	}
	if len(rec.planned) != 1 || !rec.planned[0].SwitchStorage || rec.planned[0].Objects != n || rec.planned[0].StorageVersion != "v1beta1" {
		t.Fatalf("planned %+v, want one plan switching from v1beta1 with %d objects", rec.planned, n)
	}
	if rec.asked != 1 {
		t.Errorf("asked %d times before the storage switch, want once", rec.asked)
	}
	if diff := cmp.Diff([]int64{n}, rec.started); diff != "" || rec.stopped != 1 || rec.lastCount.Total() != n {
		t.Errorf("progress started %v (-want +got %s), stopped %d times at %+v; want once, %d objects", rec.started, diff, rec.stopped, rec.lastCount, n)
	}
	if len(rec.events) != 1 || rec.events[0].Kind != EventStorageSwitched || rec.events[0].Version != "v1" {
		t.Errorf("events = %+v, want one StorageSwitched to v1", rec.events)
	}
	if r := report.Result; r == nil || !r.Complete || r.Rewritten != n || r.Failed != 0 || r.StorageVersion != "v1" {
		t.Fatalf("result = %+v, want complete with %d rewritten at v1", report.Result, n)
	}
	if tr := report.Trim; tr == nil || !tr.Trimmed || !tr.Safe || !cmp.Equal(tr.After, []string{"v1"}) {
		t.Fatalf("trim = %+v, want storedVersions trimmed to [v1]", report.Trim)
	}
	stored, _ := etcdVersions(t, f.group, "widgets")
	if diff := cmp.Diff(map[string]int{f.group + "/v1": n}, stored); diff != "" {
		t.Errorf("etcd (-want +got):\n%s", diff)
	}
	if got := crdinfo.StorageVersion(f.get(t)); got != "v1" {
		t.Errorf("storage version = %s, want v1", got)
	}
}

// No answer, no switch: nothing is written, and the error says which step stopped.
func TestMigratorNotConfirmedWritesNothing(t *testing.T) {
	f := newFixture(t, "noconfirm", 5, true)
	rec := &recorder{answer: false}
	m := &Migrator{Clients: f.clients, Options: Options{To: "v1", Rewrite: RewriteOptions{Checkpoint: filepath.Join(t.TempDir(), "cp.json")}}}
	rec.plug(m)
	report, err := m.Run(context.Background(), f.crd)
	var se *StepError
	if !errors.Is(err, ErrNotConfirmed) || !errors.As(err, &se) || se.Step != StepConfirm {
		t.Fatalf("err = %v, want a StepConfirm error wrapping ErrNotConfirmed", err)
	}
	if report == nil || report.Result != nil || report.Trim != nil || len(rec.started) != 0 {
		t.Errorf("report %+v, progress %v: want a plan only", report, rec.started)
	}
	if got := crdinfo.StorageVersion(f.get(t)); got != "v1beta1" {
		t.Errorf("storage version = %s, want v1beta1 untouched", got)
	}
	stored, _ := etcdVersions(t, f.group, "widgets")
	if stored[f.group+"/v1beta1"] != 5 {
		t.Errorf("etcd = %v, want all 5 still at v1beta1", stored)
	}
}

// A dry run plans and writes nothing; a target the CRD does not have is refused before
// anything, with the one wording of package crd.
func TestMigratorDryRunAndUnknownTarget(t *testing.T) {
	f := newFixture(t, "dryrun", 3, true)
	rec := &recorder{answer: true}
	m := &Migrator{Clients: f.clients, Options: Options{To: "v1", DryRun: true}}
	rec.plug(m)
	report, err := m.Run(context.Background(), f.crd)
	if err != nil || !report.DryRun || report.Plan == nil || report.Result != nil || rec.asked != 0 || len(rec.started) != 0 {
		t.Fatalf("dry run: report %+v, err %v, asked %d: want a plan and nothing else", report, err, rec.asked)
	}
	if got := crdinfo.StorageVersion(f.get(t)); got != "v1beta1" {
		t.Errorf("a dry run changed the storage version to %s", got)
	}

	m = &Migrator{Clients: f.clients, Options: Options{To: "v9"}}
	rec = &recorder{answer: true}
	rec.plug(m)
	if report.Outcome.Kind() != ended.OK {
		t.Errorf("dry run: outcome %+v, want ok", report.Outcome)
	}
	report, err = m.Run(context.Background(), f.crd)
	var nf *crdinfo.VersionNotFoundError
	if !errors.As(err, &nf) || !strings.Contains(err.Error(), `version "v9" is not in spec.versions (have: v1, v1beta1)`) || len(rec.planned) != 0 {
		t.Fatalf("unknown target: err %v, planned %d; want a VersionNotFoundError before any plan", err, len(rec.planned))
	}
	if report.Outcome.Kind() != ended.Usage {
		t.Errorf("unknown target: outcome %+v, want usage (exit 2)", report.Outcome)
	}
}

// Objects an admission webhook refuses are listed, the others rewritten, and
// status.storedVersions is never trimmed after such failures.
func TestMigratorNeverTrimsAfterFailures(t *testing.T) {
	const n = 12
	f := newFixture(t, "failures", n, false)
	env.RejectUpdates(t, f.gvr("v1beta1"), f.ns[1], "widget-00001", func(_, name string) string {
		if strings.HasSuffix(name, "1") {
			return "widgets ending in 1 are frozen"
		}
		return ""
	})
	m := &Migrator{Clients: f.clients, Options: Options{Rewrite: RewriteOptions{Checkpoint: filepath.Join(t.TempDir(), "cp.json")}}}
	report, err := m.Run(context.Background(), f.get(t))
	if err != nil {
		t.Fatal(err)
	}
	if report.Failed() != 2 || report.Result.Rewritten != n-2 {
		t.Fatalf("result = %+v, want 2 failed (widget-00001, widget-00011) and %d rewritten", report.Result, n-2)
	}
	for _, fl := range report.Result.Failures {
		if !strings.Contains(fl.Reason, "frozen") {
			t.Errorf("failure %+v does not carry the webhook's reason", fl)
		}
	}
	if tr := report.Trim; tr == nil || tr.Trimmed || tr.Safe || !strings.Contains(tr.Reason, "2 objects could not be rewritten") {
		t.Fatalf("trim = %+v, want not trimmed because 2 objects failed", report.Trim)
	}
	if out := report.Outcome; out.Kind() != ended.Findings || !strings.Contains(out.Message, "2 objects could not be rewritten (listed above)") {
		t.Errorf("outcome %+v, want findings naming the 2 objects not rewritten", out)
	}
	if got := f.get(t).Status.StoredVersions; len(got) != 2 {
		t.Errorf("storedVersions = %v, want [v1beta1 v1] untouched", got)
	}
}
