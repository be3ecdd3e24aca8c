package convert

import (
	"fmt"
	"sort"
	"strings"

	"k8s.io/apiextensions-apiserver/pkg/apihelpers"
	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/defaulting"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/pruning"
	apiservervalidation "k8s.io/apiextensions-apiserver/pkg/apiserver/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/kube-openapi/pkg/validation/strfmt"
	"k8s.io/kube-openapi/pkg/validation/validate"
)

// versionSchema is one version's schema, as the API server builds it: the structural schema
// (for pruning and defaulting) and the OpenAPI validator.
type versionSchema struct {
	name       string
	structural *structuralschema.Structural // nil: no schema, or pruning off (preserveUnknownFields)
	validator  apiservervalidation.SchemaCreateValidator
	prune      bool
}

// newVersionSchema builds the schema of version v of crd the way the API server does.
func newVersionSchema(crd *apiextensionsv1.CustomResourceDefinition, v string) (*versionSchema, error) {
	vs := &versionSchema{name: v, prune: !crd.Spec.PreserveUnknownFields}
	val, err := apihelpers.GetSchemaForVersion(crd, v)
	if err != nil {
		return nil, fmt.Errorf("%s: version %q: %w", crd.Name, v, err)
	}
	if val == nil || val.OpenAPIV3Schema == nil {
		return vs, nil
	}
	internal := &apiextensions.CustomResourceValidation{}
	if err := apiextensionsv1.Convert_v1_CustomResourceValidation_To_apiextensions_CustomResourceValidation(val, internal, nil); err != nil {
		return nil, fmt.Errorf("%s: version %q: converting the schema: %w", crd.Name, v, err)
	}
	s, err := structuralschema.NewStructural(internal.OpenAPIV3Schema)
	if err != nil {
		return nil, fmt.Errorf("%s: version %q: the schema is not structural: %w", crd.Name, v, err)
	}
	if errs := structuralschema.ValidateStructural(field.NewPath("spec", "versions").Key(v).Child("schema", "openAPIV3Schema"), s); len(errs) > 0 {
		return nil, fmt.Errorf("%s: version %q: the schema is not structural: %v", crd.Name, v, errs.ToAggregate())
	}
	if vs.prune {
		// What the API server prunes and defaults with (its defaults are pruned themselves).
		s = s.DeepCopy()
		if err := defaulting.PruneDefaults(s); err != nil {
			return nil, fmt.Errorf("%s: version %q: pruning the defaults: %w", crd.Name, v, err)
		}
	}
	vs.structural = s
	_, openapiSchema, err := apiservervalidation.NewSchemaValidator(internal.OpenAPIV3Schema)
	if err != nil {
		return nil, fmt.Errorf("%s: version %q: building the validator: %w", crd.Name, v, err)
	}
	// The API server's create validation without ratcheting (its basicSchemaValidator), built
	// once: the ratcheting validator rebuilds it on every call.
	vs.validator = createValidator{validate.NewSchemaValidator(openapiSchema, nil, "", strfmt.Default)}
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

// validate checks obj against this version's OpenAPI schema.
func (vs *versionSchema) validate(obj map[string]any) field.ErrorList {
	if vs.validator == nil {
		return nil
	}
	return apiservervalidation.ValidateCustomResource(nil, obj, vs.validator)
}

// errorListStrings renders field errors one per string.
func errorListStrings(errs field.ErrorList) []string {
	out := make([]string, 0, len(errs))
	for _, e := range errs {
		out = append(out, strings.TrimPrefix(e.Error(), "<nil>: "))
	}
	return out
}
