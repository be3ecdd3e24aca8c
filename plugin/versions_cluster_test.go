package plugin

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/discovery"

	crdinfo "github.com/crdver/kubectl-crdver/crd"
	"github.com/crdver/kubectl-crdver/crdsource"
	"github.com/crdver/kubectl-crdver/explain"
)

// The files whose CRDs the versions integration tests create.
var clusterCRDFiles = []string{
	filepath.Join("..", "testdata", "crds", "group-mixed.yaml"),
	filepath.Join("..", "testdata", "crds", "widgets-v1beta1.yaml"),
	filepath.Join("testdata", "versions-cluster.yaml"),
}

// createVersionsCRDs creates (once per package run) every CRD of clusterCRDFiles in the test API
// server and returns them as read back from it.
func createVersionsCRDs(t *testing.T) []*apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	docs, err := ReadDocuments(clusterCRDFiles, nil)
	if err != nil {
		t.Fatal(err)
	}
	crds, _, err := crdsource.CRDsOf(docs)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	var out []*apiextensionsv1.CustomResourceDefinition
	for _, crd := range crds {
		crd.Status = apiextensionsv1.CustomResourceDefinitionStatus{}
		// v1 servers refuse preserveUnknownFields: true, which v1beta1 files default to.
		crd.Spec.PreserveUnknownFields = false
		got, err := env.CreateCRD(ctx, crd)
		if apierrors.IsAlreadyExists(err) {
			got, err = env.WaitEstablished(ctx, crd.Name)
		}
		if err != nil {
			t.Fatalf("creating %s: %v", crd.Name, err)
		}
		out = append(out, got)
	}
	return out
}

// discoveryPreferred asks the live API server's discovery for the preferred version of each
// group ("" when the group is not in discovery).
func discoveryPreferred(t *testing.T, groups []string) map[string]string {
	t.Helper()
	dc, err := discovery.NewDiscoveryClientForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	list, err := dc.ServerGroups()
	if err != nil {
		t.Fatal(err)
	}
	all := map[string]string{}
	for _, g := range list.Groups {
		all[g.Name] = g.PreferredVersion.Version
	}
	out := map[string]string{}
	for _, g := range groups {
		out[g] = all[g]
	}
	return out
}

// TestVersionsPreferredMatchesDiscovery: for several CRDs sharing a group, unserved versions,
// betas compared numerically and non-Kubernetes version names, the preferred version that
// `versions` reports — from the cluster, from --all, and worked out offline from the files —
// equals what the live API server's discovery reports.
func TestVersionsPreferredMatchesDiscovery(t *testing.T) {
	crds := createVersionsCRDs(t)
	groupSet := map[string]bool{}
	for _, c := range crds {
		groupSet[c.Spec.Group] = true
	}
	var groups []string
	for g := range groupSet {
		groups = append(groups, g)
	}
	sort.Strings(groups)

	// Offline computation over the same CRDs: the oracle is discovery, polled until it has
	// caught up with the CRDs just created (discovery is updated asynchronously).
	computed := crdinfo.PreferredVersions(crds)
	var live map[string]string
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		live = discoveryPreferred(t, groups)
		return cmp.Equal(live, pick(computed, groups)), nil
	})
	if err != nil {
		t.Fatalf("preferred versions worked out from the CRDs differ from discovery (-discovery +computed):\n%s", cmp.Diff(live, pick(computed, groups)))
	}
	// The cases this exercises really happened: a group whose preferred version is not the
	// storage version of any of its CRDs, a beta compared numerically, an absent group.
	want := map[string]string{"mixed.example.com": "v1beta2", "betas.example.com": "v1beta10", "hidden.example.com": "", "other.example.com": "v1", "legacy.example.com": "v1beta2", "third.example.com": "v1"}
	if diff := cmp.Diff(want, live); diff != "" {
		t.Errorf("discovery does not show the cases this test is meant to cover (-want +got):\n%s", diff)
	}

	for _, c := range crds {
		t.Run(c.Name, func(t *testing.T) {
			for _, args := range [][]string{
				{"versions", c.Name, "-o", "json", "--kubeconfig", env.Kubeconfig},
				append([]string{"versions", c.Name, "-o", "json"}, fileArgs(clusterCRDFiles)...),
			} {
				r := run(t, "", args...)
				if r.code != 0 {
					t.Fatalf("%s: exit %d: %s", strings.Join(args, " "), r.code, r.stderr)
				}
				var rep explain.VersionsReport
				if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
					t.Fatal(err)
				}
				if rep.PreferredVersion != live[c.Spec.Group] {
					t.Errorf("%s: preferredVersion %q, discovery says %q", strings.Join(args[:2], " "), rep.PreferredVersion, live[c.Spec.Group])
				}
				for _, v := range rep.Versions {
					if v.Preferred != (v.Name == live[c.Spec.Group]) {
						t.Errorf("%s: version %s marked preferred=%v", c.Name, v.Name, v.Preferred)
					}
				}
			}
		})
	}

	r := runCluster(t, "versions", "--all", "-o", "json")
	var all struct{ Items []explain.Summary }
	if err := json.Unmarshal([]byte(r.stdout), &all); err != nil {
		t.Fatalf("versions --all -o json: %v\n%s", err, r.stdout)
	}
	seen := 0
	for _, s := range all.Items {
		if _, ours := groupSet[s.Group]; !ours {
			continue
		}
		seen++
		if s.PreferredVersion != live[s.Group] {
			t.Errorf("--all: %s preferred %q, discovery says %q", s.Name, s.PreferredVersion, live[s.Group])
		}
	}
	if seen != len(crds) {
		t.Errorf("--all listed %d of the %d CRDs created", seen, len(crds))
	}
}

func pick(m map[string]string, keys []string) map[string]string {
	out := map[string]string{}
	for _, k := range keys {
		out[k] = m[k]
	}
	return out
}

func fileArgs(files []string) []string {
	var out []string
	for _, f := range files {
		out = append(out, "-f", f)
	}
	return out
}

// TestVersionsClusterNames resolves CRDs by every kind of name in the cluster.
func TestVersionsClusterNames(t *testing.T) {
	createVersionsCRDs(t)
	for _, tc := range []struct {
		name, want string
		code       int
		errWant    string
	}{
		{name: "gizmos.mixed.example.com", want: "gizmos.mixed.example.com"},
		{name: "gizmos", want: "gizmos.mixed.example.com"},
		{name: "gizmo", want: "gizmos.mixed.example.com"},
		{name: "gz", want: "gizmos.mixed.example.com"},
		{name: "Gizmo", want: "gizmos.mixed.example.com"},
		{name: "wd", want: "widgets.legacy.example.com"},
		{name: "crontabs.third.example.com", want: "crontabs.third.example.com"},
		{name: "ct", code: 2, errWant: `"ct" is ambiguous: it matches crontabs.other.example.com, crontabs.third.example.com`},
		{name: "nosuch.example.com", code: 2, errWant: `no CustomResourceDefinition matches "nosuch.example.com" (kubectl get crds lists them)`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := runCluster(t, "versions", tc.name, "-o", "json")
			if r.code != tc.code {
				t.Fatalf("exit %d, want %d: %s", r.code, tc.code, r.stderr)
			}
			if tc.code != 0 {
				mustContain(t, "stderr", r.stderr, tc.errWant)
				return
			}
			mustContain(t, "stdout", r.stdout, fmt.Sprintf(`"name": %q`, tc.want))
		})
	}
}

// TestVersionsClusterStoredVersions: storedVersions and the notes come from the live CRD's
// status, which the API server maintains.
func TestVersionsClusterStoredVersions(t *testing.T) {
	createVersionsCRDs(t)
	ctx := context.Background()
	c, err := env.WaitEstablished(ctx, "crontabs.other.example.com")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"v2beta1"}, c.Status.StoredVersions); diff != "" {
		t.Fatalf("server-set storedVersions (-want +got):\n%s", diff)
	}
	// A migration in progress: the server accepts v1 in storedVersions because it is in spec.
	cs, err := newCRDClient(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	c.Status.StoredVersions = []string{"v1", "v2beta1"}
	if _, err := cs.ApiextensionsV1().CustomResourceDefinitions().UpdateStatus(ctx, c, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		c, err := cs.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, "crontabs.other.example.com", metav1.GetOptions{})
		if err == nil {
			c.Status.StoredVersions = []string{"v2beta1"}
			_, _ = cs.ApiextensionsV1().CustomResourceDefinitions().UpdateStatus(ctx, c, metav1.UpdateOptions{})
		}
	})
	r := runCluster(t, "versions", "crontabs.other.example.com")
	golden(t, "versions-cluster-other-crontabs.txt", r.stdout)
	r = runCluster(t, "versions", "crontabs.other.example.com", "--can-remove", "v1")
	if r.code != 1 {
		t.Errorf("--can-remove v1 exit %d, want 1", r.code)
	}
	mustContain(t, "stderr", r.stderr, `crontabs.other.example.com: version "v1" is not safe to remove: in status.storedVersions (migrate first)`)
}

// TestVersionsClusterUnavailable: an unreachable API server and a forbidden request are
// "could not complete" (exit 3) with a line that says what to do.
func TestVersionsClusterUnavailable(t *testing.T) {
	dir := t.TempDir()
	kc := filepath.Join(dir, "kubeconfig")
	// Port 1 on loopback: nothing listens there.
	if err := os.WriteFile(kc, []byte(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1", insecure-skip-tls-verify: true}}]
users: [{name: u, user: {token: x}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
`), 0o600); err != nil {
		t.Fatal(err)
	}
	r := run(t, "", "versions", "crontabs.stable.example.com", "--kubeconfig", kc, "--request-timeout", "5s")
	if r.code != 3 {
		t.Errorf("unreachable: exit %d, want 3 (%s)", r.code, r.stderr)
	}
	mustContain(t, "stderr", r.stderr, "cannot reach the API server", "check --kubeconfig and --context")

	r = runCluster(t, "versions", "--all", "--as", "someone-without-rights")
	if r.code != 3 {
		t.Errorf("forbidden: exit %d, want 3 (%s)", r.code, r.stderr)
	}
	mustContain(t, "stderr", r.stderr, "listing CustomResourceDefinitions", "forbidden", "check your RBAC rights")
	if n := strings.Count(strings.TrimSpace(r.stderr), "\n"); n != 0 {
		t.Errorf("want one error line, got:\n%s", r.stderr)
	}
}

// TestVersionsCompletion completes CRD names from the cluster through cobra's __complete, which
// is what kubectl_complete-crdver calls.
func TestVersionsCompletion(t *testing.T) {
	createVersionsCRDs(t)
	// The word being completed is the last argument, so --kubeconfig goes first.
	r := run(t, "", "__complete", "--kubeconfig", env.Kubeconfig, "versions", "gi")
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	if len(lines) < 2 || lines[0] != "gizmos.mixed.example.com" || !strings.HasPrefix(lines[len(lines)-1], ":") {
		t.Errorf("completion output:\n%s", r.stdout)
	}
}
