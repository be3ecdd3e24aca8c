package clusterengine_test

// svmminor_test.go: the cluster engine on the minors whose StorageVersionMigration
// (storagemigration.k8s.io/v1beta1) is beta and off by default (the StorageVersionMigrator
// feature gate and --runtime-config): 1.35, whose controller (pkg/controller/storageversionmigrator
// at v1.35.4) rewrites the objects but never trims status.storedVersions — it does not touch the
// CRD, so crdver trims, after its own check of every object — and 1.36, whose controller trims
// right after it marks the migration Succeeded (as 1.37's does, where the API is GA and on:
// clusterengine_test.go). One control plane of the minor (kube-apiserver and
// kube-controller-manager built by hack/build-test-binaries.sh --kube <minor>) serves every
// case, restarted once to switch the gate on. make test requires 1.35's binaries; 1.36's run
// where they are built (make test-svm-minors builds and requires them).

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

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"sigs.k8s.io/yaml"

	"github.com/crdver/kubectl-crdver/internal/testenv"
	"github.com/crdver/kubectl-crdver/migrate"
	"github.com/crdver/kubectl-crdver/plugin"
	"github.com/crdver/kubectl-crdver/upgrade"
)

// svmGate and svmAPI switch the beta StorageVersionMigration on in kube-apiserver (1.35, 1.36).
const (
	svmGate = "--feature-gates=StorageVersionMigrator=true"
	svmAPI  = "--runtime-config=storagemigration.k8s.io/v1beta1=true"
)

func TestKube135ClusterEngine(t *testing.T) { testSVMMinor(t, "1.35", false) }

func TestKube136ClusterEngine(t *testing.T) { testSVMMinor(t, "1.36", true) }

// testSVMMinor runs the cases on minor, whose controller trims status.storedVersions itself
// when controllerTrims.
func testSVMMinor(t *testing.T, minor string, controllerTrims bool) {
	// The API switched on, its feature gate not: the API server installs no storage for it.
	e := testenv.StartBuiltMinorWith(t, testenv.Options{KubeMinor: minor, ExtraBinaries: []string{"kube-controller-manager"}, APIServerArgs: []string{svmAPI}})
	domain := "k" + strings.ReplaceAll(minor, ".", "") + ".example.com" // k135.example.com
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	c, err := migrate.NewClients(e.Config)
	if err != nil {
		t.Fatal(err)
	}

	t.Run("without the feature gate", func(t *testing.T) {
		crd, err := e.CreateCRD(ctx, testenv.TwoVersionCRD("nogate."+domain, "things", "Thing", apiextensionsv1.JSONSchemaProps{Type: "object", XPreserveUnknownFields: ptr(true)}))
		if err != nil {
			t.Fatal(err)
		}
		code, out, errOut, err := runOn(ctx, e, "migrate", crd.Name, "--to", "v1", "--engine", "cluster", "--yes")
		if code != plugin.ExitUnavailable || err == nil || !strings.Contains(err.Error(), "the cluster does not serve the storagemigration.k8s.io API (StorageVersionMigration)") ||
			!strings.Contains(err.Error(), "StorageVersionMigrator feature gate") {
			t.Fatalf("exit %d, err %v; want %d and the clear error:\n%s%s", code, err, plugin.ExitUnavailable, out, errOut)
		}
		after, err := c.CRDs.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, crd.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if after.ResourceVersion != crd.ResourceVersion {
			t.Errorf("the CRD was changed (storage switched?) although the engine is unavailable: storedVersions %v", after.Status.StoredVersions)
		}
	})

	// The CRDs of the cases below, created before kube-controller-manager starts: its garbage
	// collector, whose informers the controller reads, sees a CRD created later only at
	// its next discovery (every 30 s).
	const n = 20
	alone, migrated, upgraded := fixtureOn(t, e, "alone."+domain, n), fixtureOn(t, e, "migrate."+domain, n), fixtureOn(t, e, "upgrade."+domain, n)

	if err := e.RestartAPIServerWith(ctx, svmGate, svmAPI); err != nil {
		t.Fatal(err)
	}
	for _, crd := range []*apiextensionsv1.CustomResourceDefinition{alone, migrated, upgraded} {
		if _, err := e.WaitEstablished(ctx, crd.Name); err != nil {
			t.Fatal(err)
		}
	}
	version, err := migrate.ServedClusterMigrationVersion(c)
	if err != nil {
		t.Fatalf("with the gate on: %v", err)
	}
	if version != "v1beta1" {
		t.Fatalf("storagemigration.k8s.io served at %s, want v1beta1 (%s)", version, minor)
	}
	cm, err := e.StartStorageVersionMigrator()
	if err != nil {
		t.Fatal(err)
	}
	defer cm.Stop()

	// migrate --engine cluster: the controller rewrites, crdver checks every object and trims
	// (1.35), or finds status.storedVersions trimmed by the controller (1.36).
	t.Run("migrate trims after its check", func(t *testing.T) {
		crd, group := migrated, migrated.Spec.Group
		if got := storedOn(t, e, group, "things"); got[group+"/v1beta1"] != n {
			t.Fatalf("before: etcd = %v, want %d at v1beta1", got, n)
		}
		stop := nudgeWhenStuck(t, c, crd)
		code, out, errOut, err := runOn(ctx, e, "migrate", crd.Name, "--engine", "cluster", "-o", "json")
		_ = stop()
		if err != nil || code != 0 {
			t.Fatalf("exit %d: %v\n%s%s\nkube-controller-manager logs:\n%s", code, err, out, errOut, tail(cm.Logs(), 4000))
		}
		var rep plugin.MigrateReport
		if err := json.Unmarshal([]byte(out), &rep); err != nil {
			t.Fatalf("%v:\n%s", err, out)
		}
		cl := rep.Cluster
		if rep.Engine != "cluster" || cl == nil || !cl.Succeeded || cl.APIVersion != "storagemigration.k8s.io/v1beta1" || cl.Check == nil {
			t.Fatalf("report, want a checked v1beta1 StorageVersionMigration that succeeded:\n%s", out)
		}
		if ch := cl.Check; ch.Objects != n || ch.WrittenSince != n || ch.WrittenHere.Total() != 0 {
			t.Errorf("check = %+v, want all %d objects checked, all written by the migration", ch, n)
		}
		switch tr := rep.Trim; {
		case !controllerTrims:
			// crdver read [v1beta1 v1] after the migration had succeeded and its check had
			// passed, and wrote [v1]: the controller had not trimmed.
			if tr == nil || !tr.Safe || !tr.Trimmed || !slices.Equal(tr.Before, []string{"v1beta1", "v1"}) || !slices.Equal(tr.After, []string{"v1"}) {
				t.Errorf("trim = %+v, want crdver to trim [v1beta1 v1] to [v1]", rep.Trim)
			}
		case tr != nil && tr.Trimmed:
			// The controller trims as it marks the migration Succeeded; crdver's check of 20
			// objects may end first, and then crdver trims as on 1.35 (its report says so).
			if !tr.Safe || !slices.Equal(tr.Before, []string{"v1beta1", "v1"}) || !slices.Equal(tr.After, []string{"v1"}) {
				t.Errorf("trim = %+v, want [v1beta1 v1] trimmed to [v1]", tr)
			}
			t.Log("crdver's check ended before the controller trimmed: crdver trimmed")
		default:
			// The usual order: crdver finds [v1], trimmed by the controller, writes nothing,
			// and its report says so.
			if tr == nil || !tr.Safe || !slices.Equal(tr.After, []string{"v1"}) {
				t.Errorf("trim = %+v, want status.storedVersions found trimmed to [v1] by the controller", rep.Trim)
			}
		}
		if sv := trimmed(t, c, crd.Name); !slices.Equal(sv, []string{"v1"}) {
			t.Errorf("status.storedVersions = %v, want [v1]", sv)
		}
		if got := storedOn(t, e, group, "things"); len(got) != 1 || got[group+"/v1"] != n {
			t.Errorf("after: etcd = %v, want all %d at v1", got, n)
		}
	})

	// The control: the controller alone rewrites every object and leaves
	// status.storedVersions as it was (1.35) or trims it (1.36). (After the case above, the
	// garbage collector's informer of this resource is behind the cluster's revision: the
	// controller takes the migration up and waits for it.)
	t.Run(map[bool]string{false: "the controller does not trim", true: "the controller trims"}[controllerTrims], func(t *testing.T) {
		crd, group := alone, alone.Spec.Group
		// A start timeout shorter than the nudge's 3 s: a migration the controller has taken
		// up (status.resourceVersion) but not started is not one "no controller processes".
		stop := nudgeWhenStuck(t, c, crd)
		res, err := migrate.RunCluster(ctx, c, crd, version, 2*time.Second, nil)
		if stop() == 0 && err == nil {
			t.Log("the controller started the migration at once: the wait past the start timeout was not exercised")
		}
		if err != nil {
			t.Fatalf("%v\nkube-controller-manager logs:\n%s", err, tail(cm.Logs(), 4000))
		}
		if !res.Succeeded {
			t.Fatalf("migration %s failed: %s", res.Name, res.Message)
		}
		if got := storedOn(t, e, group, "things"); len(got) != 1 || got[group+"/v1"] != n {
			t.Errorf("etcd = %v, want all %d at v1", got, n)
		}
		// 1.36's controller trims right after it marks the migration Succeeded; 1.35's never.
		if controllerTrims {
			sv := trimmed(t, c, crd.Name)
			for deadline := time.Now().Add(10 * time.Second); !slices.Equal(sv, []string{"v1"}) && time.Now().Before(deadline); sv = trimmed(t, c, crd.Name) {
				time.Sleep(200 * time.Millisecond)
			}
			if !slices.Equal(sv, []string{"v1"}) {
				t.Fatalf("status.storedVersions = %v 10 s after the migration succeeded, without crdver: want [v1] (does %s's controller not trim?)", sv, minor)
			}
			return
		}
		for deadline := time.Now().Add(2 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
			if sv := trimmed(t, c, crd.Name); !slices.Equal(sv, []string{"v1beta1", "v1"}) {
				t.Fatalf("status.storedVersions = %v after the migration succeeded, without crdver: want [v1beta1 v1] (does %s's controller trim?)", sv, minor)
			}
		}
	})

	// upgrade --engine cluster: a release without v1beta1 applies only once storedVersions no
	// longer holds it, which on 1.35 only crdver's trim does (on 1.36 the controller's).
	t.Run("upgrade", func(t *testing.T) {
		crd, group := upgraded, upgraded.Spec.Group
		next := crd.DeepCopy()
		next.TypeMeta = metav1.TypeMeta{APIVersion: "apiextensions.k8s.io/v1", Kind: "CustomResourceDefinition"}
		next.ObjectMeta = metav1.ObjectMeta{Name: crd.Name}
		next.Status = apiextensionsv1.CustomResourceDefinitionStatus{}
		next.Spec.Versions = []apiextensionsv1.CustomResourceDefinitionVersion{{Name: "v1", Served: true, Storage: true, Schema: crd.Spec.Versions[1].Schema}}
		b, err := yaml.Marshal(next)
		if err != nil {
			t.Fatal(err)
		}
		dir := t.TempDir()
		release := filepath.Join(dir, "release.yaml")
		if err := os.WriteFile(release, b, 0o600); err != nil {
			t.Fatal(err)
		}
		stop := nudgeWhenStuck(t, c, crd)
		defer func() { _ = stop() }()
		code, out, errOut, err := runOn(ctx, e, "upgrade", "-f", release, "--engine", "cluster", "--yes", "-o", "json",
			"--backup", filepath.Join(dir, "backup.yaml"), "--checkpoint", filepath.Join(dir, "cp.json"))
		if err != nil || code != 0 {
			t.Fatalf("exit %d: %v\n%s%s\nkube-controller-manager logs:\n%s", code, err, out, errOut, tail(cm.Logs(), 4000))
		}
		var rep upgrade.Report
		if err := json.Unmarshal([]byte(out), &rep); err != nil {
			t.Fatalf("%v:\n%s", err, out)
		}
		rewrite := rewriteStep(&rep)
		if rewrite == nil || rewrite.Engine != migrate.EngineCluster || rewrite.Cluster == nil || !rewrite.Cluster.Succeeded ||
			rewrite.Cluster.APIVersion != "storagemigration.k8s.io/v1beta1" || rewrite.Cluster.Check == nil || rewrite.Cluster.Check.Objects != n {
			t.Fatalf("the rewrite step = %+v, want one by the cluster's v1beta1 migration, %d objects checked", rewrite, n)
		}
		live, err := c.CRDs.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, crd.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if len(live.Spec.Versions) != 1 || !slices.Equal(live.Status.StoredVersions, []string{"v1"}) {
			t.Errorf("live CRD: %d versions, storedVersions %v; want only v1", len(live.Spec.Versions), live.Status.StoredVersions)
		}
		if got := storedOn(t, e, group, "things"); len(got) != 1 || got[group+"/v1"] != n {
			t.Errorf("etcd = %v, want all %d at v1", got, n)
		}
	})
}

// runOn runs kubectl crdver with args against e, as a user would: its exit code, stdout,
// stderr and error.
func runOn(ctx context.Context, e *testenv.Env, args ...string) (int, string, string, error) {
	streams, _, out, errOut := genericiooptions.NewTestIOStreams()
	root := plugin.NewRootCmd(streams)
	root.SetArgs(append(args, "--kubeconfig", e.Kubeconfig))
	err := root.ExecuteContext(ctx)
	return plugin.ExitCode(err), out.String(), errOut.String(), err
}

// nudgeWhenStuck writes one object of crd's resource (an annotation) whenever a
// StorageVersionMigration of it has been taken up by the controller (status.resourceVersion
// set) but not started (no condition) for 3 s, as any write to the resource in a busy cluster
// would: that controller starts only once its garbage collector's informer of the resource has
// reached the migration's revision, which on a resource nobody writes takes a watch bookmark
// (a minute) and its retry back-off (up to minutes more). stop ends it, logs what it did and
// returns how many objects it wrote.
func nudgeWhenStuck(t *testing.T, c *migrate.Clients, crd *apiextensionsv1.CustomResourceDefinition) (stop func() int) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	things := schema.GroupVersionResource{Group: crd.Spec.Group, Version: "v1", Resource: crd.Spec.Names.Plural}
	var nudged []string
	go func() {
		defer close(done)
		since := map[string]time.Time{}
		for ctx.Err() == nil {
			time.Sleep(200 * time.Millisecond)
			list, err := c.Dynamic.Resource(svmGVR).List(ctx, metav1.ListOptions{})
			if err != nil {
				continue
			}
			for _, svm := range list.Items {
				group, _, _ := unstructured.NestedString(svm.Object, "spec", "resource", "group")
				rv, _, _ := unstructured.NestedString(svm.Object, "status", "resourceVersion")
				conds, _, _ := unstructured.NestedSlice(svm.Object, "status", "conditions")
				if group != crd.Spec.Group || rv == "" || len(conds) > 0 || slices.Contains(nudged, svm.GetName()) {
					continue
				}
				if since[svm.GetName()].IsZero() {
					since[svm.GetName()] = time.Now()
				}
				if time.Since(since[svm.GetName()]) < 3*time.Second {
					continue
				}
				patch := fmt.Sprintf(`{"metadata":{"annotations":{"crdver.test/nudge":%q}}}`, svm.GetName())
				if _, err := c.Dynamic.Resource(things).Namespace("default").Patch(ctx, "thing-000", types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err == nil {
					nudged = append(nudged, svm.GetName())
				}
			}
		}
	}()
	return func() int {
		cancel()
		<-done
		t.Logf("objects of %s written to start a waiting migration: %d (%v)", crd.Spec.Group, len(nudged), nudged)
		return len(nudged)
	}
}
