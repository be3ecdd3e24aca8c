// Package apistatus reads what the API server answered a write by the Status it returned — its
// reason, code and details — never by the wording of its message.
package apistatus

import (
	"errors"
	"net/http"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Refused reports whether err is the API server's verdict on the object it was sent (a dry
// run's "no" is the answer, not a failure to get one):
//
//   - 422 Invalid: validation, or a ValidatingAdmissionPolicy with reason Invalid (its
//     default);
//   - 400 BadRequest: strict decoding, or an admission webhook's denial without a code (the
//     API server makes it 400);
//   - any other 4xx whose details list a cause (not one client-go made up for an answer that
//     was no Status): a ValidatingAdmissionPolicy's denial with reason Forbidden (403),
//     Unauthorized (401) or RequestEntityTooLarge (413) carries the denial as a cause
//     (k8s.io/apiserver …/policy/validating/dispatcher.go);
//   - 403 Forbidden without details: an admission webhook's own Status
//     (…/webhook/errors/statuserror.go passes the webhook's result on as it is).
//
// A Forbidden that names the resource and lists no cause is authorization's (or a built-in
// admission plugin's, apierrors.NewForbidden): no right to the request, which says nothing
// of the object; so is anything else (unreachable, conflict, throttled, server errors).
func Refused(err error) bool {
	var se apierrors.APIStatus
	if err == nil || !errors.As(err, &se) {
		return false
	}
	st := se.Status()
	switch {
	case apierrors.IsInvalid(err), apierrors.IsBadRequest(err):
		return true
	case st.Code < http.StatusBadRequest || st.Code >= http.StatusInternalServerError:
		return false
	case st.Details == nil:
		return apierrors.IsForbidden(err)
	}
	for _, c := range st.Details.Causes {
		if c.Type != metav1.CauseTypeUnexpectedServerResponse {
			return true
		}
	}
	return false
}
