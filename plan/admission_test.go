package plan

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/crdver/kubectl-crdver/internal/apistatus"
	"github.com/crdver/kubectl-crdver/internal/testenv"
)

// TestAdmissionDenialIsAVerdict: the API server's "no" to a new CRD from a
// ValidatingAdmissionPolicy, whatever reason it gives (Forbidden: 403, Invalid: 422), and from
// an admission webhook (403) is plan's apply verdict (the server-side dry run's answer: not
// allowed), decided from the Status the server returns (apistatus.Refused). (plan once took a
// policy's Forbidden for a failure of the dry run and judged offline: "allowed".) A Forbidden
// from authorization is not a verdict: the verdict is computed offline.
func TestAdmissionDenialIsAVerdict(t *testing.T) {
	ctx := context.Background()
	crds := apiextensionsclient.NewForConfigOrDie(env.Config)
	rule := admissionregistrationv1.RuleWithOperations{
		Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
		Rule:       admissionregistrationv1.Rule{APIGroups: []string{"apiextensions.k8s.io"}, APIVersions: []string{"v1"}, Resources: []string{"customresourcedefinitions"}},
	}
	crd := func(group string) *apiextensionsv1.CustomResourceDefinition {
		return testenv.TwoVersionCRD(group, "gadgets", "Gadget", apiextensionsv1.JSONSchemaProps{Type: "object"})
	}
	dryCreate := func(c *apiextensionsv1.CustomResourceDefinition) func(context.Context) error {
		return func(ctx context.Context) error {
			_, err := crds.ApiextensionsV1().CustomResourceDefinitions().Create(ctx, c.DeepCopy(), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
			return err
		}
	}
	forbidden, invalid := metav1.StatusReasonForbidden, metav1.StatusReasonInvalid
	cases := []struct {
		name     string
		install  func(testing.TB, testenv.Denial)
		reason   *metav1.StatusReason
		wantCode int32
	}{
		{"policy-forbidden", env.DenyByPolicy, &forbidden, http.StatusForbidden},
		{"policy-invalid", env.DenyByPolicy, &invalid, http.StatusUnprocessableEntity},
		{"webhook", env.DenyByWebhook, nil, http.StatusForbidden},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			next := crd(tc.name + ".admission.plan.example.com")
			msg := "no " + tc.name + " gadgets here"
			tc.install(t, testenv.Denial{Name: "deny-" + tc.name, Rule: rule, Reason: tc.reason, Message: msg,
				Refuse: "object.metadata.name == '" + next.Name + "'", Probe: dryCreate(next)})

			err := dryCreate(next)(ctx)
			var se apierrors.APIStatus
			if !apierrors.IsForbidden(err) && !apierrors.IsInvalid(err) || !errors.As(err, &se) || se.Status().Code != tc.wantCode {
				t.Fatalf("the server's answer: %v; want %d", err, tc.wantCode)
			}
			if !apistatus.Refused(err) {
				t.Errorf("apistatus.Refused(%+v) = false", se.Status())
			}
			a, _, source, notes, err := checkApplyFor(ctx, nil, next, Options{DryRun: crds})
			if err != nil {
				t.Fatal(err)
			}
			if source != VerdictServerDryRun || a.Allowed || len(a.Errors) != 1 || !strings.Contains(a.Errors[0], msg) || len(notes) != 0 {
				t.Errorf("verdict from %q: allowed %v, errors %q, notes %q; want the server's refusal", source, a.Allowed, a.Errors, notes)
			}
		})
	}

	// No right to create CRDs: authorization's Forbidden is no verdict on the CRD.
	reader := apiextensionsclient.NewForConfigOrDie(env.UserWith(t, "admission-plan-reader",
		rbacv1.PolicyRule{APIGroups: []string{"apiextensions.k8s.io"}, Resources: []string{"customresourcedefinitions"}, Verbs: []string{"get", "list"}}))
	next := crd("reader.admission.plan.example.com")
	_, err := reader.ApiextensionsV1().CustomResourceDefinitions().Create(ctx, next.DeepCopy(), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
	if !apierrors.IsForbidden(err) || apistatus.Refused(err) {
		t.Errorf("without create rights: %v, refused %v; want authorization's Forbidden, not a refusal", err, apistatus.Refused(err))
	}
	a, _, source, notes, err := checkApplyFor(ctx, nil, next, Options{DryRun: reader})
	if err != nil {
		t.Fatal(err)
	}
	if source != VerdictOffline || !a.Allowed || !slices.ContainsFunc(notes, func(n string) bool { return strings.Contains(n, "computed offline") }) {
		t.Errorf("without create rights: verdict from %q, allowed %v, notes %q; want offline, allowed, a note", source, a.Allowed, notes)
	}
}
