package plugin

import (
	"context"
	"fmt"
	"reflect"
	"strings"

	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apiextensions-apiserver/pkg/registry/customresourcedefinition"
	"k8s.io/apimachinery/pkg/util/validation/field"

	crdinfo "github.com/crdver/kubectl-crdver/crd"
	"github.com/crdver/kubectl-crdver/kubeversion"
)

// maxCRDErrorsShown is how many of the API server's messages an invalid CRD's error shows.
const maxCRDErrorsShown = 3

// validateCRD runs the API server's own validation of a CRD create on crd: the
// customresourcedefinition registry strategy's PrepareForCreate (status reset, storedVersions
// set to the storage version) and Validate, which is validation.ValidateCustomResourceDefinition
// (names, versions, exactly one storage version, structural schemas, defaults, list types, CEL
// rules compiled with their cost). It returns the errors as the API server words them. It
// validates as the Kubernetes version the process emulates (kubeversion.Emulate, set once per
// run from --kube-version or the cluster): the CEL libraries admitted in new rules, the formats.
func validateCRD(ctx context.Context, crd *apiextensionsv1.CustomResourceDefinition) (field.ErrorList, error) {
	internal := &apiextensions.CustomResourceDefinition{}
	if err := crdinfo.Scheme().Convert(crd.DeepCopy(), internal, nil); err != nil {
		return nil, fmt.Errorf("converting to the internal type: %w", err)
	}
	strategy := customresourcedefinition.NewStrategy(crdinfo.Scheme())
	strategy.PrepareForCreate(ctx, internal)
	return strategy.Validate(ctx, internal), nil
}

// crdInvalidError is the one-line error for a CRD the API server would refuse: the first few
// of its messages and how many there are.
func crdInvalidError(where, name string, errs field.ErrorList) error {
	msgs := make([]string, 0, maxCRDErrorsShown)
	for i, e := range errs {
		if i == maxCRDErrorsShown {
			break
		}
		msgs = append(msgs, fieldErrorText(e))
	}
	more := ""
	if len(errs) > maxCRDErrorsShown {
		more = fmt.Sprintf(" (and %d more)", len(errs)-maxCRDErrorsShown)
	}
	return UsageErrorf("%s: CustomResourceDefinition %s is invalid: the API server would refuse it (as Kubernetes %s; %s): %s%s",
		where, name, kubeversion.Emulated(), plural(len(errs), "error"), strings.Join(msgs, "; "), more)
}

// fieldErrorText is the API server's text for one error, without the value when it is not a
// scalar (a whole version or rule printed as a Go value helps nobody).
func fieldErrorText(e *field.Error) string {
	switch reflect.ValueOf(e.BadValue).Kind() {
	case reflect.String, reflect.Bool, reflect.Int, reflect.Int32, reflect.Int64, reflect.Float64:
		return e.Error()
	}
	if e.Type != field.ErrorTypeInvalid {
		return e.Error()
	}
	s := e.Field + ": " + e.Type.String()
	if e.Detail != "" {
		s += ": " + e.Detail
	}
	return s
}
