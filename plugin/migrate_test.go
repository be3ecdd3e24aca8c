package plugin

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/kubernetes"

	"github.com/crdver/kubectl-crdver/internal/testenv"
)

// migrateFixture creates a CRD "gadgets.<name>.example.com" with v1beta1 (storage) and v1,
// conversion None, identical schemas, and n objects (gadget-000 …) in namespaces <name>-a and
// <name>-b, stored at v1beta1.
func migrateFixture(t *testing.T, name string, n int) (crdName, group string, nss []string) {
	t.Helper()
	ctx := context.Background()
	group = name + ".example.com"
	crd := testenv.TwoVersionCRD(group, "gadgets", "Gadget", apiextensionsv1.JSONSchemaProps{Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{"size": {Type: "integer"}}})
	env.CreateCRDForTest(t, crd)
	kube := kubernetes.NewForConfigOrDie(env.Config)
	nss = []string{name + "-a", name + "-b"}
	for _, ns := range nss {
		if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if err := env.CreateObjects(ctx, crd, nss, n); err != nil {
		t.Fatal(err)
	}
	return crd.Name, group, nss
}

// storedAt reads the fixture's objects straight from etcd: how many are stored at each
// apiVersion, and the last revision at which they or their CRD were written.
func storedAt(t *testing.T, group string) (map[string]int, int64) {
	t.Helper()
	out, rev, err := env.StoredAPIVersions(context.Background(), group, "gadgets")
	if err != nil {
		t.Fatal(err)
	}
	return out, rev
}

func crdOf(t *testing.T, name string) *apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	crd, err := apiextensionsclient.NewForConfigOrDie(env.Config).ApiextensionsV1().CustomResourceDefinitions().Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return crd
}

func TestMigrateDryRunWritesNothing(t *testing.T) {
	name, group, _ := migrateFixture(t, "dryrun", 6)
	_, rev := storedAt(t, group)
	r := runCluster(t, "migrate", name, "--to", "v1", "--dry-run", "--checkpoint", filepath.Join(t.TempDir(), "cp"))
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	golden(t, "migrate/dry-run.txt", r.stdout)
	stored, rev2 := storedAt(t, group)
	if rev2 != rev {
		t.Errorf("etcd revision moved from %d to %d during --dry-run", rev, rev2)
	}
	if stored[group+"/v1beta1"] != 6 {
		t.Errorf("etcd = %v, want 6 objects still at v1beta1", stored)
	}
	if crd := crdOf(t, name); crd.Spec.Versions[0].Name != "v1beta1" || !crd.Spec.Versions[0].Storage {
		t.Errorf("--dry-run changed the storage version: %+v", crd.Spec.Versions)
	}
	r = runCluster(t, "migrate", name, "--dry-run", "-o", "json")
	var rep MigrateReport
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil || r.code != 0 {
		t.Fatalf("-o json: exit %d, %v:\n%s", r.code, err, r.stdout)
	}
	if !rep.DryRun || rep.Plan.Objects != 6 || rep.Result != nil || rep.Trim != nil {
		t.Errorf("dry-run report = %+v", rep)
	}
}

func TestMigrateEndToEnd(t *testing.T) {
	name, group, _ := migrateFixture(t, "e2e", 40)
	cp := filepath.Join(t.TempDir(), "cp.json")

	// Declining the question changes nothing.
	r := run(t, "n\n", "migrate", name, "--to", "v1", "--checkpoint", cp, "--kubeconfig", env.Kubeconfig)
	if r.code != ExitUnavailable || !strings.Contains(r.stderr, "not confirmed") {
		t.Fatalf("declined: exit %d, stderr:\n%s", r.code, r.stderr)
	}
	if crd := crdOf(t, name); !crd.Spec.Versions[0].Storage {
		t.Fatalf("declined, yet the storage version changed")
	}

	r = runCluster(t, "migrate", name, "--to", "v1", "--yes", "--quiet", "--chunk-size", "7", "--checkpoint", cp, "-o", "json")
	if r.code != 0 {
		t.Fatalf("exit %d:\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	if r.stderr != "" {
		t.Errorf("--quiet printed on stderr:\n%s", r.stderr)
	}
	var rep MigrateReport
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Fatal(err)
	}
	if rep.Result == nil || rep.Result.Rewritten != 40 || rep.Result.Total() != 40 || !rep.Result.Complete || rep.Trim == nil || !rep.Trim.Trimmed {
		t.Fatalf("report = %s", r.stdout)
	}
	stored, _ := storedAt(t, group)
	if len(stored) != 1 || stored[group+"/v1"] != 40 {
		t.Errorf("etcd = %v, want every object at %s/v1", stored, group)
	}
	if got := crdOf(t, name).Status.StoredVersions; len(got) != 1 || got[0] != "v1" {
		t.Errorf("storedVersions = %v, want [v1]", got)
	}
	r = runCluster(t, "migrate", "status", name, "--checkpoint", cp)
	if r.code != 0 {
		t.Fatalf("status: exit %d:\n%s%s", r.code, r.stdout, r.stderr)
	}
	mustContain(t, "migrate status", r.stdout, "storedVersions:    [v1]", "migration pending: no", "trim needed:       no: status.storedVersions is [v1], only the storage version")

	// Run again, human output: every object is already current.
	r = runCluster(t, "migrate", name, "--checkpoint", cp)
	if r.code != 0 {
		t.Fatalf("second run: exit %d:\n%s%s", r.code, r.stdout, r.stderr)
	}
	mustContain(t, "second run", r.stdout, "already current     40", "status.storedVersions: status.storedVersions is already [v1]")
}

func TestMigrateStatusPending(t *testing.T) {
	name, _, _ := migrateFixture(t, "pending", 3)
	r := runCluster(t, "migrate", name, "--to", "v1", "--yes", "--no-trim", "--quiet", "--checkpoint", filepath.Join(t.TempDir(), "unused"))
	if r.code != 0 {
		t.Fatalf("exit %d:\n%s%s", r.code, r.stdout, r.stderr)
	}
	mustContain(t, "--no-trim run", r.stdout, "status.storedVersions left as it is (--no-trim)")
	// No record of the run in this checkpoint file: not known to be safe.
	r = runCluster(t, "migrate", "status", name, "--checkpoint", filepath.Join(t.TempDir(), "none"))
	if r.code != ExitProblems {
		t.Fatalf("status: exit %d, want 1:\n%s%s", r.code, r.stdout, r.stderr)
	}
	mustContain(t, "status", r.stdout, "storedVersions:    [v1beta1 v1]", "migration pending: yes", "trim safe:         no: no record of a migration: objects may still be stored at v1beta1")
}

func TestMigrateWebhookRejectsSomeObjects(t *testing.T) {
	name, group, nss := migrateFixture(t, "webhook", 20)
	env.RejectUpdates(t, schema.GroupVersionResource{Group: group, Version: "v1beta1", Resource: "gadgets"}, nss[1], "gadget-007",
		func(_, name string) string {
			if strings.HasSuffix(name, "7") {
				return "gadgets ending in 7 are frozen"
			}
			return ""
		})

	// The preflight's dry runs meet the webhook's "no": refused before the storage switch.
	cp := filepath.Join(t.TempDir(), "cp")
	_, rev := storedAt(t, group)
	r := runCluster(t, "migrate", name, "--to", "v1", "--yes", "--quiet", "--checkpoint", cp)
	if r.code != ExitProblems {
		t.Fatalf("exit %d, want 1:\n%s%s", r.code, r.stdout, r.stderr)
	}
	mustContain(t, "preflight stdout", r.stdout, "2 objects would be rejected by a write at v1", "gadget-007", "gadget-017", "gadgets ending in 7")
	mustContain(t, "preflight stderr", r.stderr, "refusing before any write", "--skip-invalid")
	if _, rev2 := storedAt(t, group); rev2 != rev || crdOf(t, name).Status.StoredVersions[0] != "v1beta1" || len(crdOf(t, name).Status.StoredVersions) != 1 {
		t.Fatalf("the refused run wrote something: etcd revision %d -> %d, storedVersions %v", rev, rev2, crdOf(t, name).Status.StoredVersions)
	}

	// --skip-invalid: the others are rewritten, the two fail and keep storedVersions untrimmed.
	r = runCluster(t, "migrate", name, "--to", "v1", "--yes", "--quiet", "--skip-invalid", "--checkpoint", cp)
	if r.code != ExitProblems {
		t.Fatalf("exit %d, want 1:\n%s%s", r.code, r.stdout, r.stderr)
	}
	mustContain(t, "stdout", r.stdout,
		"rewritten           18", "failed              2",
		"Objects that could not be rewritten:",
		"gadget-007", "gadget-017", "gadgets ending in 7 are frozen",
		"status.storedVersions not trimmed (still [v1beta1 v1]): 2 objects could not be rewritten")
	mustContain(t, "stderr", r.stderr, "2 objects could not be rewritten")
	if got := crdOf(t, name).Status.StoredVersions; len(got) != 2 {
		t.Errorf("storedVersions = %v, want [v1beta1 v1] untouched", got)
	}
	stored, _ := storedAt(t, group)
	if stored[group+"/v1"] != 18 || stored[group+"/v1beta1"] != 2 {
		t.Errorf("etcd = %v, want 18 at v1 and the 2 rejected at v1beta1", stored)
	}
}

func TestMigrateWithoutUpdateRights(t *testing.T) {
	ctx := context.Background()
	name, group, _ := migrateFixture(t, "rbac", 4)
	kube := kubernetes.NewForConfigOrDie(env.Config)
	role := &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "gadget-reader"},
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{group}, Resources: []string{"gadgets"}, Verbs: []string{"get", "list"}},
			{APIGroups: []string{"apiextensions.k8s.io"}, Resources: []string{"customresourcedefinitions"}, Verbs: []string{"get", "list"}},
		},
	}
	if _, err := kube.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "gadget-reader"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: "User", Name: "reader"}},
	}
	if _, err := kube.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	_, rev := storedAt(t, group)
	crdBefore := crdOf(t, name)

	r := runCluster(t, "migrate", name, "--to", "v1", "--yes", "--as", "reader", "--checkpoint", filepath.Join(t.TempDir(), "cp"))
	if r.code != ExitUnavailable {
		t.Fatalf("exit %d, want 3:\n%s%s", r.code, r.stdout, r.stderr)
	}
	mustContain(t, "stderr", r.stderr,
		"you may not update gadgets."+group,
		"update customresourcedefinitions.apiextensions.k8s.io "+name,
		"update customresourcedefinitions.apiextensions.k8s.io/status "+name,
		"nothing was written")
	if strings.Contains(r.stderr, "list gadgets") {
		t.Errorf("the reader may list gadgets, yet the error says otherwise:\n%s", r.stderr)
	}
	_, rev2 := storedAt(t, group)
	if rev2 != rev {
		t.Errorf("etcd revision moved from %d to %d: something was written", rev, rev2)
	}
	if crd := crdOf(t, name); crd.ResourceVersion != crdBefore.ResourceVersion {
		t.Errorf("the CRD changed (resourceVersion %s -> %s)", crdBefore.ResourceVersion, crd.ResourceVersion)
	}
}

func TestMigrateUsageErrors(t *testing.T) {
	name, _, _ := migrateFixture(t, "usage", 1)
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"migrate", name, "--to", "v9", "--dry-run"}, ExitUsage, `version "v9" is not in spec.versions (have: v1, v1beta1)`},
		{[]string{"migrate", name, "--engine", "magic"}, ExitUsage, `--engine "magic" is not supported: use client or cluster`},
		{[]string{"migrate", name, "--concurrency", "-1"}, ExitUsage, "--concurrency must be 0 (adaptive) or more"},
		{[]string{"migrate"}, ExitUsage, "migrate takes one CRD name"},
		{[]string{"migrate", name, "--checkpoint", "/dev/null/cp.json"}, ExitUnavailable, "the checkpoint: open /dev/null/cp.json: not a directory (give another file with --checkpoint)"},
		{[]string{"migrate", "nosuchthing"}, ExitUsage, `no CustomResourceDefinition matches "nosuchthing"`},
	} {
		r := runCluster(t, tc.args...)
		if r.code != tc.code || !strings.Contains(r.stderr, tc.want) {
			t.Errorf("%v: exit %d (want %d), stderr:\n%s\nwant it to contain %q", tc.args, r.code, tc.code, r.stderr, tc.want)
		}
	}
}

// interruptAfterAPage runs `migrate NAME --to v1 --yes` slowly (--qps 20, --concurrency 2,
// --chunk-size 5, plus flags) with checkpoint cp, and cancels its context (what main does on
// SIGINT/SIGTERM) once the checkpoint has saved a page; it returns what the command printed
// and its error.
func interruptAfterAPage(t *testing.T, name, cp string, flags ...string) (stdout, stderr string, err error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		deadline := time.Now().Add(time.Minute)
		for time.Now().Before(deadline) {
			if b, err := os.ReadFile(cp); err == nil {
				var saved struct{ Pages int64 }
				if json.Unmarshal(b, &saved) == nil && saved.Pages > 0 {
					cancel()
					return
				}
			}
			time.Sleep(5 * time.Millisecond)
		}
	}()
	streams, _, out, errOut := genericiooptions.NewTestIOStreams()
	root := NewRootCmd(streams)
	root.SetArgs(append([]string{"migrate", name, "--to", "v1", "--yes", "--qps", "20", "--concurrency", "2", "--chunk-size", "5", "--checkpoint", cp, "--kubeconfig", env.Kubeconfig}, flags...))
	err = root.ExecuteContext(ctx)
	return out.String(), errOut.String(), err
}

func TestMigrateInterruptedThenResumed(t *testing.T) {
	name, group, _ := migrateFixture(t, "interrupt", 60)
	cp := filepath.Join(t.TempDir(), "cp.json")

	out, errOut, err := interruptAfterAPage(t, name, cp)
	if code := ExitCode(err); code != ExitUnavailable || err == nil {
		t.Fatalf("interrupted run: exit %d (%v), want 3:\n%s%s", code, err, out, errOut)
	}
	msg := err.Error()
	if !strings.Contains(msg, "interrupted:") || !strings.Contains(msg, "resume with: kubectl crdver migrate "+name) {
		t.Fatalf("interrupted run error = %q, want it to say how to resume", msg)
	}
	mid, _ := storedAt(t, group)
	if mid[group+"/v1beta1"] == 0 {
		t.Fatalf("etcd after the interruption = %v: the run was not interrupted mid-way", mid)
	}
	if got := crdOf(t, name).Status.StoredVersions; len(got) != 2 {
		t.Fatalf("an interrupted run trimmed storedVersions: %v", got)
	}
	// Run the command it printed (minus "kubectl crdver").
	_, resume, _ := strings.Cut(msg, "resume with: kubectl crdver ")
	args := append(strings.Fields(resume), "--progress-interval=100ms")
	r := run(t, "", args...)
	if r.code != 0 {
		t.Fatalf("resumed run %v: exit %d:\n%s%s", args, r.code, r.stdout, r.stderr)
	}
	// stderr is not a terminal: plain progress lines, with counts, rate and ETA.
	mustContain(t, "resumed run's stderr", r.stderr, "/60 objects (rewritten ", "objects/s, ETA ")
	mustContain(t, "resumed run", r.stdout, "Note: resumed from checkpoint "+cp, "total               60", "status.storedVersions: [v1beta1 v1] -> [v1]")
	// The checkpoint is read once and the resume reported once.
	if n := strings.Count(r.stdout+r.stderr, "resum"); n != 1 {
		t.Errorf("the resume is reported %d times, want once:\n%s%s", n, r.stdout, r.stderr)
	}
	stored, _ := storedAt(t, group)
	if len(stored) != 1 || stored[group+"/v1"] != 60 {
		t.Errorf("etcd after the resumed run = %v, want all 60 at v1", stored)
	}
}

func TestMigrateValidate(t *testing.T) {
	for _, tc := range []struct {
		name   string
		mutate func(*MigrateOptions)
		want   string
	}{
		{"defaults", func(*MigrateOptions) {}, ""},
		{"engine", func(o *MigrateOptions) { o.Engine = "fast" }, `--engine "fast" is not supported`},
		{"concurrency", func(o *MigrateOptions) { o.Concurrency = -1 }, "--concurrency must be 0 (adaptive) or more"},
		{"qps", func(o *MigrateOptions) { o.QPS = -1 }, "--qps must be 0 (no limit) or more"},
		{"chunk", func(o *MigrateOptions) { o.ChunkSize = 0 }, "--chunk-size must be at least 1"},
		{"checkpoint with cluster", func(o *MigrateOptions) { o.Engine = engineCluster; o.Checkpoint = "x" }, "--checkpoint is for --engine client"},
		{"detach with cluster", func(o *MigrateOptions) { o.Engine = engineCluster; o.Detach = true }, ""},
		{"detach with client", func(o *MigrateOptions) { o.Detach = true }, "--detach is for --engine cluster"},
		{"detach dry run", func(o *MigrateOptions) { o.Engine = engineCluster; o.Detach = true; o.DryRun = true }, "--detach does not apply to --dry-run"},
		{"detach all", func(o *MigrateOptions) { o.Engine = engineCluster; o.Detach = true; o.All = true }, "--detach is for one CRD"},
		{"output", func(o *MigrateOptions) { o.out.format = "wide" }, `--output "wide" is not supported`},
		{"progress interval", func(o *MigrateOptions) { o.progressFlags.interval = 0 }, "--progress-interval must be positive"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := &MigrateOptions{out: &outputFlags{allowed: []string{outputJSON, outputYAML}}, Engine: engineClient, RewriteFlags: RewriteFlags{Concurrency: 16, ChunkSize: 500}, progressFlags: &progressFlags{interval: time.Second}}
			tc.mutate(o)
			err := o.Validate()
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("unexpected error: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want) || ExitCode(err) != ExitUsage):
				t.Errorf("err = %v (exit %d), want exit 2 with %q", err, ExitCode(err), tc.want)
			}
		})
	}
}

func TestResumeCommandQuotes(t *testing.T) {
	streams, _, _, _ := genericiooptions.NewTestIOStreams()
	root := NewRootCmd(streams)
	mig, _, err := root.Find([]string{"migrate"})
	if err != nil {
		t.Fatal(err)
	}
	if err := mig.ParseFlags([]string{"--to", "v1", "--yes", "--qps", "50", "--no-trim", "--quiet=false", "--checkpoint", "/tmp/old"}); err != nil {
		t.Fatal(err)
	}
	o := &MigrateOptions{cmd: mig}
	got := o.resumeCommand("crontabs.stable.example.com", "/home/me/my cache/cp.json")
	// A bool flag set to false stays false (not "--quiet", which would mean true).
	want := "kubectl crdver migrate crontabs.stable.example.com --no-trim --qps=50 --quiet=false --checkpoint='/home/me/my cache/cp.json'"
	if got != want {
		t.Errorf("resume command:\n got %s\nwant %s", got, want)
	}
}
