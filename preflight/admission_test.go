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
