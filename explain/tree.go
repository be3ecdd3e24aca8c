package explain

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	crdinfo "github.com/crdver/kubectl-crdver/crd"
	"github.com/crdver/kubectl-crdver/crdschema"
)

// Field is one node of a version's schema, as `kubectl crdver explain` shows it. Its JSON form
// is part of the command's stable output.
type Field struct {
	// Path is the dotted path from the root; arrays and maps are transparent
	// (spec.ports.name is the name of every item of spec.ports), as in kubectl explain.
	Path        string `json:"path"`
	Name        string `json:"name"`
	Type        string `json:"type"`
	Required    bool   `json:"required"`
	Description string `json:"description,omitempty"`
	// Default is the schema default (JSON), when there is one.
	Default   json.RawMessage `json:"default,omitempty"`
	Nullable  bool            `json:"nullable,omitempty"`
	Enum      []any           `json:"enum,omitempty"`
	Format    string          `json:"format,omitempty"`
	Pattern   string          `json:"pattern,omitempty"`
	Minimum   *float64        `json:"minimum,omitempty"`
	Maximum   *float64        `json:"maximum,omitempty"`
	MinLength *int64          `json:"minLength,omitempty"`
	MaxLength *int64          `json:"maxLength,omitempty"`
	MinItems  *int64          `json:"minItems,omitempty"`
	MaxItems  *int64          `json:"maxItems,omitempty"`
	// ExclusiveMinimum/Maximum make the bounds strict.
	ExclusiveMinimum      bool     `json:"exclusiveMinimum,omitempty"`
	ExclusiveMaximum      bool     `json:"exclusiveMaximum,omitempty"`
	PreserveUnknownFields bool     `json:"x-kubernetes-preserve-unknown-fields,omitempty"`
	IntOrString           bool     `json:"x-kubernetes-int-or-string,omitempty"`
	EmbeddedResource      bool     `json:"x-kubernetes-embedded-resource,omitempty"`
	ListType              string   `json:"x-kubernetes-list-type,omitempty"`
	ListMapKeys           []string `json:"x-kubernetes-list-map-keys,omitempty"`
	MapType               string   `json:"x-kubernetes-map-type,omitempty"`
	Rules                 []Rule   `json:"x-kubernetes-validations,omitempty"`
	// Junctors names the logical junctors (allOf, anyOf, oneOf, not) that further restrict
	// the value, with their number of branches.
	Junctors []string `json:"junctors,omitempty"`
	Fields   []Field  `json:"fields,omitempty"`
}

// Rule is one CEL validation rule.
type Rule struct {
	Rule              string `json:"rule"`
	Message           string `json:"message,omitempty"`
	MessageExpression string `json:"messageExpression,omitempty"`
	Reason            string `json:"reason,omitempty"`
	FieldPath         string `json:"fieldPath,omitempty"`
	OptionalOldSelf   bool   `json:"optionalOldSelf,omitempty"`
	// Transition is true when the rule uses oldSelf (checked on update only).
	Transition bool `json:"transition"`
}

// typeName is the type as shown: string, integer, object, []string, map[string]integer,
// int-or-string, any.
func typeName(s *apiextensions.JSONSchemaProps) string {
	switch {
	case s == nil:
		return "any"
	case s.XIntOrString:
		return "int-or-string"
	case s.Type == "array":
		if s.Items != nil && s.Items.Schema != nil {
			return "[]" + typeName(s.Items.Schema)
		}
		return "[]any"
	case s.Type == "object" && s.AdditionalProperties != nil && s.AdditionalProperties.Schema != nil && len(s.Properties) == 0:
		return "map[string]" + typeName(s.AdditionalProperties.Schema)
	case s.Type == "":
		if s.XPreserveUnknownFields != nil && *s.XPreserveUnknownFields {
			return "any"
		}
		return "no type"
	}
	return s.Type
}

// element is the schema whose properties are a node's children: arrays and maps are
// transparent.
func element(s *apiextensions.JSONSchemaProps) *apiextensions.JSONSchemaProps {
	for s != nil {
		switch {
		case s.Type == "array" && s.Items != nil && s.Items.Schema != nil:
			s = s.Items.Schema
		case len(s.Properties) == 0 && s.AdditionalProperties != nil && s.AdditionalProperties.Schema != nil:
			s = s.AdditionalProperties.Schema
		default:
			return s
		}
	}
	return nil
}

func newField(path, name string, s *apiextensions.JSONSchemaProps, required bool, depth int) Field {
	f := Field{Path: path, Name: name, Type: typeName(s), Required: required}
	if s == nil {
		return f
	}
	f.Description = s.Description
	if s.Default != nil {
		f.Default, _ = json.Marshal(*s.Default)
	}
	f.Nullable = s.Nullable
	for _, e := range s.Enum {
		f.Enum = append(f.Enum, e)
	}
	f.Format, f.Pattern = s.Format, s.Pattern
	f.Minimum, f.Maximum, f.ExclusiveMinimum, f.ExclusiveMaximum = s.Minimum, s.Maximum, s.ExclusiveMinimum, s.ExclusiveMaximum
	f.MinLength, f.MaxLength, f.MinItems, f.MaxItems = s.MinLength, s.MaxLength, s.MinItems, s.MaxItems
	f.PreserveUnknownFields = s.XPreserveUnknownFields != nil && *s.XPreserveUnknownFields
	f.IntOrString, f.EmbeddedResource = s.XIntOrString, s.XEmbeddedResource
	if s.XListType != nil {
		f.ListType = *s.XListType
	}
	f.ListMapKeys = s.XListMapKeys
	if s.XMapType != nil {
		f.MapType = *s.XMapType
	}
	addRules := func(rules apiextensions.ValidationRules) {
		for _, r := range rules {
			f.Rules = append(f.Rules, Rule{Rule: r.Rule, Message: r.Message, MessageExpression: r.MessageExpression,
				Reason: derefReason(r.Reason), FieldPath: r.FieldPath, OptionalOldSelf: r.OptionalOldSelf != nil && *r.OptionalOldSelf,
				Transition: strings.Contains(r.Rule, "oldSelf")})
		}
	}
	addRules(s.XValidations)
	for _, j := range []struct {
		name string
		n    int
	}{{"allOf", len(s.AllOf)}, {"anyOf", len(s.AnyOf)}, {"oneOf", len(s.OneOf)}} {
		if j.n > 0 && !s.XIntOrString { // int-or-string's anyOf only spells the type
			f.Junctors = append(f.Junctors, fmt.Sprintf("%s (%d)", j.name, j.n))
		}
	}
	if s.Not != nil {
		f.Junctors = append(f.Junctors, "not")
	}
	// Rules and markers of arrays' items and maps' values show on the transparent node.
	if e := element(s); e != s && e != nil {
		addRules(e.XValidations)
	}
	if depth == 0 {
		return f
	}
	e := element(s)
	if e == nil {
		return f
	}
	req := map[string]bool{}
	for _, r := range e.Required {
		req[r] = true
	}
	for _, k := range slices.Sorted(maps.Keys(e.Properties)) {
		child := e.Properties[k]
		f.Fields = append(f.Fields, newField(joinPath(path, k), k, &child, req[k], depth-1))
	}
	return f
}

func derefReason(r *apiextensions.FieldValueErrorReason) string {
	if r == nil {
		return ""
	}
	return string(*r)
}

func joinPath(parent, k string) string {
	if parent == "" {
		return k
	}
	return parent + "." + k
}

// Explanation is what `kubectl crdver explain` shows for one version.
type Explanation struct {
	CRD        string                     `json:"crd"`
	Version    string                     `json:"version"`
	Served     bool                       `json:"served"`
	Storage    bool                       `json:"storage"`
	Structural crdschema.StructuralReport `json:"structural"`
	// Field is the node at the path asked for (the root when none), with its children (all
	// descendants with recursive).
	Field Field `json:"field"`
}

// Explain builds the explanation of version v of crd at path (dotted, "" for the root), with
// one level of children, or all of them when recursive.
func Explain(crd *apiextensionsv1.CustomResourceDefinition, v, path string, recursive bool) (*Explanation, error) {
	ver, err := crdinfo.Lookup(crd, v)
	if err != nil {
		return nil, err
	}
	vs, err := crdschema.SchemaFor(crd, v)
	if err != nil {
		return nil, err
	}
	report, err := crdschema.CheckStructural(crd)
	if err != nil {
		return nil, err
	}
	field, err := fieldTree(crd.Name, vs, path, recursive)
	if err != nil {
		return nil, err
	}
	return &Explanation{
		CRD: crd.Name, Version: v, Served: ver.Served, Storage: ver.Storage, Structural: report,
		Field: field,
	}, nil
}

// FieldTree is the Field of an Explanation alone: the fields of version v of crd at path,
// without the structural report of every version that Explain adds (which builds the schema of
// each version again: plan compares the trees of two versions for every pair it looks at).
func FieldTree(crd *apiextensionsv1.CustomResourceDefinition, v, path string, recursive bool) (Field, error) {
	vs, err := crdschema.SchemaFor(crd, v)
	if err != nil {
		return Field{}, err
	}
	return fieldTree(crd.Name, vs, path, recursive)
}

func fieldTree(crd string, vs *crdschema.VersionSchema, path string, recursive bool) (Field, error) {
	if vs.Internal == nil {
		return Field{}, fmt.Errorf("%s: version %q has no schema (spec.versions[].schema.openAPIV3Schema)", crd, vs.Version)
	}
	node, name, required, err := lookupPath(vs.Internal, path)
	if err != nil {
		return Field{}, fmt.Errorf("%s %s: %w", crd, vs.Version, err)
	}
	depth := 1
	if recursive {
		depth = 1 << 20
	}
	return newField(path, name, node, required, depth), nil
}

// lookupPath finds the schema at a dotted path (arrays and maps transparent).
func lookupPath(root *apiextensions.JSONSchemaProps, path string) (*apiextensions.JSONSchemaProps, string, bool, error) {
	if path == "" {
		return root, "", false, nil
	}
	cur, name, required := root, "", false
	done := []string{}
	for _, seg := range strings.Split(path, ".") {
		e := element(cur)
		if e == nil {
			return nil, "", false, fmt.Errorf("field %q: %s has no fields", path, strings.Join(done, "."))
		}
		child, ok := e.Properties[seg]
		if !ok {
			where := "the root"
			if len(done) > 0 {
				where = strings.Join(done, ".")
			}
			have := slices.Sorted(maps.Keys(e.Properties))
			if len(have) == 0 {
				return nil, "", false, fmt.Errorf("field %q does not exist: %s has no declared fields", path, where)
			}
			return nil, "", false, fmt.Errorf("field %q does not exist: %s has %s", path, where, strings.Join(have, ", "))
		}
		required = false
		for _, r := range e.Required {
			if r == seg {
				required = true
			}
		}
		c := child
		cur, name = &c, seg
		done = append(done, seg)
	}
	return cur, name, required, nil
}

// Constraints renders a field's validation and markers in one line, for tables.
func (f *Field) Constraints() string {
	var parts []string
	if f.Nullable {
		parts = append(parts, "nullable")
	}
	if len(f.Enum) > 0 {
		var vals []string
		for _, e := range f.Enum {
			b, _ := json.Marshal(e)
			vals = append(vals, string(b))
		}
		parts = append(parts, "enum: "+strings.Join(vals, "|"))
	}
	if f.Format != "" {
		parts = append(parts, "format: "+f.Format)
	}
	if r := bounds2(f.Minimum, f.Maximum, f.ExclusiveMinimum, f.ExclusiveMaximum); r != "" {
		parts = append(parts, r)
	}
	if f.MinLength != nil || f.MaxLength != nil {
		parts = append(parts, "length "+intRange(f.MinLength, f.MaxLength))
	}
	if f.MinItems != nil || f.MaxItems != nil {
		parts = append(parts, "items "+intRange(f.MinItems, f.MaxItems))
	}
	if f.Pattern != "" {
		parts = append(parts, "pattern: "+f.Pattern)
	}
	if f.ListType != "" {
		s := "list-type: " + f.ListType
		if len(f.ListMapKeys) > 0 {
			s += " (keys: " + strings.Join(f.ListMapKeys, ",") + ")"
		}
		parts = append(parts, s)
	}
	if f.MapType != "" {
		parts = append(parts, "map-type: "+f.MapType)
	}
	if f.PreserveUnknownFields {
		parts = append(parts, "preserve-unknown-fields")
	}
	if f.EmbeddedResource {
		parts = append(parts, "embedded-resource")
	}
	if len(f.Rules) > 0 {
		parts = append(parts, fmt.Sprintf("%d CEL rule(s)", len(f.Rules)))
	}
	parts = append(parts, f.Junctors...)
	return strings.Join(parts, ", ")
}

func num(f float64) string { return strconv.FormatFloat(f, 'g', -1, 64) }

func bounds2(min, max *float64, exMin, exMax bool) string {
	if min == nil && max == nil {
		return ""
	}
	lo, hi := "", ""
	if min != nil {
		lo = num(*min)
		if exMin {
			lo = ">" + lo
		}
	}
	if max != nil {
		hi = num(*max)
		if exMax {
			hi = "<" + hi
		}
	}
	return "range " + lo + ".." + hi
}

func intRange(min, max *int64) string {
	lo, hi := "", ""
	if min != nil {
		lo = strconv.FormatInt(*min, 10)
	}
	if max != nil {
		hi = strconv.FormatInt(*max, 10)
	}
	return lo + ".." + hi
}

// Walk calls fn for f and every descendant, depth first, in order.
func (f *Field) Walk(fn func(f *Field, depth int)) { f.walk(fn, 0) }

func (f *Field) walk(fn func(*Field, int), depth int) {
	fn(f, depth)
	for i := range f.Fields {
		f.Fields[i].walk(fn, depth+1)
	}
}
