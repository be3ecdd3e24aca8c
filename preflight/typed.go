package preflight

// typed.go: whether an object fits the typed schema the API server builds for server-side
// apply and field ownership (managedFields). A stored value whose type or shape (scalar, list,
// map) the version's schema no longer has is read and written back unchanged (ratcheting lets
// the unchanged field through), but the API server cannot build the typed object: every
// server-side apply of it fails, and on servers before 1.37 a rewrite drops all of its
// managedFields (1.37 keeps the live ones: kubernetes#136949).
//
// The typing is the API server's own: the OpenAPI models of every version of the CRD built as
// the apiextensions-apiserver builds them for apply (customresource_handler.go,
// buildOpenAPIModelsForApply: builder.BuildOpenAPIV3 per version, merged with
// builder.MergeSpecsV3), turned into a TypeConverter by apimachinery's
// managedfields.NewTypeConverter, and the object converted with ObjectToTyped and
// typed.AllowDuplicates, as structured-merge-diff's field manager does on every write.

import (
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apiextensions-apiserver/pkg/controller/openapi/builder"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"k8s.io/kube-openapi/pkg/spec3"
	"k8s.io/kube-openapi/pkg/validation/spec"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"
	"sigs.k8s.io/structured-merge-diff/v6/typed"
	"sigs.k8s.io/yaml"
)

// TypeMismatch is one value of an object whose type does not fit the version's typed schema.
type TypeMismatch struct {
	// Path is the field, dotted from the root as the API server prints it (.spec.config).
	Path string `json:"path"`
	// ValueType is what the object holds there: string, integer, number, boolean, list, map.
	ValueType string `json:"valueType,omitempty"`
	// Expected is what the schema says: map, list, string, numeric (structured-merge-diff's
	// words).
	Expected string `json:"expected,omitempty"`
	// Value is the value held, as JSON.
	Value string `json:"value,omitempty"`
	// Error is structured-merge-diff's error as the API server returns it.
	Error string `json:"error"`
	// Converted, when the value converts without loss to the expected type (a string holding
	// YAML or JSON that parses to a map or list; a scalar to a one-element list), is the
	// converted value as JSON.
	Converted string `json:"converted,omitempty"`
	// ConvertedErrors: the values convert, but the API server rejects the object with the
	// converted values (e.g. a field the new schema requires inside the converted map): the
	// API server's errors for that update. Converted is then empty: the fix is for a person.
	ConvertedErrors []string `json:"convertedErrors,omitempty"`
}

// Describe words the mismatch for people: ".spec.config is string, v1beta1 expects map", with
// version the version whose schema it was typed with.
func (m TypeMismatch) Describe(version string) string {
	what, want := m.ValueType, m.Expected
	if what == "" {
		what = "a value"
	}
	if want == "" {
		want = "another type"
	}
	return fmt.Sprintf("%s is %s, %s expects %s", m.Path, what, version, want)
}

// TypeChecker types objects of one CRD as the API server does for server-side apply. It is
// safe for concurrent use.
type TypeChecker struct {
	group, kind string
	tc          managedfields.TypeConverter
}

// NewTypeChecker builds the typed schema of every version of crd, as the API server builds it.
func NewTypeChecker(crd *apiextensionsv1.CustomResourceDefinition) (*TypeChecker, error) {
	// The API server merges the CRD's models with its static spec (the built-in types): the
	// CRD's own models already hold ObjectMeta and what it refers to, which is all its
	// objects use.
	specs := []*spec3.OpenAPI{{Version: "3.0.0", Info: &spec.Info{InfoProps: spec.InfoProps{Title: "Kubernetes CRD Swagger", Version: "v0.1.0"}},
		Components: &spec3.Components{Schemas: map[string]*spec.Schema{}}}}
	for _, v := range crd.Spec.Versions {
		s, err := builder.BuildOpenAPIV3(crd, v.Name, builder.Options{})
		if err != nil {
			return nil, fmt.Errorf("%s: building the typed schema of %s: %w", crd.Name, v.Name, err)
		}
		specs = append(specs, s)
	}
	merged, err := builder.MergeSpecsV3(specs...)
	if err != nil {
		return nil, fmt.Errorf("%s: merging the typed schemas: %w", crd.Name, err)
	}
	tc, err := managedfields.NewTypeConverter(merged.Components.Schemas, crd.Spec.PreserveUnknownFields)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", crd.Name, err)
	}
	return &TypeChecker{group: crd.Spec.Group, kind: crd.Spec.Names.Kind, tc: tc}, nil
}

// Check types obj at version (its apiVersion is set to it; obj is not changed) and returns the
// values that do not fit, nil when it fits. An error that is no value's (a version the CRD
// lacks) is returned as one mismatch without a path.
func (c *TypeChecker) Check(obj map[string]any, version string) []TypeMismatch {
	u := &unstructured.Unstructured{Object: shallowWithAPIVersion(obj, schema.GroupVersion{Group: c.group, Version: version}.String())}
	u.SetKind(c.kind)
	_, err := c.tc.ObjectToTyped(u, typed.AllowDuplicates)
	if err == nil {
		return nil
	}
	var ves typed.ValidationErrors
	if !errors.As(err, &ves) {
		return []TypeMismatch{{Error: err.Error()}}
	}
	out := make([]TypeMismatch, 0, len(ves))
	for _, ve := range ves {
		m := TypeMismatch{Path: ve.Path, Error: ve.Error()}
		m.Expected = expectedOf(ve.ErrorMessage)
		if v, ok := valueAt(obj, ve.Path); ok {
			m.ValueType = typeName(v)
			if b, err := json.Marshal(v); err == nil {
				m.Value = string(b)
			}
			m.Converted = convertValue(v, m.Expected)
		}
		out = append(out, m)
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out
}

// Convert returns a copy of obj (read at version) with every value Check finds not fitting
// replaced by its lossless conversion (TypeMismatch.Converted), and what Check found. The copy
// is nil when obj fits (no mismatch) or when some value has no lossless conversion (or sits
// where no conversion can be written: a list item by key).
func (c *TypeChecker) Convert(obj map[string]any, version string) (map[string]any, []TypeMismatch) {
	tm := c.Check(obj, version)
	if len(tm) == 0 {
		return nil, nil
	}
	return Converted(obj, tm), tm
}

// Converted is a copy of obj with the value at each mismatch's path replaced by its lossless
// conversion (TypeMismatch.Converted); nil when some mismatch has none or its path cannot be
// written (a list item by key).
func Converted(obj map[string]any, tm []TypeMismatch) map[string]any {
	out := runtime.DeepCopyJSON(obj)
	for _, m := range tm {
		var v any
		if m.Converted == "" || json.Unmarshal([]byte(m.Converted), &v) != nil || !setAt(out, m.Path, v) {
			return nil
		}
	}
	return out
}

// FieldSet is obj's field set at version as the API server's field manager records it
// (structured-merge-diff's typed.ToFieldSet): the paths a manager that wrote every value of obj
// would own.
func (c *TypeChecker) FieldSet(obj map[string]any, version string) (*fieldpath.Set, error) {
	u := &unstructured.Unstructured{Object: shallowWithAPIVersion(obj, schema.GroupVersion{Group: c.group, Version: version}.String())}
	u.SetKind(c.kind)
	tv, err := c.tc.ObjectToTyped(u, typed.AllowDuplicates)
	if err != nil {
		return nil, err
	}
	return tv.ToFieldSet()
}

// setAt sets the value at an SMD path (.spec.config, .spec.items[0]) that exists in obj;
// false when it does not (or is a list item by key).
func setAt(obj map[string]any, path string, v any) bool {
	cut := strings.LastIndexAny(path, ".[")
	if cut < 0 {
		return false
	}
	parent, ok := valueAt(obj, path[:cut])
	if !ok {
		return false
	}
	last := path[cut:]
	switch p := parent.(type) {
	case map[string]any:
		key, ok := strings.CutPrefix(last, ".")
		if _, exists := p[key]; !ok || !exists {
			return false
		}
		p[key] = v
		return true
	case []any:
		i, err := strconv.Atoi(strings.TrimSuffix(strings.TrimPrefix(last, "["), "]"))
		if err != nil || !strings.HasSuffix(last, "]") || i < 0 || i >= len(p) {
			return false
		}
		p[i] = v
		return true
	}
	return false
}

func shallowWithAPIVersion(obj map[string]any, apiVersion string) map[string]any {
	out := make(map[string]any, len(obj))
	for k, v := range obj {
		out[k] = v
	}
	out["apiVersion"] = apiVersion
	return out
}

// expectedOf reads the expected type from structured-merge-diff's message ("expected map, got
// …", "expected string, got …", "expected numeric (int or float), got …").
func expectedOf(msg string) string {
	rest, ok := strings.CutPrefix(msg, "expected ")
	if !ok {
		return ""
	}
	word, _, _ := strings.Cut(rest, ",")
	word, _, _ = strings.Cut(word, " ")
	return word
}

// valueAt finds the value at an SMD path (.spec.config, .spec.items[0], .spec.m[key=value]
// not followed: lists by key are left unresolved).
func valueAt(obj map[string]any, path string) (any, bool) {
	var cur any = obj
	for path != "" {
		switch {
		case strings.HasPrefix(path, "."):
			path = path[1:]
			end := strings.IndexAny(path, ".[")
			if end < 0 {
				end = len(path)
			}
			m, ok := cur.(map[string]any)
			if !ok {
				return nil, false
			}
			if cur, ok = m[path[:end]]; !ok {
				return nil, false
			}
			path = path[end:]
		case strings.HasPrefix(path, "["):
			end := strings.Index(path, "]")
			if end < 0 {
				return nil, false
			}
			i, err := strconv.Atoi(path[1:end])
			l, ok := cur.([]any)
			if err != nil || !ok || i < 0 || i >= len(l) {
				return nil, false
			}
			cur, path = l[i], path[end+1:]
		default:
			return nil, false
		}
	}
	return cur, true
}

func typeName(v any) string {
	switch x := v.(type) {
	case string:
		return "string"
	case bool:
		return "boolean"
	case int64, int32, int:
		return "integer"
	case float64:
		if x == float64(int64(x)) {
			return "integer"
		}
		return "number"
	case []any:
		return "list"
	case map[string]any:
		return "map"
	case nil:
		return "null"
	}
	return fmt.Sprintf("%T", v)
}

// convertValue is v converted without loss to the expected type, as JSON ("" when it does
// not convert): a string holding YAML or JSON that parses to a map (or a list), a scalar or a
// map to a one-element list, a number or boolean to the string that spells it.
func convertValue(v any, expected string) string {
	var out any
	switch expected {
	case "map":
		s, ok := v.(string)
		if !ok {
			return ""
		}
		var m map[string]any
		if err := yaml.Unmarshal([]byte(s), &m); err != nil || m == nil {
			return ""
		}
		out = m
	case "list":
		switch x := v.(type) {
		case string:
			var l []any
			if err := yaml.Unmarshal([]byte(x), &l); err == nil && l != nil && strings.ContainsAny(strings.TrimSpace(x)[:1], "[-") {
				out = l
			} else {
				out = []any{x}
			}
		case []any:
			return ""
		default:
			out = []any{x}
		}
	case "string":
		switch v.(type) {
		case bool, int64, float64:
			b, err := json.Marshal(v)
			if err != nil {
				return ""
			}
			out = string(b)
		default:
			return ""
		}
	default:
		return ""
	}
	b, err := json.Marshal(out)
	if err != nil {
		return ""
	}
	return string(b)
}

// atRisk reports whether a write of u may drop field managers: it has managedFields, and the
// API server may fail to type it (a value that does not fit the target's typed schema, or the
// schema of a version its entries name, or an entry of a version the CRD lacks; with a
// conversion webhook, any entry of another version than the target).
func (e *evaluation) atRisk(u *unstructured.Unstructured) bool {
	mf := u.GetManagedFields()
	if len(mf) == 0 {
		return false
	}
	if e.types == nil {
		return true
	}
	versions := map[string]bool{e.r.Target: true}
	for _, m := range mf {
		gv, err := schema.ParseGroupVersion(m.APIVersion)
		if err != nil || gv.Group != e.crd.Spec.Group {
			continue
		}
		versions[gv.Version] = true
	}
	none := e.r.Strategy == string(apiextensionsv1.NoneConverter)
	for v := range versions {
		if !hasVersion(e.crd, v) || v != e.r.Target && !none {
			return true
		}
		if e.types.Check(u.Object, v) != nil {
			return true
		}
	}
	return false
}

func hasVersion(crd *apiextensionsv1.CustomResourceDefinition, v string) bool {
	for _, x := range crd.Spec.Versions {
		if x.Name == v {
			return true
		}
	}
	return false
}

// LostManagers compares the managedFields of an object (before) with those of its write as
// the API server returns it (after): the entries gone, by manager, operation and subresource,
// worded "manager (Operation at apiVersion)"; reset when after has none at all.
func LostManagers(before, after []metav1.ManagedFieldsEntry) ([]string, bool) {
	type key struct {
		manager, sub string
		op           metav1.ManagedFieldsOperationType
	}
	kept := map[key]bool{}
	for _, m := range after {
		kept[key{m.Manager, m.Subresource, m.Operation}] = true
	}
	var lost []string
	for _, m := range before {
		if kept[key{m.Manager, m.Subresource, m.Operation}] {
			continue
		}
		s := fmt.Sprintf("%s (%s at %s", m.Manager, m.Operation, m.APIVersion)
		if m.Subresource != "" {
			s += ", /" + m.Subresource
		}
		lost = append(lost, s+")")
	}
	return lost, len(lost) > 0 && len(after) == 0
}
