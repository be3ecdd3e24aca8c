package convert

import (
	"context"
	"fmt"
	"sort"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/cel"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/defaulting"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/listtype"
	schemaobjectmeta "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/objectmeta"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/pruning"
	apiservervalidation "k8s.io/apiextensions-apiserver/pkg/apiserver/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	"k8s.io/kube-openapi/pkg/validation/strfmt"
	"k8s.io/kube-openapi/pkg/validation/validate"

	"github.com/crdver/kubectl-crdver/crdschema"
)

// versionSchema is one version's schema, as the API server builds it: the structural schema
// (for pruning and defaulting) and the OpenAPI validator.
type versionSchema struct {
	name       string
	structural *structuralschema.Structural // nil: no schema, or pruning off (preserveUnknownFields)
	validator  apiservervalidation.SchemaCreateValidator
	cel        *cel.Validator // nil: no x-kubernetes-validations rules
	prune      bool
}

// newVersionSchema builds the schema of version v of crd the way the API server does: the
// structural schema from crdschema.SchemaFor (defaults pruned when pruning is on), plus the
// OpenAPI validator.
func newVersionSchema(crd *apiextensionsv1.CustomResourceDefinition, v string) (*versionSchema, error) {
	vs := &versionSchema{name: v, prune: !crd.Spec.PreserveUnknownFields}
	sch, err := crdschema.SchemaFor(crd, v)
	if err != nil {
		return nil, err
	}
	if sch.Internal == nil {
		return vs, nil
	}
	if len(sch.Violations) > 0 {
		msgs := make([]string, len(sch.Violations))
		for i, viol := range sch.Violations {
			msgs[i] = viol.Field + ": " + viol.Message
		}
		return nil, fmt.Errorf("%s: version %q: the schema is not structural: %s", crd.Name, v, strings.Join(msgs, "; "))
	}
	vs.structural = sch.Structural
	_, openapiSchema, err := apiservervalidation.NewSchemaValidator(sch.Internal)
	if err != nil {
		return nil, fmt.Errorf("%s: version %q: building the validator: %w", crd.Name, v, err)
	}
	// The API server's create validation without ratcheting (its basicSchemaValidator), built
	// once: the ratcheting validator rebuilds it on every call.
	vs.validator = createValidator{validate.NewSchemaValidator(openapiSchema, nil, "", strfmt.Default)}
	// CEL programs are compiled once here, as the API server's strategy does.
	vs.cel = cel.NewValidator(vs.structural, true, celconfig.PerCallLimit)
	return vs, nil
}

type createValidator struct{ sv *validate.SchemaValidator }

func (c createValidator) Validate(obj any, _ ...apiservervalidation.ValidationOption) *validate.Result {
	return c.sv.Validate(obj)
}

// pruneObject prunes obj (a whole custom resource) in this version's schema, as the API
// server does when it reads or writes, and (unless the caller knows there is no null in it)
// drops non-nullable nulls without defaults. It returns the pruned JSON paths (".spec.foo"),
// sorted.
func (vs *versionSchema) pruneObject(obj map[string]any, mayHaveNulls bool) []string {
	if vs.structural == nil || !vs.prune {
		return nil
	}
	paths := pruning.PruneWithOptions(obj, vs.structural, true, structuralschema.UnknownFieldPathOptions{TrackUnknownFieldPaths: true})
	if mayHaveNulls {
		defaulting.PruneNonNullableNullsWithoutDefaults(obj, vs.structural)
	}
	out := make([]string, len(paths))
	for i, p := range paths {
		out[i] = "." + p
	}
	sort.Strings(out)
	return out
}

// defaultObject applies this version's defaults to obj, as the API server does on create.
func (vs *versionSchema) defaultObject(obj map[string]any) {
	if vs.structural != nil {
		defaulting.Default(obj, vs.structural)
	}
}

// validate checks obj against this version's schema the way the API server's
// customResourceStrategy.Validate does on create, leaving out the root ObjectMeta checks (the
// metadata is the original object's): OpenAPI, embedded resources, list-type set/map
// invariants, then the x-kubernetes-validations CEL rules, skipped after a blocking error.
func (vs *versionSchema) validate(obj map[string]any) field.ErrorList {
	if vs.validator == nil {
		return nil
	}
	errs := apiservervalidation.ValidateCustomResource(nil, obj, vs.validator)
	ctx := context.Background()
	errs = append(errs, schemaobjectmeta.Validate(ctx, nil, obj, vs.structural, false)...)
	errs = append(errs, listtype.ValidateListSetsAndMaps(nil, vs.structural, obj)...)
	if vs.cel == nil {
		return errs
	}
	for _, e := range errs {
		switch e.Type {
		case field.ErrorTypeNotSupported, field.ErrorTypeRequired, field.ErrorTypeTooLong, field.ErrorTypeTooMany, field.ErrorTypeTypeInvalid:
			return append(errs, field.Invalid(nil, nil, "some validation rules were not checked because the object was invalid; correct the existing errors to complete validation"))
		}
	}
	celErrs, _ := vs.cel.Validate(ctx, nil, vs.structural, obj, nil, celconfig.RuntimeCELCostBudget)
	return append(errs, celErrs...)
}

// errorListStrings renders field errors one per string.
func errorListStrings(errs field.ErrorList) []string {
	out := make([]string, 0, len(errs))
	for _, e := range errs {
		out = append(out, strings.TrimPrefix(e.Error(), "<nil>: "))
	}
	return out
}
