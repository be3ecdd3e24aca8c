// Package crdschema builds the schema of a CRD version the way the API server holds it:
// apihelpers.GetSchemaForVersion, conversion to the internal type, the structural schema
// (schema.NewStructural, schema.ValidateStructural) with defaults pruned when pruning is on, and
// the structural-schema violations named by the rule they break. Explaining (package explain),
// previewing (package preview) and converting (package convert) all start from it.
package crdschema

import (
	"fmt"
	"strings"

	"k8s.io/apiextensions-apiserver/pkg/apihelpers"
	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	structuraldefaulting "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/defaulting"
	"k8s.io/apimachinery/pkg/util/validation/field"

	crdinfo "github.com/crdver/kubectl-crdver/crd"
)

// Violation is one way in which a version's schema is not structural, as the API server's
// NonStructuralSchema condition (and CRD validation) reports it.
type Violation struct {
	// Field is the path in the CRD, e.g. spec.versions[0].schema.openAPIV3Schema.properties[foo].type.
	Field string `json:"field"`
	// Message is the API server's message for it.
	Message string `json:"message"`
	// Rule is which of the four structural-schema rules of the Kubernetes documentation the
	// violation breaks (1–4), or 0 for the other constraints (extensions, root additionalProperties).
	Rule int `json:"rule"`
	// RuleText says what the rule is.
	RuleText string `json:"ruleText"`
}

// RuleTexts are the four rules of "Specifying a structural schema" in the Kubernetes docs.
var RuleTexts = map[int]string{
	0: "other structural constraint (x-kubernetes-* extensions, additionalProperties at the root, regular expressions)",
	1: "rule 1: every node (root, object field, array item) specifies a non-empty type",
	2: "rule 2: every field or item inside allOf/anyOf/oneOf/not is also specified outside them",
	3: "rule 3: no description, type, default, additionalProperties, nullable or x-kubernetes-* inside allOf/anyOf/oneOf/not",
	4: "rule 4: metadata may only restrict metadata.name and metadata.generateName",
}

func violationFromFieldError(e *field.Error) Violation {
	v := Violation{Field: e.Field, Message: e.ErrorBody()}
	msg := e.Error()
	switch {
	case strings.Contains(e.Field, "properties[metadata]"):
		v.Rule = 4
	case strings.Contains(msg, "because it is defined in"):
		v.Rule = 2
	case strings.Contains(msg, "to be structural"):
		v.Rule = 3
	case strings.HasSuffix(e.Field, ".type") && (strings.Contains(msg, "must not be empty") || strings.Contains(msg, "must be object at the root")),
		strings.HasSuffix(e.Field, ".items") && e.Type == field.ErrorTypeRequired:
		v.Rule = 1
	}
	v.RuleText = RuleTexts[v.Rule]
	return v
}

// VersionSchema is one version's schema as the API server holds it.
type VersionSchema struct {
	Version string
	// Internal is the schema in the internal apiextensions type (nil: the version has none).
	Internal *apiextensions.JSONSchemaProps
	// Structural is the structural schema, or nil when the version has no schema or it is not
	// structural. When pruning is on, defaults have been pruned as the API server does.
	Structural *structuralschema.Structural
	// Violations are the structural-schema violations (empty: structural).
	Violations []Violation
}

// SchemaFor builds the schema of version v of crd the way the API server does
// (apihelpers.GetSchemaForVersion, conversion to the internal type, schema.NewStructural,
// schema.ValidateStructural, and defaulting.PruneDefaults when pruning is on). The field paths
// of violations are those of the NonStructuralSchema condition
// (spec.versions[i].schema.openAPIV3Schema...).
func SchemaFor(crd *apiextensionsv1.CustomResourceDefinition, v string) (*VersionSchema, error) {
	index := -1
	for i := range crd.Spec.Versions {
		if crd.Spec.Versions[i].Name == v {
			index = i
		}
	}
	if index < 0 {
		return nil, crdinfo.NotFound(crd, v)
	}
	out := &VersionSchema{Version: v}
	val, err := apihelpers.GetSchemaForVersion(crd, v)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", crd.Name, err)
	}
	if val == nil || val.OpenAPIV3Schema == nil {
		return out, nil
	}
	internal := &apiextensions.CustomResourceValidation{}
	if err := apiextensionsv1.Convert_v1_CustomResourceValidation_To_apiextensions_CustomResourceValidation(val, internal, nil); err != nil {
		return nil, fmt.Errorf("%s: converting the schema of version %q: %w", crd.Name, v, err)
	}
	out.Internal = internal.OpenAPIV3Schema
	pth := field.NewPath("spec", "versions").Index(index).Child("schema", "openAPIV3Schema")
	s, err := structuralschema.NewStructural(internal.OpenAPIV3Schema)
	if err != nil {
		out.Violations = []Violation{{Field: pth.String(), Message: err.Error(), Rule: 0, RuleText: "the schema uses a construct structural schemas do not support"}}
		return out, nil
	}
	for _, e := range structuralschema.ValidateStructural(pth, s) {
		out.Violations = append(out.Violations, violationFromFieldError(e))
	}
	if len(out.Violations) > 0 {
		return out, nil
	}
	if !crd.Spec.PreserveUnknownFields {
		s = s.DeepCopy()
		if err := structuraldefaulting.PruneDefaults(s); err != nil {
			return nil, fmt.Errorf("%s: version %q: pruning defaults: %w", crd.Name, v, err)
		}
	}
	out.Structural = s
	return out, nil
}

// StructuralReport is whether a CRD's schemas are structural, per version.
type StructuralReport struct {
	Name                  string             `json:"name"`
	PreserveUnknownFields bool               `json:"preserveUnknownFields"`
	Structural            bool               `json:"structural"`
	Versions              []VersionStructure `json:"versions"`
}

// VersionStructure is one version's line of the structural report.
type VersionStructure struct {
	Version    string      `json:"version"`
	HasSchema  bool        `json:"hasSchema"`
	Structural bool        `json:"structural"`
	Violations []Violation `json:"violations"`
}

// CheckStructural reports every structural-schema violation of every version, as the
// NonStructuralSchema condition would (spec.preserveUnknownFields: true is a violation too).
func CheckStructural(crd *apiextensionsv1.CustomResourceDefinition) (StructuralReport, error) {
	r := StructuralReport{Name: crd.Name, PreserveUnknownFields: crd.Spec.PreserveUnknownFields, Structural: !crd.Spec.PreserveUnknownFields}
	for _, name := range crdinfo.VersionNames(crd) {
		vs, err := SchemaFor(crd, name)
		if err != nil {
			return r, err
		}
		line := VersionStructure{Version: name, HasSchema: vs.Internal != nil, Structural: vs.Internal != nil && len(vs.Violations) == 0, Violations: vs.Violations}
		if line.Violations == nil {
			line.Violations = []Violation{}
		}
		if len(vs.Violations) > 0 {
			r.Structural = false
		}
		r.Versions = append(r.Versions, line)
	}
	return r, nil
}
