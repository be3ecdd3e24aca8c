package clusterengine_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/crdver/kubectl-crdver/internal/testenv"
	"github.com/crdver/kubectl-crdver/migrate"
	"github.com/crdver/kubectl-crdver/plugin"
	"github.com/crdver/kubectl-crdver/upgrade"
)

var env *testenv.Env

func TestMain(m *testing.M) {
	if args := os.Getenv(childArgsEnv); args != "" {
		os.Exit(runChild(strings.Split(args, "\x1f"))) // a command run as its own process (detach_test.go)
	}
	testenv.Main(m, &env, testenv.Options{
		APIServerArgs: []string{"--feature-gates=StorageVersionMigrator=true", "--runtime-config=storagemigration.k8s.io/v1beta1=true"},
		ExtraBinaries: []string{"kube-controller-manager"},
	})
}

func fixture(t *testing.T, group string, n int) *apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	return fixtureOn(t, env, group, n)
}

// fixtureOn creates on e a two-version CRD of group with n objects stored at v1beta1 (deleted
// when the test ends), then makes v1 its storage version (status.storedVersions [v1beta1 v1]).
func fixtureOn(t *testing.T, e *testenv.Env, group string, n int) *apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	ctx := context.Background()
	crd := testenv.TwoVersionCRD(group, "things", "Thing", apiextensionsv1.JSONSchemaProps{Type: "object", XPreserveUnknownFields: ptr(true)})
	if _, err := e.CreateCRD(ctx, crd); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.DeleteCRD(context.Background(), crd.Name) })
	c, err := migrate.NewClients(e.Config)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.CreateObjects(ctx, crd, []string{"default"}, n); err != nil {
		t.Fatal(err)
	}
	got, err := migrate.SwitchStorage(ctx, c, crd.Name, "v1")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got.Status.StoredVersions, []string{"v1beta1", "v1"}) {
		t.Fatalf("after the storage switch: storedVersions %v, want [v1beta1 v1]", got.Status.StoredVersions)
	}
	return got
}

func stored(t *testing.T, group string) map[string]int {
	t.Helper()
	return storedOn(t, env, group, "things")
}

// storedOn reads group/plural's objects straight from e's etcd: how many at each apiVersion.
func storedOn(t testing.TB, e *testenv.Env, group, plural string) map[string]int {
	t.Helper()
	out, _, err := e.StoredAPIVersions(context.Background(), group, plural)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestClusterEngine(t *testing.T) {
	ctx := context.Background()
	c, err := migrate.NewClients(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	version, err := migrate.ServedClusterMigrationVersion(c)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("storagemigration.k8s.io served version: %s", version)

	// Without a controller, the migration never starts: a clear error, and it is deleted again.
	idle := fixture(t, "idle.cluster.example.com", 3)
	_, err = migrate.RunCluster(ctx, c, idle, version, 3*time.Second, nil)
	if err == nil || !strings.Contains(err.Error(), "no controller is processing it") {
		t.Fatalf("without kube-controller-manager: err = %v, want 'no controller is processing it'", err)
	}

	cm, err := env.StartStorageVersionMigrator()
	if err != nil {
		t.Fatal(err)
	}
	defer cm.Stop()

	const n = 50
	group := "busy.cluster.example.com"
	crd := fixture(t, group, n)
	if got := stored(t, group); got[group+"/v1beta1"] != n {
		t.Fatalf("before: etcd = %v, want %d at v1beta1", got, n)
	}
	var conds []string
	runCtx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	res, err := migrate.RunCluster(runCtx, c, crd, version, 2*time.Minute, func(cond, _ string) { conds = append(conds, cond) })
	if err != nil {
		t.Fatalf("%v\nkube-controller-manager logs:\n%s", err, tail(cm.Logs(), 4000))
	}
	if !res.Succeeded {
		t.Fatalf("migration %s failed: %s", res.Name, res.Message)
	}
	t.Logf("conditions seen: %v; %.1fs", conds, res.ElapsedSeconds)
	if got := stored(t, group); len(got) != 1 || got[group+"/v1"] != n {
		t.Errorf("after: etcd = %v, want all %d at v1", got, n)
	}
	tr, err := migrate.Trim(ctx, c, res.Evidence)
	if err != nil {
		t.Fatal(err)
	}
	if !tr.Safe || len(tr.After) != 1 || tr.After[0] != "v1" {
		t.Errorf("trim = %+v, want storedVersions [v1]", tr)
	}
	got, err := c.CRDs.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, crd.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Status.StoredVersions) != 1 || got.Status.StoredVersions[0] != "v1" {
		t.Errorf("storedVersions = %v, want [v1]", got.Status.StoredVersions)
	}
}

// The command: kubectl crdver migrate --engine cluster, with its JSON report.
func TestClusterEngineCommand(t *testing.T) {
	cm, err := env.StartStorageVersionMigrator()
	if err != nil {
		t.Fatal(err)
	}
	defer cm.Stop()
	const n = 20
	group := "cmd.cluster.example.com"
	crd := fixture(t, group, n)
	streams, _, out, errOut := genericiooptions.NewTestIOStreams()
	root := plugin.NewRootCmd(streams)
	root.SetArgs([]string{"migrate", crd.Name, "--engine", "cluster", "-o", "json", "--kubeconfig", env.Kubeconfig})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if err := root.ExecuteContext(ctx); err != nil {
		t.Fatalf("%v\n%s%s\nkube-controller-manager logs:\n%s", err, out, errOut, tail(cm.Logs(), 4000))
	}
	var rep plugin.MigrateReport
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		t.Fatal(err)
	}
	if rep.Engine != "cluster" || rep.Cluster == nil || !rep.Cluster.Succeeded || rep.Trim == nil || !rep.Trim.Safe || rep.Plan.Objects != n {
		t.Errorf("report:\n%s", out)
	}
	if !strings.Contains(errOut.String(), "StorageVersionMigration: Succeeded") {
		t.Errorf("no progress on stderr:\n%s", errOut)
	}
	if got := stored(t, group); len(got) != 1 || got[group+"/v1"] != n {
		t.Errorf("etcd = %v, want all %d at v1", got, n)
	}
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

func ptr[T any](v T) *T { return &v }

// upgrade --engine cluster: a release that removes the storage version v1beta1. The cluster's
// StorageVersionMigration rewrites the objects; the upgrade did the preflight before, checks
// every object after (all written since the storage switch: none left for it to write back),
// moves the managedFields entries of v1beta1, trims and applies, and its report says which
// engine did what. etcd then holds every object at v1.
func TestUpgradeClusterEngine(t *testing.T) {
	cm, err := env.StartStorageVersionMigrator()
	if err != nil {
		t.Fatal(err)
	}
	defer cm.Stop()
	const n = 25
	group := "upgrade.cluster.example.com"
	crd := fixture(t, group, n)
	next := crd.DeepCopy()
	next.TypeMeta = metav1.TypeMeta{APIVersion: "apiextensions.k8s.io/v1", Kind: "CustomResourceDefinition"}
	next.Spec.Versions = []apiextensionsv1.CustomResourceDefinitionVersion{{Name: "v1", Served: true, Storage: true, Schema: crd.Spec.Versions[1].Schema}}
	c, err := migrate.NewClients(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	rep, err := upgrade.Run(ctx, c, upgrade.Options{Next: []*apiextensionsv1.CustomResourceDefinition{next}, ApplyFile: "release/",
		BackupFile: filepath.Join(dir, "backup.yaml"), Checkpoint: filepath.Join(dir, "cp.json"), Engine: migrate.EngineCluster})
	if err != nil {
		t.Fatalf("%v\nkube-controller-manager logs:\n%s", err, tail(cm.Logs(), 4000))
	}
	var rewrite *upgrade.StepResult
	for i := range rep.Steps {
		if s := &rep.Steps[i]; s.Action == "retire" || s.Action == "migrate" {
			rewrite = s
		}
	}
	if rewrite == nil || rewrite.Engine != migrate.EngineCluster || rewrite.Cluster == nil || !rewrite.Cluster.Succeeded || rewrite.Cluster.Check == nil {
		t.Fatalf("the rewrite step = %+v, want one by the cluster engine, checked", rewrite)
	}
	if ch := rewrite.Cluster.Check; ch.Objects != n || ch.WrittenSince != n || ch.WrittenHere.Total() != 0 || len(ch.ManagersLost) != 0 {
		t.Errorf("check = %+v, want %d objects all written by the migration", ch, n)
	}
	if !strings.Contains(rewrite.Detail, "StorageVersionMigration") || !strings.Contains(rewrite.Detail, "checked here") {
		t.Errorf("the step's detail does not say which engine did what: %q", rewrite.Detail)
	}
	if len(rep.Problems) > 0 || rep.Outcome.ExitCode != 0 {
		t.Errorf("problems %q, outcome %+v", rep.Problems, rep.Outcome)
	}
	if got := stored(t, group); len(got) != 1 || got[group+"/v1"] != n {
		t.Errorf("etcd = %v, want all %d at v1", got, n)
	}
	live, err := c.CRDs.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, crd.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(live.Spec.Versions) != 1 || len(live.Status.StoredVersions) != 1 || live.Status.StoredVersions[0] != "v1" {
		t.Errorf("live CRD: versions %d, storedVersions %v; want only v1", len(live.Spec.Versions), live.Status.StoredVersions)
	}
}
