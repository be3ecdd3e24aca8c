package plugin

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	crdinfo "github.com/crdver/kubectl-crdver/crd"
	"github.com/crdver/kubectl-crdver/kubeversion"
	"github.com/crdver/kubectl-crdver/plan"
)

// TestKubeVersionFlag: --kube-version is checked before anything is read: not a version or
// older than the oldest supported is a usage error (exit 2, one line); newer than the
// linked libraries is judged as the newest, with a warning (the exit code is unchanged).
func TestKubeVersionFlag(t *testing.T) {
	crd := td("kubeversion", "distinct-crd.yaml")
	tooOld := kubeversion.Oldest.AddMinor(-1).String()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"versions", "-f", crd, "--kube-version", tooOld}, "--kube-version " + tooOld + ": Kubernetes " + tooOld + " is older than the oldest version kubectl-crdver can judge as (" + kubeversion.Oldest.String()},
		{[]string{"versions", "-f", crd, "--kube-version", "latest"}, `--kube-version: "latest" is not a Kubernetes version (want MAJOR.MINOR, e.g. 1.33)`},
		{[]string{"preview", "-f", crd, "--kube-version", "1.2"}, "--kube-version 1.2: Kubernetes 1.2 is older than the oldest"},
		{[]string{"plan", "-f", crd, "--old-file", crd, "--kube-version", tooOld}, "is older than the oldest"},
		{[]string{"explain", "-f", crd, "--kube-version", tooOld}, "is older than the oldest"},
		{[]string{"doctor", "--kube-version", tooOld}, "is older than the oldest"},
	} {
		r := run(t, "", tc.args...)
		if r.code != ExitUsage || strings.Count(r.stderr, "\n") != 1 {
			t.Errorf("%v: exit %d, want 2 with one error line:\n%s", tc.args, r.code, r.stderr)
		}
		mustContain(t, "stderr", r.stderr, tc.want)
	}

	newer := kubeversion.Newest.AddMinor(1).String()
	r := run(t, "", "plan", "-f", crd, "--old-file", td("kubeversion", "bgppeers-crd.yaml"), "--kube-version", newer, "-o", "json")
	if r.code != 0 {
		t.Fatalf("--kube-version %s: exit %d: %s", newer, r.code, r.stderr)
	}
	mustContain(t, "stderr", r.stderr, "warning: Kubernetes "+newer+" is newer than the API server code kubectl-crdver links ("+kubeversion.Newest.String()+"): judged as "+kubeversion.Newest.String())
	var rep plan.Report
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Fatal(err)
	}
	if rep.KubernetesVersion != kubeversion.Newest.String() {
		t.Errorf("kubernetesVersion %q, want %s (the newest known)", rep.KubernetesVersion, kubeversion.Newest)
	}
}

// TestCRDFileValidationAsKubeVersion: the CRD validation of files, and plan's offline apply
// verdict, are those of the chosen version's API server: a rule using distinct() (CEL lists
// library v3, introduced in 1.34) is refused as 1.34 with the server's message and accepted
// as 1.35.
func TestCRDFileValidationAsKubeVersion(t *testing.T) {
	crd := td("kubeversion", "distinct-crd.yaml")
	r := run(t, "", "versions", "-f", crd, "--kube-version", "1.34")
	if r.code != ExitUsage {
		t.Fatalf("as 1.34: exit %d, want 2:\n%s%s", r.code, r.stdout, r.stderr)
	}
	mustContain(t, "stderr", r.stderr, "probes.kubeversion.example.com is invalid: the API server would refuse it (as Kubernetes 1.34; 1 error)", "undeclared reference to 'distinct'")
	for _, v := range []string{"1.35", kubeversion.Newest.String()} {
		if r := run(t, "", "versions", "-f", crd, "--kube-version", v); r.code != 0 {
			t.Errorf("as %s: exit %d:\n%s", v, r.code, r.stderr)
		}
	}
	// Without the flag: the newest known.
	if r := run(t, "", "explain", "-f", crd); r.code != 0 {
		t.Errorf("default: exit %d:\n%s", r.code, r.stderr)
	}

	// plan, offline: the CRD is new (not in --old-file), a create.
	for v, allowed := range map[string]bool{"1.33": false, "1.34": false, "1.35": true} {
		r := run(t, "", "plan", "-f", crd, "--old-file", td("kubeversion", "bgppeers-crd.yaml"), "--kube-version", v, "-o", "json")
		var rep plan.Report
		if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
			t.Fatalf("as %s: %v\n%s%s", v, err, r.stdout, r.stderr)
		}
		it := rep.Items[0]
		if rep.KubernetesVersion != v || it.ApplyVerdictSource != plan.VerdictOffline || it.Apply.Allowed != allowed {
			t.Errorf("as %s: kubernetesVersion %q, source %q, allowed %v; want %s, offline, %v", v, rep.KubernetesVersion, it.ApplyVerdictSource, it.Apply.Allowed, v, allowed)
		}
		if !allowed && (len(it.Apply.Errors) != 1 || !strings.Contains(it.Apply.Errors[0], "undeclared reference to 'distinct'")) {
			t.Errorf("as %s: errors %q", v, it.Apply.Errors)
		}
		mustContain(t, "stderr", r.stderr, "note: judged as Kubernetes "+v+" (--kube-version)")
	}
}

// TestPreviewKnownDifferenceNote: preview judged as a version that behaves differently for a
// known difference (metallb's int32 myASN with maximum 4294967295) says so on the verdict.
func TestPreviewKnownDifferenceNote(t *testing.T) {
	f := td("kubeversion", "bgppeers-crd.yaml")
	for v, want := range map[string]string{
		"1.34": "Kubernetes 1.34 accepts this; 1.36+ reject it, as this verdict does (known difference int32-maximum-format",
		"1.35": "Kubernetes 1.35 accepts this; 1.36+ reject it, as this verdict does (known difference int32-maximum-format",
		"1.36": "Kubernetes 1.32–1.35 accept this; 1.36+ reject it, as here",
	} {
		r := run(t, "", "preview", "-f", f, "--crd-file", f, "--kube-version", v, "-o", "json")
		if r.code != ExitProblems {
			t.Fatalf("as %s: exit %d, want 1 (rejected):\n%s", v, r.code, r.stderr)
		}
		var rep PreviewReport
		if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
			t.Fatal(err)
		}
		if rep.KubernetesVersion != v || len(rep.Items) != 1 {
			t.Fatalf("as %s: kubernetesVersion %q, %d items", v, rep.KubernetesVersion, len(rep.Items))
		}
		if notes := strings.Join(rep.Items[0].Notes, "\n"); !strings.Contains(notes, want) {
			t.Errorf("as %s: notes %q, want %q", v, notes, want)
		}
		human := run(t, "", "preview", "-f", f, "--crd-file", f, "--kube-version", v)
		mustContain(t, "stdout", human.stdout, want)
	}
	// plan's re-create of a live object carries the same note.
	r := run(t, "", "plan", "-f", f, "--old-file", f, "--objects", f, "--kube-version", "1.34", "-o", "json")
	var rep plan.Report
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil || len(rep.Items) != 1 || len(rep.Items[0].Objects.Findings) != 1 {
		t.Fatalf("plan: %v\n%s%s", err, r.stdout, r.stderr)
	}
	fd := rep.Items[0].Objects.Findings[0]
	if len(fd.CreateErrors) == 0 || !strings.Contains(strings.Join(fd.Notes, "\n"), "Kubernetes 1.34 accepts this; 1.36+ reject it") {
		t.Errorf("plan finding: create errors %q, notes %q; want the int32-maximum-format note", fd.CreateErrors, fd.Notes)
	}

	// An object that is rejected for another reason carries no note.
	probe := "apiVersion: kubeversion.example.com/v1\nkind: Probe\nmetadata:\n  name: dup\nspec:\n  items: [a, a]\n"
	r = run(t, probe, "preview", "-f", "-", "--crd-file", td("kubeversion", "distinct-crd.yaml"), "-o", "json")
	if r.code != ExitProblems || !strings.Contains(r.stdout, "items must be unique") {
		t.Fatalf("duplicate items: exit %d, want 1 with the rule's message:\n%s%s", r.code, r.stdout, r.stderr)
	}
	if strings.Contains(r.stdout, "known difference") {
		t.Errorf("unrelated rejection carries a note:\n%s", r.stdout)
	}
}

// TestPlanLiveApplyVerdictFromDryRun: against a cluster where the user may create CRDs, plan's
// apply verdict is the API server's answer to a server-side dry-run: a ValidatingAdmissionPolicy
// that only the server knows refuses the CRD, and nothing is created; without the right, it
// is computed offline. The run says the server's version.
func TestPlanLiveApplyVerdictFromDryRun(t *testing.T) {
	ctx := context.Background()
	kube := kubernetes.NewForConfigOrDie(env.Config)
	crds := apiextensionsclient.NewForConfigOrDie(env.Config)
	file := td("kubeversion", "distinct-crd.yaml")
	name := "probes.kubeversion.example.com"

	planJSON := func(t *testing.T, args ...string) plan.Item {
		t.Helper()
		r := runCluster(t, append([]string{"plan", "-f", file, "-o", "json"}, args...)...)
		var rep plan.Report
		if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil || len(rep.Items) != 1 {
			t.Fatalf("exit %d: %v\n%s%s", r.code, err, r.stdout, r.stderr)
		}
		if rep.KubernetesVersion != kubeversion.Newest.String() {
			t.Errorf("kubernetesVersion %q, want the server's %s", rep.KubernetesVersion, kubeversion.Newest)
		}
		mustContain(t, "stderr", r.stderr, "note: judged as Kubernetes "+kubeversion.Newest.String()+", the cluster's version (v")
		return rep.Items[0]
	}

	it := planJSON(t)
	if it.ApplyVerdictSource != plan.VerdictServerDryRun || !it.Apply.Allowed || it.Operation != plan.OperationCreate {
		t.Errorf("create: source %q, allowed %v, operation %s; want server-dry-run, true, create", it.ApplyVerdictSource, it.Apply.Allowed, it.Operation)
	}

	// A policy only the server enforces.
	policy := &admissionregistrationv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "no-probes"},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			MatchConstraints: &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionregistrationv1.RuleWithOperations{
					Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update},
					Rule:       admissionregistrationv1.Rule{APIGroups: []string{"apiextensions.k8s.io"}, APIVersions: []string{"v1"}, Resources: []string{"customresourcedefinitions"}},
				},
			}}},
			Validations: []admissionregistrationv1.Validation{{Expression: "object.metadata.name != '" + name + "'", Message: "probes are not allowed here"}},
		},
	}
	if _, err := kube.AdmissionregistrationV1().ValidatingAdmissionPolicies().Create(ctx, policy, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	binding := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "no-probes"},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{PolicyName: policy.Name,
			ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny}},
	}
	if _, err := kube.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = kube.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().Delete(ctx, binding.Name, metav1.DeleteOptions{})
		_ = kube.AdmissionregistrationV1().ValidatingAdmissionPolicies().Delete(ctx, policy.Name, metav1.DeleteOptions{})
	})
	// The policy is loaded asynchronously: wait until a dry-run create is refused.
	probe := loadCRDFile(t, file)
	if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		_, err := crds.ApiextensionsV1().CustomResourceDefinitions().Create(ctx, probe.DeepCopy(), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return err != nil, nil
	}); err != nil {
		t.Fatalf("the policy never took effect: %v", err)
	}

	it = planJSON(t)
	if it.ApplyVerdictSource != plan.VerdictServerDryRun || it.Apply.Allowed || len(it.Apply.Errors) != 1 || !strings.Contains(it.Apply.Errors[0], "probes are not allowed here") {
		t.Errorf("with the policy: source %q, allowed %v, errors %q; want the server's refusal", it.ApplyVerdictSource, it.Apply.Allowed, it.Apply.Errors)
	}
	r := runCluster(t, "plan", "-f", file)
	if r.code != ExitProblems {
		t.Errorf("human: exit %d, want 1:\n%s%s", r.code, r.stdout, r.stderr)
	}
	mustContain(t, "stdout", r.stdout, "Apply: rejected by the API server:", "probes are not allowed here")
	mustContain(t, "stderr", r.stderr, "note: apply verdict from the API server (server-side dry-run, nothing written): "+name)
	if _, err := crds.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the dry-run created the CRD (get: %v)", err)
	}

	// A user who may read CRDs but not create them: the verdict is computed offline (this
	// client's validation does not know the policy: allowed).
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "kubeversion-plan-reader"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{"apiextensions.k8s.io"}, Resources: []string{"customresourcedefinitions"}, Verbs: []string{"get", "list"}}}}
	if _, err := kube.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	rb := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: role.Name},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: "User", Name: "kubeversion-reader"}}}
	if _, err := kube.RbacV1().ClusterRoleBindings().Create(ctx, rb, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	it = planJSON(t, "--as", "kubeversion-reader")
	if it.ApplyVerdictSource != plan.VerdictOffline || !it.Apply.Allowed {
		t.Errorf("without create rights: source %q, allowed %v; want offline, true", it.ApplyVerdictSource, it.Apply.Allowed)
	}
}

// loadCRDFile decodes the first document of a CRD file.
func loadCRDFile(t *testing.T, path string) *apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	docs, err := ReadDocuments([]string{path}, nil)
	if err != nil || len(docs) == 0 {
		t.Fatalf("%s: %v", path, err)
	}
	crd, err := crdinfo.Decode(docs[0].JSON)
	if err != nil {
		t.Fatal(err)
	}
	return crd
}

// TestOneKubeVersionPerRun: a run chooses its Kubernetes version once and gives it back when the
// command returns (the next run in the process judges as the newest known unless it chooses);
// a run asked to judge as another version than the one the process is held at is refused
// with an error naming both, not switched.
func TestOneKubeVersionPerRun(t *testing.T) {
	crd := td("kubeversion", "distinct-crd.yaml")
	if r := run(t, "", "versions", "-f", crd, "--kube-version", "1.35"); r.code != 0 {
		t.Fatalf("as 1.35: exit %d:\n%s", r.code, r.stderr)
	}
	if got := kubeversion.Emulated(); got != kubeversion.Newest {
		t.Errorf("after a run as 1.35 the process judges as %s; want %s (given back)", got, kubeversion.Newest)
	}
	// plan -f --old-file --kube-version: the files and the plan judged as one version (Use twice,
	// the same version: accepted).
	r := run(t, "", "plan", "-f", crd, "--old-file", td("kubeversion", "bgppeers-crd.yaml"), "--kube-version", "1.35", "-o", "json")
	if r.code != 0 {
		t.Fatalf("plan as 1.35: exit %d:\n%s", r.code, r.stderr)
	}

	// A Go program holding 1.34 (kubeversion.Use) that runs a command asked for 1.35.
	release, err := kubeversion.Use(kubeversion.Version{Major: 1, Minor: 34})
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	r = run(t, "", "versions", "-f", crd, "--kube-version", "1.35")
	if r.code == 0 || strings.Count(r.stderr, "\n") != 1 {
		t.Errorf("as 1.35 while 1.34 is held: exit %d; want an error line:\n%s", r.code, r.stderr)
	}
	mustContain(t, "stderr", r.stderr, "cannot judge as Kubernetes 1.35: this process already judges as Kubernetes 1.34")
	// The same version is accepted (and still held after the run).
	r = run(t, "", "versions", "-f", crd, "--kube-version", "1.34")
	if r.code != ExitUsage {
		t.Errorf("as 1.34 while 1.34 is held: exit %d; want 2 (distinct() is refused as 1.34):\n%s", r.code, r.stderr)
	}
	mustContain(t, "stderr", r.stderr, "as Kubernetes 1.34; 1 error")
	if got := kubeversion.Emulated(); got != (kubeversion.Version{Major: 1, Minor: 34}) {
		t.Errorf("after a run as the version held: the process judges as %s; want 1.34 (still held)", got)
	}
}
