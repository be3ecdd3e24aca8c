package preflight

// Benchmarks behind docs/benchmarks.md (section "Preflight"): objects/s of each pass of Check on
// the package's real kube-apiserver + etcd, and what the preflight adds to a migrate. The size
// comes from the environment so that `make bench` stays short:
//
//	CRDVER_BENCH_PREFLIGHT_OBJECTS  objects of the CRD (default 500; the recorded figures use 2000)
//
// One CRD (conversion None, v1beta1 and v1 with the same schema) and its objects are created
// once; the sub-benchmarks run in this order on them:
//
//	rejections       the dry-run pass alone: status.storedVersions is [v1beta1], the target is
//	                 the storage version, so no version is compared (one LIST, one dry-run
//	                 write per object)
//	losses           the loss pass alone (SkipRejections): storage switched to v1, so the data
//	                 may be held at v1beta1 too; every object is read at v1beta1 and by the API
//	                 server's read path at v1
//	check            both passes, as migrate runs them
//	migrate          the rewrite alone (the migrate engine, adaptive), each iteration after a
//	                 storage switch (not timed) to the version the objects are not encoded at,
//	                 checked in etcd afterwards
//	migrate+preflight the preflight at the new storage version, then the same rewrite

import (
	"context"
	"os"
	"strconv"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	crdinfo "github.com/crdver/kubectl-crdver/crd"
	"github.com/crdver/kubectl-crdver/internal/testenv"
	"github.com/crdver/kubectl-crdver/migrate"
)

func benchObjects() int {
	if v, err := strconv.Atoi(os.Getenv("CRDVER_BENCH_PREFLIGHT_OBJECTS")); err == nil && v > 0 {
		return v
	}
	return 500
}

func BenchmarkPreflight(b *testing.B) {
	ctx := context.Background()
	n := benchObjects()
	crd := testenv.TwoVersionCRD("bench.preflight.example.com", "items", "Item", apiextensionsv1.JSONSchemaProps{
		Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{"size": {Type: "integer"}}})
	if _, err := env.CreateCRD(ctx, crd); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = env.DeleteCRD(context.Background(), crd.Name) })
	if err := env.CreateObjects(ctx, crd, []string{"default", "kube-public", "kube-system"}, n); err != nil {
		b.Fatal(err)
	}
	c, err := migrate.NewClients(env.Config)
	if err != nil {
		b.Fatal(err)
	}
	live := func(b *testing.B) *apiextensionsv1.CustomResourceDefinition {
		cur, err := c.CRDs.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, crd.Name, metav1.GetOptions{})
		if err != nil {
			b.Fatal(err)
		}
		return cur
	}
	// check times Check on the live CRD and fails unless it evaluated every object of each
	// pass and found nothing (the objects lose nothing and are valid).
	check := func(b *testing.B, cur *apiextensionsv1.CustomResourceDefinition, o Options, wantObjects int64, wantCompared int) time.Duration {
		b.Helper()
		start := time.Now()
		r, err := Check(ctx, c.Dynamic, cur, o)
		d := time.Since(start)
		if err != nil {
			b.Fatal(err)
		}
		if r.Objects != wantObjects || len(r.Compared) != wantCompared || !r.Safe() {
			b.Fatalf("report: objects %d (want %d), compared %v (want %d), safe %v: %+v", r.Objects, wantObjects, r.Compared, wantCompared, r.Safe(), r)
		}
		return d
	}
	rate := func(b *testing.B, total time.Duration) {
		b.ReportMetric(float64(n*b.N)/total.Seconds(), "objects/s")
	}

	b.Run("rejections", func(b *testing.B) {
		cur := live(b)
		if len(cur.Status.StoredVersions) != 1 {
			b.Skipf("status.storedVersions is %v: the dry-run pass alone needs a CRD that never switched storage (run this sub-benchmark first)", cur.Status.StoredVersions)
		}
		var total time.Duration
		for i := 0; i < b.N; i++ {
			total += check(b, cur, Options{}, int64(n), 0)
		}
		rate(b, total)
	})

	// From here on v1 is the storage version and status.storedVersions holds both.
	if crdinfo.StorageVersion(live(b)) != "v1" {
		if _, err := migrate.SwitchStorage(ctx, c, crd.Name, "v1"); err != nil {
			b.Fatal(err)
		}
	}

	b.Run("losses", func(b *testing.B) {
		cur := live(b)
		var total time.Duration
		for i := 0; i < b.N; i++ {
			total += check(b, cur, Options{Target: crdinfo.StorageVersion(cur), SkipRejections: true}, 0, 1)
		}
		rate(b, total)
	})

	b.Run("check", func(b *testing.B) {
		cur := live(b)
		var total time.Duration
		for i := 0; i < b.N; i++ {
			total += check(b, cur, Options{Target: crdinfo.StorageVersion(cur)}, int64(n), 1)
		}
		rate(b, total)
	})

	// rewrite switches the storage version to the one the objects are not encoded at (untimed),
	// then times the preflight (when
	// with) and the rewrite, and checks etcd afterwards.
	rewrite := func(b *testing.B, with bool) {
		var total time.Duration
		for i := 0; i < b.N; i++ {
			// The version the objects are not encoded at (etcd says), so that each is rewritten.
			held, _, err := env.StoredAPIVersions(ctx, crd.Spec.Group, crd.Spec.Names.Plural)
			if err != nil {
				b.Fatal(err)
			}
			to := "v1"
			if held[crd.Spec.Group+"/v1"] > 0 {
				to = "v1beta1"
			}
			cur, err := migrate.SwitchStorage(ctx, c, crd.Name, to)
			if err != nil {
				b.Fatal(err)
			}
			start := time.Now()
			if with {
				check(b, cur, Options{Target: to}, int64(n), 1)
			}
			rw, err := migrate.NewRewriter(c, cur, migrate.RewriteOptions{})
			if err != nil {
				b.Fatal(err)
			}
			res, err := rw.Run(ctx)
			if err != nil || !res.Complete || res.Rewritten != int64(n) {
				b.Fatalf("rewrite: %+v, %v", res, err)
			}
			total += time.Since(start)
			got, _, err := env.StoredAPIVersions(ctx, crd.Spec.Group, crd.Spec.Names.Plural)
			if err != nil {
				b.Fatal(err)
			}
			if len(got) != 1 || got[crd.Spec.Group+"/"+to] != n {
				b.Fatalf("after the rewrite etcd holds %v, want all %d at %s", got, n, to)
			}
		}
		rate(b, total)
	}
	b.Run("migrate", func(b *testing.B) { rewrite(b, false) })
	b.Run("migrate+preflight", func(b *testing.B) { rewrite(b, true) })
}
