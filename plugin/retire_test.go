package plugin

import (
	"context"
	"encoding/json"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"

	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
)

// The command end to end: versions and migrate status count the managedFields entries per
// version, --dry-run plans, a "no" writes nothing, --yes --remove retires, and the counts show
// the entries moved.
func TestRetireCommand(t *testing.T) {
	name, group, nss := migrateFixture(t, "retirecmd", 4)
	ctx := context.Background()
	gvr := schema.GroupVersionResource{Group: group, Version: "v1beta1", Resource: "gadgets"}
	body := `{"apiVersion":"` + group + `/v1beta1","kind":"Gadget","metadata":{"name":"gadget-000","namespace":"` + nss[0] + `"},"spec":{"size":7}}`
	force := true
	if _, err := dynamic.NewForConfigOrDie(env.Config).Resource(gvr).Namespace(nss[0]).Patch(ctx, "gadget-000", types.ApplyPatchType, []byte(body), metav1.PatchOptions{FieldManager: "applier", Force: &force}); err != nil {
		t.Fatal(err)
	}
	cp := filepath.Join(t.TempDir(), "cp.json")

	r := runCluster(t, "versions", name)
	mustContain(t, "versions", r.stdout, "note: objects holding managedFields entries, per version: v1beta1 4 (of 4 objects)")
	r = runCluster(t, "versions", name, "-o", "json")
	var vj struct {
		Versions      []map[string]any `json:"versions"`
		ManagedFields struct {
			Objects  int64 `json:"objects"`
			Versions []struct {
				Version  string `json:"version"`
				Objects  int64  `json:"objects"`
				Managers []struct {
					Manager string `json:"manager"`
				} `json:"managers"`
			} `json:"versions"`
		} `json:"managedFields"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &vj); err != nil {
		t.Fatalf("versions -o json: %v\n%s", err, r.stdout)
	}
	if len(vj.Versions) != 2 || vj.ManagedFields.Objects != 4 || len(vj.ManagedFields.Versions) != 1 || vj.ManagedFields.Versions[0].Objects != 4 {
		t.Fatalf("versions -o json: %s", r.stdout)
	}
	r = runCluster(t, "migrate", "status", name, "-o", "json", "--checkpoint", cp)
	if !strings.Contains(r.stdout, `"managedFields": {`) || !strings.Contains(r.stdout, `"migrationPending": false`) {
		t.Errorf("migrate status -o json:\n%s", r.stdout)
	}

	r = runCluster(t, "retire", name, "v1beta1", "--dry-run", "--remove", "--checkpoint", cp)
	if r.code != 0 {
		t.Fatalf("--dry-run: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	mustContain(t, "--dry-run", r.stdout, "Retire v1beta1 of "+name, "target version:   v1", "applier", "1. switch storage", "pending", "Dry run: nothing was written.")

	r = run(t, "n\n", "retire", name, "v1beta1", "--remove", "--checkpoint", cp, "--kubeconfig", env.Kubeconfig)
	if r.code != ExitUnavailable || !strings.Contains(r.stderr, "nothing was written: not confirmed") {
		t.Fatalf("answer no: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if crdOf(t, name).Spec.Versions[0].Storage != true {
		t.Fatal("the storage version changed although the answer was no")
	}

	// migrate moves the entries to v1 within its rewrite: nothing is left for retire to move.
	r = runCluster(t, "migrate", name, "--to", "v1", "--yes", "--quiet", "--checkpoint", cp)
	if r.code != 0 {
		t.Fatalf("migrate: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	r = runCluster(t, "versions", name)
	mustContain(t, "versions after migrate", r.stdout, "note: objects holding managedFields entries, per version: v1 4 (of 4 objects)")

	r = runCluster(t, "retire", name, "v1beta1", "--remove", "--yes", "--quiet", "--checkpoint", cp)
	if r.code != 0 {
		t.Fatalf("retire: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	mustContain(t, "retire", r.stdout, "Result:", "1. switch storage        already done", "2. rewrite objects       already done", "4. move managedFields    already done", "6. remove", "v1beta1 removed from spec.versions")
	crd := crdOf(t, name)
	if len(crd.Spec.Versions) != 1 || crd.Spec.Versions[0].Name != "v1" {
		t.Fatalf("versions after retire: %+v", crd.Spec.Versions)
	}
	r = runCluster(t, "migrate", "status", name, "--checkpoint", cp)
	mustContain(t, "migrate status after retire", r.stdout, "note: objects holding managedFields entries, per version: v1 4 (of 4 objects)")
}

// A CRD that a deployment tool manages is not changed without --force; usage errors exit 2.
func TestRetireCommandRefusals(t *testing.T) {
	name, _, _ := migrateFixture(t, "retirehelm", 2)
	ctx := context.Background()
	cs := apiextensionsclient.NewForConfigOrDie(env.Config)
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		crd, err := cs.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		crd.Labels = map[string]string{"app.kubernetes.io/managed-by": "Helm"}
		crd.Annotations = map[string]string{"meta.helm.sh/release-name": "gadgets", "meta.helm.sh/release-namespace": "apps"}
		_, err = cs.ApiextensionsV1().CustomResourceDefinitions().Update(ctx, crd, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	cp := filepath.Join(t.TempDir(), "cp.json")
	r := runCluster(t, "retire", name, "v1beta1", "--unserve", "--yes", "--quiet", "--checkpoint", cp)
	if r.code != ExitProblems {
		t.Fatalf("exit %d, want 1\n%s%s", r.code, r.stdout, r.stderr)
	}
	mustContain(t, "stdout", r.stdout, `is managed by Helm (release "gadgets" in namespace "apps", annotations meta.helm.sh/release-name, meta.helm.sh/release-namespace)`, "refused")
	mustContain(t, "stderr", r.stderr, "error: "+name+": v1beta1 cannot be dropped safely yet")
	for _, v := range crdOf(t, name).Spec.Versions {
		if v.Name == "v1beta1" && !v.Served {
			t.Fatal("v1beta1 unserved on a Helm-managed CRD without --force")
		}
	}
	// Everything but the unserve was done; with --force the run continues from the live state.
	r = runCluster(t, "retire", name, "v1beta1", "--unserve", "--yes", "--quiet", "--force", "--checkpoint", cp)
	if r.code != 0 {
		t.Fatalf("--force: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	mustContain(t, "--force", r.stdout, "already done", "v1beta1 is no longer served")

	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"retire", name}, "retire takes a CRD and a version, got 1 arguments"},
		{[]string{"retire", name, "v9"}, `version "v9" is not in spec.versions (have: v1, v1beta1)`},
		{[]string{"retire", name, "v1", "--to", "v1"}, "--to v1 is the version being retired"},
		{[]string{"retire", name, "v1beta1", "--to", "v7"}, `version "v7" is not in spec.versions`},
	} {
		r := runCluster(t, tc.args...)
		if r.code != ExitUsage || !strings.Contains(r.stderr, tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want 2 and %q", tc.args, r.code, r.stderr, tc.want)
		}
	}
}

// Without the rights to write, retire says which are missing and writes nothing.
func TestRetireWithoutRights(t *testing.T) {
	ctx := context.Background()
	name, group, _ := migrateFixture(t, "retirerbac", 3)
	kube := kubernetes.NewForConfigOrDie(env.Config)
	role := &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "retire-reader"},
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{group}, Resources: []string{"gadgets"}, Verbs: []string{"get", "list"}},
			{APIGroups: []string{"apiextensions.k8s.io"}, Resources: []string{"customresourcedefinitions"}, Verbs: []string{"get", "list"}},
			{APIGroups: []string{"authorization.k8s.io"}, Resources: []string{"selfsubjectaccessreviews"}, Verbs: []string{"create"}},
		},
	}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "retire-reader"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: "User", Name: "retire-reader"}},
	}
	if _, err := kube.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = kube.RbacV1().ClusterRoles().Delete(context.Background(), role.Name, metav1.DeleteOptions{})
	})
	if _, err := kube.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = kube.RbacV1().ClusterRoleBindings().Delete(context.Background(), binding.Name, metav1.DeleteOptions{})
	})
	// etcd's revision is global (the API server's own leases move it), so the objects'
	// resourceVersions are what must not move.
	objectVersions := func() map[string]string {
		list, err := dynamic.NewForConfigOrDie(env.Config).Resource(schema.GroupVersionResource{Group: group, Version: "v1beta1", Resource: "gadgets"}).List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]string{}
		for _, o := range list.Items {
			out[o.GetNamespace()+"/"+o.GetName()] = o.GetResourceVersion()
		}
		return out
	}
	rvs := objectVersions()
	before := crdOf(t, name)

	r := runCluster(t, "retire", name, "v1beta1", "--remove", "--yes", "--as", "retire-reader", "--checkpoint", filepath.Join(t.TempDir(), "cp"))
	if r.code != ExitUnavailable {
		t.Fatalf("exit %d, want 3:\n%s%s", r.code, r.stdout, r.stderr)
	}
	mustContain(t, "stderr", r.stderr, "you may not update gadgets."+group, "update customresourcedefinitions.apiextensions.k8s.io "+name, "nothing was written")
	if after := objectVersions(); !reflect.DeepEqual(after, rvs) || len(after) != 3 {
		t.Errorf("objects changed: resourceVersions %v, then %v", rvs, after)
	}
	if crd := crdOf(t, name); crd.ResourceVersion != before.ResourceVersion {
		t.Errorf("the CRD changed")
	}
}

// retire's --engine and --detach are migrate's (validateEngineFlags): refused as usage (exit
// 2) before anything is read, with the same words.
func TestRetireEngineFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--engine", "fast"}, `--engine "fast" is not supported`},
		{[]string{"--detach"}, "--detach is for --engine cluster"},
		{[]string{"--engine", "client", "--detach"}, "--detach is for --engine cluster"},
		{[]string{"--engine", "cluster", "--detach", "--dry-run"}, "--detach does not apply to --dry-run"},
		{[]string{"--engine", "cluster", "--checkpoint", "cp.json"}, "--checkpoint is for --engine client"},
	} {
		// No cluster is reachable at this address: a usage error comes first, or the run fails.
		r := run(t, "", append([]string{"retire", "things.example.com", "v1beta1", "--kubeconfig", filepath.Join(t.TempDir(), "none")}, tc.args...)...)
		if r.code != ExitUsage || !strings.Contains(r.stderr, tc.want) {
			t.Errorf("retire %v: exit %d, want %d with %q\n%s", tc.args, r.code, ExitUsage, tc.want, r.stderr)
		}
	}
}
