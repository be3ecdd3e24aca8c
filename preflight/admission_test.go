package preflight

import (
	"context"
	"slices"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	crdinfo "github.com/crdver/kubectl-crdver/crd"
	"github.com/crdver/kubectl-crdver/internal/testenv"
)

// TestAdmissionDenials: the rewrite's write of an object refused by a ValidatingAdmissionPolicy
// (reason Forbidden: 403; reason Invalid: 422) or by an admission webhook (403) is a rejection
// the preflight reports with the server's message, as plan's apply verdict is
// (apistatus.Refused, one rule); the object nothing refuses is not. Without the right to
// update, the answer is unknown, never a rejection.
func TestAdmissionDenials(t *testing.T) {
	ctx := context.Background()
	crd := testenv.TwoVersionCRD("admission.preflight.example.com", "widgets", "Widget", apiextensionsv1.JSONSchemaProps{
		Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{"size": {Type: "integer"}}})
	const ns = "pf-admission"
	dyn := setup(t, crd, ns)
	for _, name := range []string{"by-forbidden-policy", "by-invalid-policy", "by-webhook", "welcome"} {
		create(t, dyn, crd, "v1beta1", ns, name, map[string]any{"size": int64(1)})
	}
	rule := admissionregistrationv1.RuleWithOperations{
		Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Update},
		Rule:       admissionregistrationv1.Rule{APIGroups: []string{crd.Spec.Group}, APIVersions: []string{"*"}, Resources: []string{crd.Spec.Names.Plural}},
	}
	dryUpdate := func(name string) func(context.Context) error {
		return func(ctx context.Context) error {
			ri := dyn.Resource(crdinfo.GVR(crd, "v1")).Namespace(ns)
			u, err := ri.Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			_, err = ri.Update(ctx, u, metav1.UpdateOptions{DryRun: []string{metav1.DryRunAll}})
			return err
		}
	}
	forbidden, invalid := metav1.StatusReasonForbidden, metav1.StatusReasonInvalid
	for _, d := range []struct {
		name    string
		install func(testing.TB, testenv.Denial)
		reason  *metav1.StatusReason
	}{
		{"by-forbidden-policy", env.DenyByPolicy, &forbidden},
		{"by-invalid-policy", env.DenyByPolicy, &invalid},
		{"by-webhook", env.DenyByWebhook, nil},
	} {
		d.install(t, testenv.Denial{Name: "pf-" + d.name, Rule: rule, Reason: d.reason, Message: "refused " + d.name,
			Refuse: "object.metadata.name == '" + d.name + "'", Probe: dryUpdate(d.name)})
	}
	live := fresh(t, crd.Name)
	live.Status.StoredVersions = []string{"v1beta1", "v1"} // as after a switch to v1

	r, err := Check(ctx, dyn, live, Options{Target: "v1"})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, x := range r.Rejected {
		got[x.Name] = strings.Join(x.Errors, "; ")
	}
	if r.RejectedCount != 3 || len(got) != 3 || len(r.Unknown) != 0 {
		t.Fatalf("rejected %d %q, unknown %q; want the three refused objects", r.RejectedCount, got, r.Unknown)
	}
	for name, errs := range got {
		if !strings.Contains(errs, "refused "+name) {
			t.Errorf("%s: errors %q, want the refusal's message", name, errs)
		}
	}

	// A user who may list and read the objects but not update them.
	reader := env.UserWith(t, "pf-admission-reader",
		rbacv1.PolicyRule{APIGroups: []string{crd.Spec.Group}, Resources: []string{crd.Spec.Names.Plural}, Verbs: []string{"get", "list"}})
	r, err = Check(ctx, dynamic.NewForConfigOrDie(reader), live, Options{Target: "v1"})
	if err != nil {
		t.Fatal(err)
	}
	if r.RejectedCount != 0 || r.Safe() || !slices.ContainsFunc(r.Unknown, func(u string) bool { return strings.Contains(u, "needs update rights") }) {
		t.Errorf("without update rights: rejected %d, safe %v, unknown %q; want unknown, no rejection", r.RejectedCount, r.Safe(), r.Unknown)
	}
}

// TestReadAdmission: the fingerprint of the cluster's admission configuration changes when a
// policy is added and again when a binding switches it on (a binding alone changes what is
// refused); Matches is the policy's match, Read names the configurations, not the bindings.
func TestReadAdmission(t *testing.T) {
	ctx := context.Background()
	dyn := dynamic.NewForConfigOrDie(env.Config)
	kube := kubernetes.NewForConfigOrDie(env.Config).AdmissionregistrationV1()
	before := ReadAdmission(ctx, dyn, nil)
	if !before.OK || before.Fingerprint == "" {
		t.Fatalf("before: %+v", before)
	}
	const name = "pf-read-admission"
	policy := &admissionregistrationv1.ValidatingAdmissionPolicy{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			MatchConstraints: &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{RuleWithOperations: admissionregistrationv1.RuleWithOperations{
				Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Update},
				Rule:       admissionregistrationv1.Rule{APIGroups: []string{"read.example.com"}, APIVersions: []string{"*"}, Resources: []string{"widgets"}},
			}}}},
			Validations: []admissionregistrationv1.Validation{{Expression: "true"}},
		}}
	if _, err := kube.ValidatingAdmissionPolicies().Create(ctx, policy, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = kube.ValidatingAdmissionPolicies().Delete(context.Background(), name, metav1.DeleteOptions{})
	})
	withPolicy := ReadAdmission(ctx, dyn, nil)
	if !withPolicy.OK || withPolicy.Fingerprint == before.Fingerprint {
		t.Errorf("a policy added: fingerprint %q, as before", withPolicy.Fingerprint)
	}
	if !withPolicy.Matches("read.example.com", "widgets") || withPolicy.Matches("other.example.com", "widgets") {
		t.Errorf("Matches: widgets of read.example.com %v, of other.example.com %v; want true, false",
			withPolicy.Matches("read.example.com", "widgets"), withPolicy.Matches("other.example.com", "widgets"))
	}
	binding := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{PolicyName: name, ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny}}}
	if _, err := kube.ValidatingAdmissionPolicyBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = kube.ValidatingAdmissionPolicyBindings().Delete(context.Background(), name, metav1.DeleteOptions{})
	})
	bound := ReadAdmission(ctx, dyn, nil)
	if !bound.OK || bound.Fingerprint == withPolicy.Fingerprint {
		t.Errorf("a binding added: fingerprint %q, as with the policy alone", bound.Fingerprint)
	}
	if bound.Read != withPolicy.Read || !strings.Contains(bound.Read, "validatingadmissionpolicies") || strings.Contains(bound.Read, "bindings") {
		t.Errorf("Read %q (with the policy alone %q): want the configurations named, the same", bound.Read, withPolicy.Read)
	}
}
