package pager_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/crdver/kubectl-crdver/internal/testenv"
	"github.com/crdver/kubectl-crdver/migrate"
	"github.com/crdver/kubectl-crdver/plan"
	"github.com/crdver/kubectl-crdver/upgrade"
)

// compactor is a transport that compacts etcd before every continued LIST of the resource
// (its continue token has then expired: the API server answers 410 with the token to resume
// from), counts those LISTs, and counts the writes (PUTs, not dry runs) of each object.
type compactor struct {
	t      *testing.T
	rt     http.RoundTripper
	group  string
	mu     sync.Mutex
	lists  int            // continued pages
	passes int            // first pages of lists of every object (a read of every object)
	writes map[string]int // object path without the version → writes
}

func (c *compactor) RoundTrip(r *http.Request) (*http.Response, error) {
	path := r.URL.Path
	if strings.HasPrefix(path, "/apis/"+c.group+"/") {
		switch {
		case r.Method == http.MethodGet && r.URL.Query().Get("continue") == "" && r.URL.Query().Get("limit") != "" && r.URL.Query().Get("limit") != "1":
			c.mu.Lock()
			c.passes++
			c.mu.Unlock()
		case r.Method == http.MethodGet && r.URL.Query().Get("continue") != "":
			if _, err := env.Compact(r.Context()); err != nil {
				c.t.Error(err)
			}
			c.mu.Lock()
			c.lists++
			c.mu.Unlock()
		case r.Method == http.MethodPut && r.URL.Query().Get("dryRun") == "":
			// /apis/<group>/<version>/namespaces/<ns>/<plural>/<name>: the version may differ
			// between two writes of one object.
			parts := strings.Split(path, "/")
			key := strings.Join(append(parts[:3:3], parts[4:]...), "/")
			c.mu.Lock()
			c.writes[key]++
			c.mu.Unlock()
		}
	}
	return c.rt.RoundTrip(r)
}

// compacting is env's configuration with a compactor of the objects of group.
func compacting(t *testing.T, group string) (*rest.Config, *compactor) {
	c := &compactor{t: t, group: group, writes: map[string]int{}}
	cfg := rest.CopyConfig(env.Config)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { c.rt = rt; return c })
	return cfg, c
}

// releaseFixture is the CRD of fixture with a release that makes v1 the only version and
// storage version.
func release(live *apiextensionsv1.CustomResourceDefinition) *apiextensionsv1.CustomResourceDefinition {
	next := live.DeepCopy()
	next.ObjectMeta = live.ObjectMeta
	next.ResourceVersion, next.UID, next.Generation, next.ManagedFields = "", "", 0, nil
	next.Status = apiextensionsv1.CustomResourceDefinitionStatus{}
	next.Spec.Versions = []apiextensionsv1.CustomResourceDefinitionVersion{{Name: "v1", Served: true, Storage: true, Schema: live.Spec.Versions[1].Schema}}
	return next
}

// Plan, upgrade and migrate over 95 objects in pages of 10, with etcd compacted before every
// continued page: each completes, every object is evaluated (plan), backed up and written
// (upgrade, migrate) exactly once, and none is left at the old version.
func TestCommandsCompleteUnderCompaction(t *testing.T) {
	const n = 95
	keys := fixture(t, n)
	ctx := context.Background()
	crds := apiextensionsclient.NewForConfigOrDie(env.Config)
	live, err := crds.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, "widgets."+group, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}

	t.Run("plan", func(t *testing.T) {
		cfg, comp := compacting(t, group)
		rep, err := plan.Release(ctx, plan.ReleaseClients{CRDs: apiextensionsclient.NewForConfigOrDie(cfg), Dynamic: dynamic.NewForConfigOrDie(cfg), Kube: kubernetes.NewForConfigOrDie(cfg)},
			plan.ReleaseOptions{Next: []*apiextensionsv1.CustomResourceDefinition{release(live)}, ChunkSize: 10})
		if err != nil {
			t.Fatal(err)
		}
		if ev := rep.Items[0].Objects.Evaluated; ev != n || comp.lists < 9 {
			t.Errorf("evaluated %d objects of %d, over %d compacted continued lists (want at least 9)", ev, n, comp.lists)
		}
	})

	t.Run("upgrade", func(t *testing.T) {
		cfg, comp := compacting(t, group)
		c, err := migrate.NewClients(cfg)
		if err != nil {
			t.Fatal(err)
		}
		dir := t.TempDir()
		backup := filepath.Join(dir, "backup.yaml")
		rep, err := upgrade.Run(ctx, c, upgrade.Options{Next: []*apiextensionsv1.CustomResourceDefinition{release(live)}, ApplyFile: "release/", BackupFile: backup,
			Checkpoint: filepath.Join(dir, "cp.json"), ChunkSize: 10, Rewrite: migrate.RewriteOptions{ChunkSize: 10}})
		if err != nil {
			t.Fatalf("%v (problems %q)", err, rep.Problems)
		}
		checkWrittenOnce(t, comp, keys, "v1")
		b, err := os.ReadFile(backup)
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range keys {
			name := k[strings.IndexByte(k, '/')+1:]
			if c := strings.Count(string(b), "name: "+name+"\n"); c != 1 {
				t.Errorf("the backup holds %s %d times, want once", k, c)
			}
		}
		// Each object is read seven times: plan, the preflight (at v1), the backup (at v1beta1),
		// the rewrite, the managedFields pass after it, the check for writers of v1beta1 since
		// the run began (before the release stops serving it: a writer after the pass's read
		// must still stop that), verify's plan (which also gives the server-side apply check its
		// managedFields). Each is paged and compacted under: each continued page is asked for
		// twice (its token had expired, then with the 410's).
		if comp.passes != 7 || comp.lists != 2*7*9 {
			t.Errorf("%d reads of every object, %d compacted continued pages; want 7 and %d", comp.passes, comp.lists, 2*7*9)
		}
		if v := rep.Verify; v == nil || len(v.CRDs) != 1 || v.CRDs[0].SSAChecked < 1 || v.CRDs[0].StaleManagedFields != 0 {
			t.Errorf("verify = %+v, want the server-side apply probed on the objects verify's plan read", v)
		}
	})

	t.Run("migrate", func(t *testing.T) {
		// Back to v1beta1 (the release removed it): a CRD of its own.
		crd := testenv.TwoVersionCRD("migrate."+group, "widgets", "Widget", live.Spec.Versions[1].Schema.OpenAPIV3Schema.Properties["spec"])
		env.CreateCRDForTest(t, crd)
		err := env.PutObjects(ctx, "migrate."+group, "widgets", n, func(i int) (string, string, []byte) {
			b, _ := json.Marshal(map[string]any{"apiVersion": "migrate." + group + "/v1beta1", "kind": "Widget",
				"metadata": map[string]any{"name": fmt.Sprintf("w-%03d", i), "namespace": "default", "uid": fmt.Sprintf("m-%d", i), "creationTimestamp": "2026-01-01T00:00:00Z"}})
			return "default", fmt.Sprintf("w-%03d", i), b
		}, nil)
		if err != nil {
			t.Fatal(err)
		}
		waitListed(t, "migrate."+group, n)
		cfg, comp := compacting(t, "migrate."+group)
		c, err := migrate.NewClients(cfg)
		if err != nil {
			t.Fatal(err)
		}
		m := &migrate.Migrator{Clients: c, Options: migrate.Options{To: "v1", Rewrite: migrate.RewriteOptions{ChunkSize: 10, Checkpoint: filepath.Join(t.TempDir(), "cp.json")}}}
		cur, err := c.CRDs.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, crd.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		rep, err := m.Run(ctx, cur)
		if err != nil {
			t.Fatal(err)
		}
		if res := rep.Result; res == nil || !res.Complete || res.Rewritten != n || res.ExpiredContinues < 9 || rep.Trim == nil || !rep.Trim.Trimmed {
			t.Errorf("migrate: %+v, trim %+v; want %d rewritten, complete, after at least 9 expired continue tokens, trimmed", res, rep.Trim, n)
		}
		checkWrittenOnce(t, comp, keys, "v1")
	})
}

// checkWrittenOnce checks that each of keys (namespace/name) was written once and that etcd
// holds them all at version.
func checkWrittenOnce(t *testing.T, comp *compactor, keys []string, version string) {
	t.Helper()
	g := comp.group
	for _, k := range keys {
		ns, name, _ := strings.Cut(k, "/")
		if w := comp.writes["/apis/"+g+"/namespaces/"+ns+"/widgets/"+name]; w != 1 {
			t.Errorf("%s written %d times, want once", k, w)
		}
	}
	if len(comp.writes) != len(keys) {
		t.Errorf("%d objects written, want %d", len(comp.writes), len(keys))
	}
	got, _, err := env.StoredAPIVersions(context.Background(), g, "widgets")
	if err != nil || len(got) != 1 || got[g+"/"+version] != len(keys) {
		t.Errorf("etcd holds %v (%v), want all %d at %s", got, err, len(keys), version)
	}
}
