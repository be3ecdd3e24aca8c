package doctor

import (
	"fmt"
	"math"
	"sort"

	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apivalidation "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/validation"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/cel"
	"k8s.io/apimachinery/pkg/util/validation/field"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	"k8s.io/apiserver/pkg/cel/environment"

	crdinfo "github.com/crdver/kubectl-crdver/crd"
	"github.com/crdver/kubectl-crdver/crdschema"
)

// CostWarnFraction is the share of the API server's per-rule and per-CRD CEL cost limits from
// which a rule's estimated cost is reported as near the limit.
const CostWarnFraction = 0.5

// checkSchema: legacy preserveUnknownFields, non-structural schemas, versions without a schema,
// x-kubernetes-preserve-unknown-fields at the root, and CEL rules whose estimated cost is near
// (or over) the API server's limits.
func (k *checker) checkSchema() {
	crd := k.crd
	explainFix := func(v string) string { return fmt.Sprintf("kubectl crdver explain %s --version %s", crd.Name, v) }
	if crd.Spec.PreserveUnknownFields {
		k.add(CheckSchema, SeverityWarning,
			fmt.Sprintf(`make every version's schema structural, then kubectl patch crd %s --type=merge -p '{"spec":{"preserveUnknownFields":false}}'`, crd.Name),
			"legacy spec.preserveUnknownFields: true: unknown fields are stored as sent (no pruning), and defaults and webhook conversion cannot be used")
	}
	for _, name := range crdinfo.VersionNames(crd) {
		vs, err := crdschema.SchemaFor(crd, name)
		if err != nil {
			k.incomplete(CheckSchema, err)
			continue
		}
		if vs.Internal == nil {
			k.add(CheckSchema, SeverityWarning, explainFix(name),
				fmt.Sprintf("version %s has no schema: nothing is validated or pruned", name))
			continue
		}
		if len(vs.Violations) > 0 {
			first := vs.Violations[0]
			k.add(CheckSchema, SeverityError, explainFix(name),
				fmt.Sprintf("version %s: schema is not structural (%d violations; first: %s: %s)", name, len(vs.Violations), first.Field, first.Message))
			continue
		}
		if vs.Internal.XPreserveUnknownFields != nil && *vs.Internal.XPreserveUnknownFields && inUse(crd, name) {
			k.add(CheckSchema, SeverityWarning, explainFix(name),
				fmt.Sprintf("version %s: x-kubernetes-preserve-unknown-fields at the root: unknown fields are never pruned anywhere in the object", name))
		}
		k.checkCELCost(name, vs.Internal)
	}
}

// RuleCost is the API server's cost estimate of one x-kubernetes-validations rule.
type RuleCost struct {
	// Path is the rule's field path in the version's schema (…x-kubernetes-validations[i].rule).
	Path string
	Rule string
	// Cost is the estimated cost the API server compares with StaticEstimatedCostLimit (the
	// rule's worst-case cost times how often it can run).
	Cost uint64
	// Error is set when the rule does not compile.
	Error string
}

// CELCosts estimates the cost of every x-kubernetes-validations rule of schema the way the API
// server does when it validates a CRD (apiextensions validation: CELSchemaContext for the
// cardinality, schema/cel.Compile with celconfig.PerCallLimit for each rule's MaxCost), and
// the total it compares with StaticEstimatedCRDCostLimit.
func CELCosts(schema *apiextensions.JSONSchemaProps) (rules []RuleCost, total uint64) {
	root := apivalidation.RootCELContext(schema)
	walkCEL(schema, field.NewPath("openAPIV3Schema"), root, &rules)
	return rules, root.TotalCost.Total
}

// celEnvSet is the environment the API server's CRD validation uses, at the compatibility
// version of the Kubernetes version the run judges as (kubeversion.Use); MustBaseEnvSet caches one
// per version.
func celEnvSet() *environment.EnvSet {
	return environment.MustBaseEnvSet(environment.DefaultCompatibilityVersion())
}

// walkCEL follows ValidateCustomResourceDefinitionOpenAPISchema's recursion (properties,
// additionalProperties, items) with the same child contexts.
func walkCEL(s *apiextensions.JSONSchemaProps, p *field.Path, ctx *apivalidation.CELSchemaContext, out *[]RuleCost) {
	if s == nil || ctx == nil {
		return
	}
	if len(s.XValidations) > 0 {
		ti, err := ctx.TypeInfo()
		switch {
		case err != nil:
			*out = append(*out, RuleCost{Path: p.Child("x-kubernetes-validations").String(), Error: err.Error()})
		case ti != nil:
			// Rules already stored are compiled in the StoredExpressions environment, as for
			// an update of the CRD that leaves them unchanged.
			results, err := cel.Compile(ti.Schema, ti.DeclType, celconfig.PerCallLimit, celEnvSet(), cel.StoredExpressionsEnvLoader())
			if err != nil {
				*out = append(*out, RuleCost{Path: p.Child("x-kubernetes-validations").String(), Error: err.Error()})
				break
			}
			for i, cr := range results {
				rp := p.Child("x-kubernetes-validations").Index(i).Child("rule")
				rc := RuleCost{Path: rp.String(), Rule: s.XValidations[i].Rule, Cost: expressionCost(cr, ctx)}
				if cr.Error != nil {
					rc.Error = cr.Error.Detail
				}
				ctx.TotalCost.ObserveExpressionCost(rp, rc.Cost)
				*out = append(*out, rc)
			}
		}
	}
	if s.AdditionalProperties != nil && s.AdditionalProperties.Schema != nil {
		walkCEL(s.AdditionalProperties.Schema, p.Child("additionalProperties"), ctx.ChildAdditionalPropertiesContext(s.AdditionalProperties.Schema), out)
	}
	names := make([]string, 0, len(s.Properties))
	for n := range s.Properties {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		prop := s.Properties[n]
		walkCEL(&prop, p.Child("properties").Key(n), ctx.ChildPropertyContext(&prop, n), out)
	}
	if s.Items != nil && s.Items.Schema != nil {
		walkCEL(s.Items.Schema, p.Child("items"), ctx.ChildItemsContext(s.Items.Schema), out)
	}
}

// expressionCost is validation.getExpressionCost (unexported there): the rule's MaxCost times
// the schema's cardinality when bounded, else times the rule's own MaxCardinality.
func expressionCost(cr cel.CompilationResult, ctx *apivalidation.CELSchemaContext) uint64 {
	if ctx.MaxCardinality != nil {
		return mulGuard(cr.MaxCost, *ctx.MaxCardinality)
	}
	return mulGuard(cr.MaxCost, cr.MaxCardinality)
}

func mulGuard(a, b uint64) uint64 {
	if a != 0 && b > math.MaxUint64/a {
		return math.MaxUint64
	}
	return a * b
}

func (k *checker) checkCELCost(version string, schema *apiextensions.JSONSchemaProps) {
	rules, total := CELCosts(schema)
	fix := fmt.Sprintf("bound the lists, maps and strings the rule walks (maxItems, maxProperties, maxLength): kubectl crdver explain %s --version %s", k.crd.Name, version)
	limit := uint64(apivalidation.StaticEstimatedCostLimit)
	for _, r := range rules {
		switch {
		case r.Error != "":
			k.add(CheckSchema, SeverityWarning, fmt.Sprintf("kubectl crdver explain %s --version %s", k.crd.Name, version),
				fmt.Sprintf("version %s: CEL rule at %s does not compile on this client's CEL environment: %s", version, r.Path, r.Error))
		case r.Cost > limit:
			k.add(CheckSchema, SeverityError, fix,
				fmt.Sprintf("version %s: CEL rule at %s has estimated cost %d, over the API server's per-rule limit %d: the API server rejects a CRD that adds it", version, r.Path, r.Cost, limit))
		case float64(r.Cost) >= CostWarnFraction*float64(limit):
			k.add(CheckSchema, SeverityWarning, fix,
				fmt.Sprintf("version %s: CEL rule at %s has estimated cost %d, %.0f%% of the API server's limit %d", version, r.Path, r.Cost, 100*float64(r.Cost)/float64(limit), limit))
		}
	}
	crdLimit := uint64(apivalidation.StaticEstimatedCRDCostLimit)
	switch {
	case total > crdLimit:
		k.add(CheckSchema, SeverityError, fix,
			fmt.Sprintf("version %s: the CEL rules' estimated total cost %d is over the API server's limit %d for a schema", version, total, crdLimit))
	case float64(total) >= CostWarnFraction*float64(crdLimit):
		k.add(CheckSchema, SeverityWarning, fix,
			fmt.Sprintf("version %s: the CEL rules' estimated total cost %d is %.0f%% of the API server's limit %d for a schema", version, total, 100*float64(total)/float64(crdLimit), crdLimit))
	}
}

// inUse reports whether version v is served or may still hold stored objects.
func inUse(crd *apiextensionsv1.CustomResourceDefinition, v string) bool {
	if ver, err := crdinfo.Lookup(crd, v); err == nil && ver.Served {
		return true
	}
	for _, s := range crd.Status.StoredVersions {
		if s == v {
			return true
		}
	}
	return false
}
