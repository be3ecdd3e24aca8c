package explain

import (
	"fmt"
	"maps"
	"reflect"
	"regexp"
	"slices"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// listIndex is an index or key in a path as preview prints it: spec.rules[0].matches.
var listIndex = regexp.MustCompile(`\[[^\]]*\]`)

// Path turns the paths people paste into explain's dotted form, where lists and maps
// are transparent: preview's spec.rules[0].matches (indexes dropped) and kubectl's
// <resource>.spec.rules (the leading resource dropped when it names crd and is not a field of
// the root).
func Path(crd *apiextensionsv1.CustomResourceDefinition, version, path string) string {
	p := strings.Trim(listIndex.ReplaceAllString(path, ""), ".")
	if rest, ok := strings.CutPrefix(p, crd.Name); ok && (rest == "" || rest[0] == '.') {
		return strings.TrimPrefix(rest, ".")
	}
	first, rest, _ := strings.Cut(p, ".")
	if namesCRD(crd, first) && !rootField(crd, version, first) {
		return rest
	}
	return p
}

// namesCRD reports whether s is the CRD's plural, singular, kind or a short name, as kubectl
// explain accepts them.
func namesCRD(crd *apiextensionsv1.CustomResourceDefinition, s string) bool {
	n := crd.Spec.Names
	for _, name := range append([]string{n.Plural, n.Singular, n.Kind}, n.ShortNames...) {
		if name != "" && strings.EqualFold(name, s) {
			return true
		}
	}
	return false
}

func rootField(crd *apiextensionsv1.CustomResourceDefinition, version, name string) bool {
	for _, v := range crd.Spec.Versions {
		if v.Name == version && v.Schema != nil && v.Schema.OpenAPIV3Schema != nil {
			_, ok := v.Schema.OpenAPIV3Schema.Properties[name]
			return ok
		}
	}
	return false
}

// MetadataExplanation is what `explain CRD metadata` prints: the standard ObjectMeta fields the
// API server keeps for every object, which are not part of the CRD's schema.
type MetadataExplanation struct {
	CRD     string          `json:"crd"`
	Version string          `json:"version"`
	Note    string          `json:"note"`
	Fields  []MetadataField `json:"fields"`
}

// MetadataField is one field of metav1.ObjectMeta.
type MetadataField struct {
	Name        string `json:"name"`
	Type        string `json:"type"`
	Description string `json:"description"`
}

// Metadata describes metadata (or one field of it) from metav1.ObjectMeta itself: its
// JSON field names, Go types and the API documentation's descriptions.
func Metadata(crd *apiextensionsv1.CustomResourceDefinition, version, field string) (*MetadataExplanation, error) {
	note := "metadata is the standard ObjectMeta (meta/v1): the API server keeps and validates it for every object; it is not part of the CRD's schema"
	if crd.Spec.Scope == apiextensionsv1.ClusterScoped {
		note += "; the CRD is cluster-scoped, so metadata.namespace is always empty"
	}
	for _, v := range crd.Spec.Versions {
		if v.Name == version && v.Schema != nil && v.Schema.OpenAPIV3Schema != nil {
			if m, ok := v.Schema.OpenAPIV3Schema.Properties["metadata"]; ok && len(m.Properties) > 0 {
				note += fmt.Sprintf("; the schema may only restrict metadata.name and metadata.generateName (it declares %s)", strings.Join(slices.Sorted(maps.Keys(m.Properties)), ", "))
			}
		}
	}
	e := &MetadataExplanation{CRD: crd.Name, Version: version, Note: note}
	docs := metav1.ObjectMeta{}.SwaggerDoc()
	t := reflect.TypeOf(metav1.ObjectMeta{})
	var names []string
	for i := 0; i < t.NumField(); i++ {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
		if name == "" || name == "-" {
			continue
		}
		names = append(names, name)
		if field != "" && field != name {
			continue
		}
		e.Fields = append(e.Fields, MetadataField{Name: name, Type: jsonType(t.Field(i).Type), Description: firstSentence(docs[name])})
	}
	if len(e.Fields) == 0 {
		return nil, fmt.Errorf("%s %s: field %q does not exist: metadata has %s", crd.Name, version, "metadata."+field, strings.Join(names, ", "))
	}
	return e, nil
}

func jsonType(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch {
	case t == reflect.TypeOf(metav1.Time{}):
		return "string (date-time)"
	case t.Kind() == reflect.Slice:
		return "[]" + jsonType(t.Elem())
	case t.Kind() == reflect.Map:
		return "map[string]" + jsonType(t.Elem())
	case t.Kind() == reflect.Struct:
		return "object"
	case t.Kind() == reflect.Int64 || t.Kind() == reflect.Int32:
		return "integer"
	}
	return t.Kind().String()
}

// firstSentence keeps the first sentence of an API description.
func firstSentence(s string) string {
	if i := strings.Index(s, ". "); i >= 0 {
		return s[:i+1]
	}
	return s
}
