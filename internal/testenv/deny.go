package testenv

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// Denial is an admission rule that refuses some requests, for DenyByPolicy and DenyByWebhook.
type Denial struct {
	// Name names the policy and binding, or the webhook configuration.
	Name string
	// Rule is what the policy or webhook matches (operations and resources).
	Rule admissionregistrationv1.RuleWithOperations
	// Refuse is a CEL expression over object (and oldObject) that is true for the requests to
	// refuse.
	Refuse string
	// Message is what the refusal says.
	Message string
	// Reason is a policy's reason (nil: the API server's default, Invalid, 422); a webhook
	// answers 403 without one.
	Reason *metav1.StatusReason
	// Probe sends a dry-run request the rule refuses and returns its error: Deny* waits until
	// the API server refuses it with Message.
	Probe func(ctx context.Context) error
}

// DenyByPolicy installs a ValidatingAdmissionPolicy and its Deny binding for d and waits until
// the API server applies it; both are removed when the test ends.
func (e *Env) DenyByPolicy(t testing.TB, d Denial) {
	t.Helper()
	ctx := context.Background()
	kube := kubernetes.NewForConfigOrDie(e.Config)
	policies := kube.AdmissionregistrationV1().ValidatingAdmissionPolicies()
	bindings := kube.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings()
	policy := &admissionregistrationv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: d.Name},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			MatchConstraints: &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{RuleWithOperations: d.Rule}}},
			Validations:      []admissionregistrationv1.Validation{{Expression: "!(" + d.Refuse + ")", Message: d.Message, Reason: d.Reason}},
		},
	}
	if _, err := policies.Create(ctx, policy, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = policies.Delete(context.Background(), d.Name, metav1.DeleteOptions{}) })
	binding := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: d.Name},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{PolicyName: d.Name,
			ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny}},
	}
	if _, err := bindings.Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = bindings.Delete(context.Background(), d.Name, metav1.DeleteOptions{}) })
	waitRefused(t, d)
}

// DenyByWebhook installs a validating webhook (a real HTTPS AdmissionServer) that refuses the
// requests d matches, by a match condition, and waits until the API server applies it; the
// configuration is removed and the server closed when the test ends.
func (e *Env) DenyByWebhook(t testing.TB, d Denial) {
	t.Helper()
	hook, err := StartAdmissionServer(func(*admissionv1.AdmissionRequest) error { return errors.New(d.Message) })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(hook.Close)
	e.installWebhook(t, d.Name, hook, admissionregistrationv1.ValidatingWebhook{Name: d.Name + ".deny.example.com",
		Rules: []admissionregistrationv1.RuleWithOperations{d.Rule}, MatchConditions: []admissionregistrationv1.MatchCondition{{Name: "refuse", Expression: d.Refuse}}})
	waitRefused(t, d)
}

// installWebhook installs the validating webhook wh, served by hook (failure policy Fail, no
// side effects, AdmissionReview v1), as the configuration name, removed when the test ends.
func (e *Env) installWebhook(t testing.TB, name string, hook *AdmissionServer, wh admissionregistrationv1.ValidatingWebhook) {
	t.Helper()
	configs := kubernetes.NewForConfigOrDie(e.Config).AdmissionregistrationV1().ValidatingWebhookConfigurations()
	fail := admissionregistrationv1.Fail
	none := admissionregistrationv1.SideEffectClassNone
	wh.ClientConfig = admissionregistrationv1.WebhookClientConfig{URL: &hook.URL, CABundle: hook.CABundle}
	wh.FailurePolicy, wh.SideEffects, wh.AdmissionReviewVersions = &fail, &none, []string{"v1"}
	cfg := &admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: name}, Webhooks: []admissionregistrationv1.ValidatingWebhook{wh}}
	if _, err := configs.Create(context.Background(), cfg, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = configs.Delete(context.Background(), name, metav1.DeleteOptions{}) })
}

// waitRefused waits until d's probe is refused with d's message (the API server loads
// admission configuration asynchronously).
func waitRefused(t testing.TB, d Denial) {
	t.Helper()
	var last error
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		last = d.Probe(ctx)
		return last != nil && strings.Contains(last.Error(), d.Message), nil
	})
	if err != nil {
		t.Fatalf("%s never refused the probe (last answer: %v)", d.Name, last)
	}
}

// UserWith is a client configuration of the API server that acts as the user name (by
// impersonation), who has only the rights rules give (a ClusterRole bound to the name, both
// removed when the test ends).
func (e *Env) UserWith(t testing.TB, name string, rules ...rbacv1.PolicyRule) *rest.Config {
	t.Helper()
	ctx := context.Background()
	rbac := kubernetes.NewForConfigOrDie(e.Config).RbacV1()
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: rules}
	if _, err := rbac.ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rbac.ClusterRoles().Delete(context.Background(), name, metav1.DeleteOptions{}) })
	rb := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name},
		Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: "User", Name: name}}}
	if _, err := rbac.ClusterRoleBindings().Create(ctx, rb, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rbac.ClusterRoleBindings().Delete(context.Background(), name, metav1.DeleteOptions{}) })
	cfg := rest.CopyConfig(e.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: name}
	return cfg
}
