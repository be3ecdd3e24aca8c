package plugin

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	crdinfo "github.com/crdver/kubectl-crdver/crd"
	"github.com/crdver/kubectl-crdver/doctor"
	"github.com/crdver/kubectl-crdver/internal/testenv"
	"github.com/crdver/kubectl-crdver/migrate"
)

// preflightFixture installs testdata/crds/<file> in group with a namespace, and creates the
// objects (name → spec) at version v.
func preflightFixture(t *testing.T, file, group, v string, objects map[string]map[string]any) (*apiextensionsv1.CustomResourceDefinition, dynamic.Interface, string) {
	t.Helper()
	ctx := context.Background()
	crd := testenv.LoadCRD(t, file)
	crd.Spec.Group = group
	crd.Name = crd.Spec.Names.Plural + "." + group
	env.CreateCRDForTest(t, crd)
	ns := strings.Split(group, ".")[0]
	if _, err := kubernetes.NewForConfigOrDie(env.Config).CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	dyn := dynamic.NewForConfigOrDie(env.Config)
	for name, spec := range objects {
		u := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": group + "/" + v, "kind": crd.Spec.Names.Kind,
			"metadata": map[string]any{"name": name, "namespace": ns}, "spec": spec,
		}}
		if _, err := dyn.Resource(crdinfo.GVR(crd, v)).Namespace(ns).Create(ctx, u, metav1.CreateOptions{FieldManager: "kubectl-create"}); err != nil {
			t.Fatal(err)
		}
	}
	return crd, dyn, ns
}

// untouched is what must not change when a run refuses: each object's resourceVersion, the
// CRD's storage version and storedVersions, and the last etcd revision at which the objects or the CRD were written.
type untouched struct {
	rvs     map[string]string
	storage string
	stored  []string
	rev     int64
}

func snapshot(t *testing.T, crd *apiextensionsv1.CustomResourceDefinition, dyn dynamic.Interface, v string) untouched {
	t.Helper()
	list, err := dyn.Resource(crdinfo.GVR(crd, v)).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s := untouched{rvs: map[string]string{}}
	for _, u := range list.Items {
		s.rvs[u.GetNamespace()+"/"+u.GetName()] = u.GetResourceVersion()
	}
	live := crdOf(t, crd.Name)
	s.storage, s.stored = crdinfo.StorageVersion(live), live.Status.StoredVersions
	if _, s.rev, err = env.StoredAPIVersions(context.Background(), crd.Spec.Group, crd.Spec.Names.Plural); err != nil {
		t.Fatal(err)
	}
	return s
}

func (s untouched) check(t *testing.T, what string, now untouched) {
	t.Helper()
	if fmt.Sprint(s.rvs) != fmt.Sprint(now.rvs) || s.storage != now.storage || !slices.Equal(s.stored, now.stored) || s.rev != now.rev {
		t.Errorf("%s wrote something: before %+v, after %+v", what, s, now)
	}
}

func aclSpec(op string) map[string]any {
	return map[string]any{"authorization": map[string]any{"type": "simple", "acls": []any{
		map[string]any{"resource": map[string]any{"type": "topic", "name": "orders"}, "operation": op},
	}}}
}

// migrate --to v1 of KafkaUsers whose ACL operation v1 no longer has: the preflight refuses
// before any write (resourceVersions, storage version, storedVersions and etcd unchanged), on
// --dry-run too, names the objects and the field, gives the backup at v1beta2; -o json has it;
// --allow-data-loss goes on, and the field is then gone, as predicted.
func TestMigrateRefusesDataLoss(t *testing.T) {
	crd, dyn, ns := preflightFixture(t, "kafkausers.yaml", "pfloss.example.com", "v1beta2", map[string]map[string]any{
		"alice": aclSpec("Read"), "bob": aclSpec("Write"), "carol": {"authentication": map[string]any{"type": "tls"}},
	})
	cp := filepath.Join(t.TempDir(), "cp")
	before := snapshot(t, crd, dyn, "v1beta2")

	r := runCluster(t, "migrate", crd.Name, "--to", "v1", "--yes", "--checkpoint", cp)
	if r.code != ExitProblems {
		t.Fatalf("exit %d, want 1\n%s%s", r.code, r.stdout, r.stderr)
	}
	mustContain(t, "refusal", r.stdout, "2 objects would lose fields", ns+"/alice", ns+"/bob", ".spec.authorization.acls[0].operation",
		"kubectl get kafkausers.v1beta2.pfloss.example.com -A -o yaml > kafkausers.v1beta2.backup.yaml", "convert the objects listed to the v1 shape")
	mustContain(t, "refusal", r.stderr, "refusing before any write", "nothing was written", "--allow-data-loss")
	if strings.Contains(r.stdout, ns+"/carol") {
		t.Errorf("carol loses nothing but is listed:\n%s", r.stdout)
	}
	before.check(t, "a refused migrate", snapshot(t, crd, dyn, "v1beta2"))

	r = runCluster(t, "migrate", crd.Name, "--to", "v1", "--dry-run", "-o", "json", "--checkpoint", cp)
	if r.code != ExitProblems {
		t.Fatalf("--dry-run -o json: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	var rep struct {
		DryRun    bool `json:"dryRun"`
		Preflight struct {
			LossCount int64 `json:"lossCount"`
			Losses    []struct {
				Name, HeldAt string
				Fields       []string
			} `json:"losses"`
			Backup []string `json:"backup"`
		} `json:"preflight"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Fatalf("%v\n%s", err, r.stdout)
	}
	if !rep.DryRun || rep.Preflight.LossCount != 2 || len(rep.Preflight.Losses) != 2 || rep.Preflight.Losses[0].HeldAt != "v1beta2" || len(rep.Preflight.Backup) != 1 {
		t.Errorf("json: %+v", rep)
	}
	before.check(t, "a dry run", snapshot(t, crd, dyn, "v1beta2"))

	r = runCluster(t, "migrate", crd.Name, "--to", "v1", "--yes", "--allow-data-loss", "--quiet", "--checkpoint", cp)
	if r.code != 0 {
		t.Fatalf("--allow-data-loss: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	live := crdOf(t, crd.Name)
	if crdinfo.StorageVersion(live) != "v1" || !slices.Equal(live.Status.StoredVersions, []string{"v1"}) {
		t.Errorf("after --allow-data-loss: storage %s, storedVersions %v", crdinfo.StorageVersion(live), live.Status.StoredVersions)
	}
	stored, _, err := env.StoredObject(context.Background(), crd.Spec.Group, crd.Spec.Names.Plural, ns, "alice")
	if err != nil {
		t.Fatal(err)
	}
	acls, _, _ := unstructured.NestedSlice(stored, "spec", "authorization", "acls")
	if stored["apiVersion"] != crd.Spec.Group+"/v1" || len(acls) != 1 || acls[0].(map[string]any)["operation"] != nil {
		t.Errorf("alice in etcd after the rewrite: %v (the preflight said operation is lost)", stored)
	}
}

// migrate --to v1 of KafkaConnects whose write at v1 is rejected (spec.groupId required):
// refused before the storage switch; --skip-invalid (with --allow-data-loss for the field v1
// dropped) goes on, the object fails and status.storedVersions stays untrimmed.
func TestMigrateRefusesRejectedBeforeSwitch(t *testing.T) {
	crd, dyn, ns := preflightFixture(t, "kafkaconnects.yaml", "pfreject.example.com", "v1beta2", map[string]map[string]any{
		"good":   {"bootstrapServers": "kafka:9092", "groupId": "connect"},
		"broken": {"bootstrapServers": "kafka:9092", "logging": "debug"},
	})
	cp := filepath.Join(t.TempDir(), "cp")
	before := snapshot(t, crd, dyn, "v1beta2")
	r := runCluster(t, "migrate", crd.Name, "--to", "v1", "--yes", "--allow-data-loss", "--checkpoint", cp)
	if r.code != ExitProblems {
		t.Fatalf("exit %d, want 1\n%s%s", r.code, r.stdout, r.stderr)
	}
	mustContain(t, "refusal", r.stdout, "1 object would be rejected by a write at v1", ns+"/broken", "spec.groupId: Required value")
	mustContain(t, "refusal", r.stderr, "would be rejected by the rewrite", "--skip-invalid")
	before.check(t, "a refused migrate", snapshot(t, crd, dyn, "v1beta2"))

	r = runCluster(t, "migrate", crd.Name, "--to", "v1", "--yes", "--allow-data-loss", "--skip-invalid", "--quiet", "--checkpoint", cp)
	if r.code != ExitProblems || !strings.Contains(r.stderr, "1 objects could not be rewritten") {
		t.Fatalf("--skip-invalid: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	live := crdOf(t, crd.Name)
	if crdinfo.StorageVersion(live) != "v1" || !slices.Equal(live.Status.StoredVersions, []string{"v1beta2", "v1"}) {
		t.Errorf("after --skip-invalid: storage %s, storedVersions %v (want v1, untrimmed)", crdinfo.StorageVersion(live), live.Status.StoredVersions)
	}
}

// Field managers of HelmRepositories created at v1beta1 (Flux) survive migrate and
// migrate --all: their entries are moved to the storage version within each rewrite.
func TestMigrateKeepsManagedFields(t *testing.T) {
	ctx := context.Background()
	for _, all := range []bool{false, true} {
		group := "pfmf1.example.com"
		if all {
			group = "pfmf2.example.com"
		}
		crd, dyn, ns := preflightFixture(t, "helmrepositories.yaml", group, "v1beta1", map[string]map[string]any{
			"seed": {"url": "https://charts.example.com/seed"},
		})
		c, err := migrate.NewClients(env.Config)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := migrate.SwitchStorage(ctx, c, crd.Name, "v1"); err != nil {
			t.Fatal(err)
		}
		at := dyn.Resource(crdinfo.GVR(crd, "v1beta1")).Namespace(ns)
		for _, n := range []string{"podinfo", "bitnami"} {
			obj := &unstructured.Unstructured{Object: map[string]any{
				"apiVersion": group + "/v1beta1", "kind": "HelmRepository",
				"metadata": map[string]any{"name": n, "namespace": ns},
				"spec":     map[string]any{"url": "https://charts.example.com/" + n},
			}}
			if _, err := at.Create(ctx, obj, metav1.CreateOptions{FieldManager: "kubectl-create"}); err != nil {
				t.Fatal(err)
			}
			patch := `{"apiVersion":"` + group + `/v1beta1","kind":"HelmRepository","metadata":{"name":"` + n + `","labels":{"team":"platform"}}}`
			if _, err := at.Patch(ctx, n, "application/apply-patch+yaml", []byte(patch), metav1.PatchOptions{FieldManager: "flux-applier"}); err != nil {
				t.Fatal(err)
			}
		}
		args := []string{"migrate", crd.Name, "--yes", "--quiet", "-o", "json", "--checkpoint", filepath.Join(t.TempDir(), "cp")}
		if all {
			args = []string{"migrate", "--all", "--yes", "--quiet", "-o", "json"}
		}
		r := runCluster(t, args...)
		if r.code != 0 {
			t.Fatalf("%v: exit %d\n%s%s", args, r.code, r.stdout, r.stderr)
		}
		if !strings.Contains(r.stdout, `"managedFieldsMoved"`) || !strings.Contains(r.stdout, `"managedFieldsLost": 0`) {
			t.Errorf("%v: the JSON report does not say what happened to managedFields:\n%s", args, r.stdout)
		}
		for _, n := range []string{"podinfo", "bitnami"} {
			u, err := dyn.Resource(crdinfo.GVR(crd, "v1")).Namespace(ns).Get(ctx, n, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, e := range u.GetManagedFields() {
				got = append(got, e.Manager+"@"+e.APIVersion)
			}
			sort.Strings(got)
			want := []string{"flux-applier@" + group + "/v1", "kubectl-create@" + group + "/v1"}
			if !slices.Equal(got, want) {
				t.Errorf("%v: %s managedFields = %v, want %v", args, n, got, want)
			}
		}
	}
}

// doctor reports objects that lose fields when read at the storage version (a pending
// migration to a version without them), with the backup at the version holding the data.
func TestDoctorReportsDataLoss(t *testing.T) {
	crd, _, ns := preflightFixture(t, "kafkausers.yaml", "pfdoctor.example.com", "v1beta2", map[string]map[string]any{
		"alice": aclSpec("Read"),
	})
	c, err := migrate.NewClients(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := migrate.SwitchStorage(context.Background(), c, crd.Name, "v1"); err != nil {
		t.Fatal(err)
	}
	r := runCluster(t, "doctor", crd.Name, "-o", "json")
	if r.code != ExitProblems {
		t.Fatalf("exit %d, want 1\n%s%s", r.code, r.stdout, r.stderr)
	}
	var rep doctor.Report
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Fatalf("%v\n%s", err, r.stdout)
	}
	var found *doctor.Finding
	for i, f := range rep.Items[0].Findings {
		if f.Check == doctor.CheckDataLoss {
			found = &rep.Items[0].Findings[i]
		}
	}
	if found == nil || found.Severity != doctor.SeverityError || !strings.Contains(found.Message, ns+"/alice (.spec.authorization.acls[0].operation)") ||
		!strings.Contains(found.Fix, "kubectl get kafkausers.v1beta2.pfdoctor.example.com -A -o yaml > kafkausers.v1beta2.backup.yaml") {
		t.Errorf("data-loss finding = %+v\n%s", found, r.stdout)
	}

	// migrate --all meets the same objects: it refuses the whole run before any write.
	before := snapshot(t, crd, dynamic.NewForConfigOrDie(env.Config), "v1beta2")
	r = runCluster(t, "migrate", "--all", "--yes")
	if r.code != ExitProblems {
		t.Fatalf("migrate --all: exit %d, want 1\n%s%s", r.code, r.stdout, r.stderr)
	}
	mustContain(t, "migrate --all", r.stdout, "Preflight of "+crd.Name, ns+"/alice")
	mustContain(t, "migrate --all", r.stderr, "refusing before any write", "kubectl crdver migrate --all --allow-data-loss")
	before.check(t, "a refused migrate --all", snapshot(t, crd, dynamic.NewForConfigOrDie(env.Config), "v1beta2"))
}
