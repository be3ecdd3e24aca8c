package preflight

import (
	"context"
	"errors"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	"github.com/crdver/kubectl-crdver/internal/testenv"
)

// dryRunCounter counts the dry-run writes that reach the API server.
type dryRunCounter struct {
	rt http.RoundTripper
	n  *atomic.Int64
}

func (c dryRunCounter) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Method == http.MethodPut && r.URL.Query().Get("dryRun") == "All" {
		c.n.Add(1)
	}
	return c.rt.RoundTrip(r)
}

// countingClient is a dynamic client with no client-side rate limit (as the commands give the
// preflight) whose dry-run writes are counted.
func countingClient(t *testing.T) (dynamic.Interface, *atomic.Int64) {
	t.Helper()
	cfg := rest.CopyConfig(env.Config)
	cfg.QPS, cfg.Burst = -1, 0
	n := &atomic.Int64{}
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { return dryRunCounter{rt: rt, n: n} })
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return dyn, n
}

// The dry-run pass streams its writes through the rewrite's gate: adaptive by default, fixed
// with Concurrency, one dry run per object, nothing written; Ctrl-C (ctx cancelled) in the
// middle of it ends the check within a second with the context's error.
func TestDryRunPass(t *testing.T) {
	ctx := context.Background()
	crd := testenv.TwoVersionCRD("dryrun.preflight.example.com", "gadgets", "Gadget", apiextensionsv1.JSONSchemaProps{
		Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{"size": {Type: "integer"}}})
	setup(t, crd, "pf-dryrun")
	const n = 150
	if err := env.CreateObjects(ctx, crd, []string{"pf-dryrun"}, n); err != nil {
		t.Fatal(err)
	}
	_, rev, err := env.StoredAPIVersions(ctx, crd.Spec.Group, crd.Spec.Names.Plural)
	if err != nil {
		t.Fatal(err)
	}
	dyn, sent := countingClient(t)

	// Adaptive (the default): every object dry-run once at the target.
	r, err := Check(ctx, dyn, fresh(t, crd.Name), Options{Target: "v1", ChunkSize: 40})
	if err != nil {
		t.Fatal(err)
	}
	if r.Objects != n || !r.Safe() || sent.Load() != n {
		t.Fatalf("objects %d, safe %v, dry runs sent %d; want %d each: %+v", r.Objects, r.Safe(), sent.Load(), n, r)
	}
	if f := r.DryRunInFlight; f == nil || !f.Adaptive || f.Peak < 4 {
		t.Errorf("dry runs in flight = %+v, want an adaptive gate", f)
	}

	// Fixed: --concurrency 3.
	sent.Store(0)
	r, err = Check(ctx, dyn, fresh(t, crd.Name), Options{Target: "v1", ChunkSize: 40, Concurrency: 3})
	if err != nil {
		t.Fatal(err)
	}
	if f := r.DryRunInFlight; r.Objects != n || sent.Load() != n || f == nil || f.Adaptive || f.Final != 3 || f.Peak != 3 {
		t.Errorf("--concurrency 3: objects %d, sent %d, in flight %+v", r.Objects, sent.Load(), f)
	}

	// Ctrl-C after the first page, with --qps 20 holding the pass for seconds.
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var cancelled atomic.Int64
	start := time.Now()
	_, err = Check(cctx, dyn, fresh(t, crd.Name), Options{Target: "v1", ChunkSize: 10, QPS: 20, Progress: func(done, total int64) {
		if cancelled.Load() == 0 {
			cancelled.Store(time.Now().UnixNano())
			cancel()
		}
	}})
	end := time.Now()
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("after Ctrl-C: %v, want context.Canceled", err)
	}
	if cancelled.Load() == 0 {
		t.Fatal("the check never reported progress")
	}
	if took := end.Sub(time.Unix(0, cancelled.Load())); took > time.Second {
		t.Errorf("the check ended %v after Ctrl-C, want within a second", took)
	}
	if whole := end.Sub(start); whole > 5*time.Second {
		t.Errorf("the interrupted check took %v", whole)
	}
	if _, rev2, err := env.StoredAPIVersions(ctx, crd.Spec.Group, crd.Spec.Names.Plural); err != nil || rev2 != rev {
		t.Errorf("etcd revision %d -> %d (%v): the dry runs wrote something", rev, rev2, err)
	}
}

// A check at the storage version with nothing pending (status.storedVersions is just that
// version) sends no dry run and says why; with another version still in storedVersions the
// same check sends one per object.
func TestNothingPendingNoDryRuns(t *testing.T) {
	ctx := context.Background()
	crd := testenv.TwoVersionCRD("pending.preflight.example.com", "gizmos", "Gizmo", apiextensionsv1.JSONSchemaProps{
		Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{"size": {Type: "integer"}}})
	setup(t, crd, "pf-pending")
	if err := env.CreateObjects(ctx, crd, []string{"pf-pending"}, 5); err != nil {
		t.Fatal(err)
	}
	dyn, sent := countingClient(t)
	live := fresh(t, crd.Name)
	r, err := Check(ctx, dyn, live, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if sent.Load() != 0 || len(r.NotNeeded) != 1 || r.DryRunInFlight != nil || !r.Safe() {
		t.Errorf("nothing pending: %d dry runs sent, not needed %q, report %+v", sent.Load(), r.NotNeeded, r)
	}

	// v1 pending as well (as after a storage switch): every object is checked.
	live.Status.StoredVersions = []string{"v1", "v1beta1"}
	r, err = Check(ctx, dyn, live, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if sent.Load() != 5 || r.Objects != 5 || len(r.NotNeeded) != 0 {
		t.Errorf("v1 pending: %d dry runs sent, objects %d, not needed %q", sent.Load(), r.Objects, r.NotNeeded)
	}
}
