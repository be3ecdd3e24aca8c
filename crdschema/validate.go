package crdschema

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
)

// maxCRDErrorsShown is how many of the API server's messages an InvalidError shows.
const maxCRDErrorsShown = 3

// Validate runs the API server's own validation of a CRD create on crd: the
// customresourcedefinition registry strategy's PrepareForCreate (status reset, storedVersions
// set to the storage version) and Validate, which is validation.ValidateCustomResourceDefinition
// (names, versions, exactly one storage version, structural schemas, defaults, list types, CEL
// rules compiled with their cost). It returns the errors as the API server words them. It
// validates as the Kubernetes version the process runs as (kubeversion.Use, set once per
// run from --kube-version or the cluster): the CEL libraries admitted in new rules, the formats.
func Validate(ctx context.Context, crd *apiextensionsv1.CustomResourceDefinition) (field.ErrorList, error) {
	internal := &apiextensions.CustomResourceDefinition{}
	if err := crdinfo.Scheme().Convert(crd.DeepCopy(), internal, nil); err != nil {
		return nil, fmt.Errorf("converting to the internal type: %w", err)
	}
	strategy := customresourcedefinition.NewStrategy(crdinfo.Scheme())
	strategy.PrepareForCreate(ctx, internal)
	return strategy.Validate(ctx, internal), nil
}

// InvalidError is a CRD the API server would refuse, with its messages (from Validate).
type InvalidError struct {
	Name   string
	Errors field.ErrorList
	// KubeVersion is the Kubernetes version it was validated as ("": not said).
	KubeVersion string
}

// Error is one line: the first few of the API server's messages and how many there are.
func (e *InvalidError) Error() string {
	name, errs := e.Name, e.Errors
	msgs := make([]string, 0, maxCRDErrorsShown)
	for i, e := range errs {
		if i == maxCRDErrorsShown {
			break
		}
		msgs = append(msgs, FieldErrorText(e))
	}
	more := ""
	if len(errs) > maxCRDErrorsShown {
		more = fmt.Sprintf(" (and %d more)", len(errs)-maxCRDErrorsShown)
	}
	n := fmt.Sprintf("%d errors", len(errs))
	if len(errs) == 1 {
		n = "1 error"
	}
	if e.KubeVersion != "" {
		n = "as Kubernetes " + e.KubeVersion + "; " + n
	}
	return fmt.Sprintf("CustomResourceDefinition %s is invalid: the API server would refuse it (%s): %s%s",
		name, n, strings.Join(msgs, "; "), more)
}

// FieldErrorText is the API server's text for one error, without the value when it is not a
// scalar (a whole version or rule printed as a Go value helps nobody).
func FieldErrorText(e *field.Error) string {
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
