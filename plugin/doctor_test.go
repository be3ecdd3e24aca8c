package plugin

import (
	"context"
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	crdinfo "github.com/crdver/kubectl-crdver/crd"
	"github.com/crdver/kubectl-crdver/internal/testcrd"
	"github.com/crdver/kubectl-crdver/internal/testenv"
	"github.com/crdver/kubectl-crdver/internal/testwebhook"
	"github.com/crdver/kubectl-crdver/kubeversion"
)

func doctorSpec() apiextensionsv1.JSONSchemaProps {
	return apiextensionsv1.JSONSchemaProps{Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{"size": {Type: "integer"}}}
}

func TestDoctorCommand(t *testing.T) {
	ctx := context.Background()
	clean := testenv.TwoVersionCRD("clean.doctorcmd.test", "widgets", "Widget", doctorSpec())
	clean.Spec.Versions = clean.Spec.Versions[1:]
	clean.Spec.Versions[0].Storage = true
	registerCRD(t, clean)

	pending := testenv.TwoVersionCRD("pending.doctorcmd.test", "widgets", "Widget", doctorSpec())
	registerCRD(t, pending)
	if err := env.CreateObjects(ctx, pending, []string{"default"}, 2); err != nil {
		t.Fatal(err)
	}
	c, err := apiextensionsclient.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := c.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, pending.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		cur.Spec.Versions[0].Storage, cur.Spec.Versions[1].Storage = false, true
		_, err = c.ApiextensionsV1().CustomResourceDefinitions().Update(ctx, cur, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}

	// A webhook nobody listens on: an error.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	deadURL := "https://" + l.Addr().String() + "/convert"
	l.Close()
	dead := testcrd.With(webhookCRD(t, nil, "dead.doctorcmd.test"), testcrd.Webhook(deadURL, nil, "v1", "v1beta1"))
	registerCRD(t, dead)

	t.Run("clean", func(t *testing.T) {
		r := runCluster(t, "doctor", clean.Name)
		if r.code != 0 {
			t.Fatalf("exit %d: %s", r.code, r.stderr)
		}
		want := "CRD                            ERRORS   WARNINGS   FIRST FINDING\nwidgets.clean.doctorcmd.test   0        0          ok\n"
		if diff := cmp.Diff(want, r.stdout); diff != "" {
			t.Errorf("table (-want +got):\n%s", diff)
		}
	})
	t.Run("warnings pass unless --fail-on warning", func(t *testing.T) {
		r := runCluster(t, "doctor", pending.Name, clean.Name)
		if r.code != 0 {
			t.Fatalf("exit %d: %s", r.code, r.stderr)
		}
		mustContain(t, "stdout", r.stdout, "widgets.pending.doctorcmd.test   0        1          warning storage: migration pending")
		r = runCluster(t, "doctor", pending.Name, clean.Name, "--fail-on", "warning")
		if r.code != 1 {
			t.Fatalf("exit %d, want 1: %s", r.code, r.stderr)
		}
		mustContain(t, "stderr", r.stderr, "error: 0 error(s), 1 warning(s) found in 2 CRD(s)")
	})
	t.Run("wide", func(t *testing.T) {
		r := runCluster(t, "doctor", pending.Name, "-o", "wide")
		mustContain(t, "stdout", r.stdout, "CRD", "CHECK", "SEVERITY", "MESSAGE", "FIX", "kubectl crdver migrate widgets.pending.doctorcmd.test")
	})
	t.Run("error exits 1", func(t *testing.T) {
		r := runCluster(t, "doctor", dead.Name, "--webhook-timeout", "3s")
		if r.code != 1 {
			t.Fatalf("exit %d, want 1: %s\n%s", r.code, r.stderr, r.stdout)
		}
		mustContain(t, "stdout", r.stdout, "error webhook: webhook is down")
	})
	t.Run("json shape", func(t *testing.T) {
		r := runCluster(t, "doctor", pending.Name, clean.Name, "-o", "json")
		var doc map[string]any
		if err := json.Unmarshal([]byte(r.stdout), &doc); err != nil {
			t.Fatalf("%v:\n%s", err, r.stdout)
		}
		if got := keys(doc); !cmp.Equal(got, []string{"items", "kubernetesVersion", "summary"}) {
			t.Errorf("top-level keys %v", got)
		}
		// Live: the test API server's own version (the current binary, as linked).
		if doc["kubernetesVersion"] != kubeversion.Newest.String() {
			t.Errorf("kubernetesVersion %v, want the server's %s", doc["kubernetesVersion"], kubeversion.Newest)
		}
		items := doc["items"].([]any)
		if len(items) != 2 {
			t.Fatalf("%d items", len(items))
		}
		it := items[0].(map[string]any)
		if got := keys(it); !cmp.Equal(got, []string{"crd", "findings"}) || it["crd"] != clean.Name {
			t.Errorf("item %v", it)
		}
		f := items[1].(map[string]any)["findings"].([]any)[0].(map[string]any)
		if got := keys(f); !cmp.Equal(got, []string{"check", "fix", "message", "severity"}) {
			t.Errorf("finding keys %v", got)
		}
		s := doc["summary"].(map[string]any)
		if s["crds"] != 2.0 || s["errors"] != 0.0 || s["warnings"] != 1.0 {
			t.Errorf("summary %v", s)
		}
		r = runCluster(t, "doctor", pending.Name, "-o", "yaml")
		mustContain(t, "yaml", r.stdout, "items:\n- crd: widgets.pending.doctorcmd.test\n  findings:\n  - check: storage\n")
	})
	t.Run("progress counts the objects read", func(t *testing.T) {
		// Not a terminal: plain lines, as plan's and the preflight's, with the objects read so
		// far (the census reads each of pending's 2 objects; the data-loss check reads them
		// again) and the CRDs checked; the last line once both CRDs are done.
		r := runCluster(t, "doctor", pending.Name, clean.Name, "--progress-interval", "1ms")
		if r.code != 0 {
			t.Fatalf("exit %d: %s", r.code, r.stderr)
		}
		lines := regexp.MustCompile(`(?m)^doctor: (\d+)/\? objects read \((\d)/2 CRDs checked\), \d+ objects/s, ETA \?$`).FindAllStringSubmatch(r.stderr, -1)
		if len(lines) == 0 {
			t.Fatalf("no progress line counting objects:\n%s", r.stderr)
		}
		last := lines[len(lines)-1]
		if n, _ := strconv.Atoi(last[1]); n < 2 || last[2] != "2" {
			t.Errorf("last progress line %q: want at least pending's 2 objects read, both CRDs checked", last[0])
		}
	})
	t.Run("usage", func(t *testing.T) {
		for _, args := range [][]string{
			{"doctor", "--fail-on", "info"},
			{"doctor", "nosuchthings.example.com"},
			{"doctor", "-o", "name"},
			{"doctor", "--concurrency", "0"},
		} {
			r := runCluster(t, args...)
			if r.code != 2 || !strings.HasPrefix(r.stderr, "error: ") {
				t.Errorf("%v: exit %d, stderr %q", args, r.code, r.stderr)
			}
		}
	})
}

func keys(m map[string]any) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// TestDoctorInterrupt: Ctrl-C while the webhook and the API server's reads through it hang
// ends the run within a second, exit 3, nothing printed on stdout.
func TestDoctorInterrupt(t *testing.T) {
	srv := testwebhook.StartForTest(t, testwebhook.Options{})
	crd := testcrd.With(webhookCRD(t, nil, "slow.doctorcmd.test"), testcrd.Webhook(srv.URL, srv.CABundle, "v1", "v1beta1"))
	registerCRD(t, crd)
	dyn, err := dynamic.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	obj := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": crd.Spec.Group + "/v1", "kind": "CronTab",
		"metadata": map[string]any{"name": "one", "namespace": "default"},
		"spec":     map[string]any{"host": "db", "port": "5432"},
	}}
	if _, err := dyn.Resource(crdinfo.GVR(crd, "v1")).Namespace("default").Create(context.Background(), obj, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	srv.SetDelay(20 * time.Second)
	srv.Set(testwebhook.Slow)

	streams, _, out, errOut := genericiooptions.NewTestIOStreams()
	root := NewRootCmd(streams)
	root.SetArgs([]string{"doctor", crd.Name, "--kubeconfig", env.Kubeconfig, "--webhook-timeout", "30s"})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- root.ExecuteContext(ctx) }()
	time.Sleep(500 * time.Millisecond)
	cancel()
	start := time.Now()
	select {
	case err := <-done:
		if ExitCode(err) != ExitUnavailable {
			t.Errorf("exit %d (%v), want 3", ExitCode(err), err)
		}
		if time.Since(start) > time.Second {
			t.Errorf("stopped %v after the interrupt", time.Since(start))
		}
	case <-time.After(10 * time.Second):
		t.Fatal("doctor did not stop within 10s of the interrupt")
	}
	if out.Len() != 0 {
		t.Errorf("stdout after an interrupt: %q (stderr %q)", out.String(), errOut.String())
	}
}

// TestDoctorIncomplete: a user who may read CRDs but not their objects gets every check that
// needs no objects, the others listed as unknown, and exit 3.
func TestDoctorIncomplete(t *testing.T) {
	ctx := context.Background()
	crd := testenv.TwoVersionCRD("rbac.doctorcmd.test", "widgets", "Widget", doctorSpec())
	registerCRD(t, crd)
	core, err := kubernetes.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "doctor-crd-reader"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{"apiextensions.k8s.io"}, Resources: []string{"customresourcedefinitions"}, Verbs: []string{"get", "list"}}}}
	if _, err := core.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "doctor-crd-reader"},
		RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: role.Name},
		Subjects: []rbacv1.Subject{{Kind: "User", APIGroup: "rbac.authorization.k8s.io", Name: "doctor-viewer"}}}
	if _, err := core.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = core.RbacV1().ClusterRoleBindings().Delete(context.Background(), binding.Name, metav1.DeleteOptions{})
		_ = core.RbacV1().ClusterRoles().Delete(context.Background(), role.Name, metav1.DeleteOptions{})
	})
	user, err := env.ControlPlane().AddUser(envtest.User{Name: "doctor-viewer"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	kc, err := user.KubeConfig()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(path, kc, 0o600); err != nil {
		t.Fatal(err)
	}
	r := run(t, "", "doctor", crd.Name, "--kubeconfig", path)
	if r.code != 3 {
		t.Fatalf("exit %d, want 3: %s\n%s", r.code, r.stderr, r.stdout)
	}
	mustContain(t, "stderr", r.stderr, "unknown: widgets.rbac.doctorcmd.test storage: counting managedFields", "forbidden",
		"error: 1 check(s) could not be completed, their answer is unknown")
	// The checks that need no objects still ran.
	mustContain(t, "stdout", r.stdout, "widgets.rbac.doctorcmd.test")
}
