package apistatus

import (
	"errors"
	"fmt"
	"net/http"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	webhookerrors "k8s.io/apiserver/pkg/admission/plugin/webhook/errors"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/apiserver/pkg/endpoints/handlers/responsewriters"
)

// policyDenial is a ValidatingAdmissionPolicy's denial as its dispatcher builds it
// (k8s.io/apiserver …/policy/validating/dispatcher.go, whose function is unexported): the
// admission Forbidden of the object, with the policy's reason and code and the denial as a cause.
func policyDenial(reason metav1.StatusReason, code int32) error {
	msg := "ValidatingAdmissionPolicy 'p' with binding 'b' denied request: no"
	err := apierrors.NewForbidden(schema.GroupResource{Group: "example.com", Resource: "widgets"}, "w", errors.New(msg))
	err.ErrStatus.Reason, err.ErrStatus.Code = reason, code
	err.ErrStatus.Details.Causes = append(err.ErrStatus.Details.Causes, metav1.StatusCause{Message: msg})
	return err
}

// The rule by the API server's own constructors; the same answers from a real API server are in
// plan's TestAdmissionDenialIsAVerdict and preflight's TestAdmissionDenials.
func TestRefused(t *testing.T) {
	gr := schema.GroupResource{Group: "example.com", Resource: "widgets"}
	authz := responsewriters.ForbiddenStatusError(authorizer.AttributesRecord{User: &user.DefaultInfo{Name: "jane"}, Verb: "update",
		APIGroup: "example.com", Resource: "widgets", Name: "w", ResourceRequest: true}, "")
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"validation", apierrors.NewInvalid(schema.GroupKind{Group: "example.com", Kind: "Widget"}, "w", field.ErrorList{field.Required(field.NewPath("spec", "size"), "")}), true},
		{"strict decoding", apierrors.NewBadRequest(`strict decoding error: unknown field "spec.colour"`), true},
		{"policy, reason Forbidden", policyDenial(metav1.StatusReasonForbidden, http.StatusForbidden), true},
		{"policy, reason Invalid", policyDenial(metav1.StatusReasonInvalid, http.StatusUnprocessableEntity), true},
		{"policy, reason Unauthorized", policyDenial(metav1.StatusReasonUnauthorized, http.StatusUnauthorized), true},
		{"policy, reason RequestEntityTooLarge", policyDenial(metav1.StatusReasonRequestEntityTooLarge, http.StatusRequestEntityTooLarge), true},
		{"webhook, 403", webhookerrors.ToStatusErr("deny.example.com", &metav1.Status{Code: http.StatusForbidden, Message: "no"}), true},
		{"webhook, reason Forbidden", webhookerrors.ToStatusErr("deny.example.com", &metav1.Status{Code: http.StatusForbidden, Reason: metav1.StatusReasonForbidden}), true},
		{"webhook, no code", webhookerrors.ToStatusErr("deny.example.com", &metav1.Status{Message: "no"}), true},
		{"wrapped", fmt.Errorf("w: %w", policyDenial(metav1.StatusReasonForbidden, http.StatusForbidden)), true},
		{"authorization", authz, false},
		{"admission plugin", apierrors.NewForbidden(gr, "w", errors.New("unable to create new content in namespace x because it is being terminated")), false},
		{"unauthenticated", apierrors.NewUnauthorized("Unauthorized"), false},
		{"a proxy's 403 page", apierrors.NewGenericServerResponse(http.StatusForbidden, "PUT", gr, "w", "<html>denied</html>", 0, true), false},
		{"conflict", apierrors.NewConflict(gr, "w", errors.New("changed")), false},
		{"throttled", apierrors.NewTooManyRequests("slow down", 1), false},
		{"internal error", apierrors.NewInternalError(errors.New("etcd")), false},
		{"webhook failing, 500", webhookerrors.ToStatusErr("deny.example.com", &metav1.Status{Code: http.StatusInternalServerError, Message: "crashed"}), false},
		{"not a Status", errors.New("connection refused"), false},
		{"nil", nil, false},
	} {
		if got := Refused(tc.err); got != tc.want {
			t.Errorf("%s: Refused(%v) = %v, want %v", tc.name, tc.err, got, tc.want)
		}
	}
}
