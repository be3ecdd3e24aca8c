package explain

import (
	"maps"
	"regexp"
	"slices"
	"sort"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	structuralpruning "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/pruning"

	"github.com/crdver/kubectl-crdver/crdschema"
)

// FieldChange is one difference between two versions' schemas at a field.
type FieldChange struct {
	Path string `json:"path"`
	From string `json:"from,omitempty"`
	To   string `json:"to,omitempty"`
}

// SchemaDiff lists the differences between the schemas of two versions. Its JSON form is part
// of `kubectl crdver explain --compare`'s stable output.
type SchemaDiff struct {
	CRD  string `json:"crd"`
	From string `json:"from"`
	To   string `json:"to"`
	// ConversionStrategy is None or Webhook.
	ConversionStrategy string        `json:"conversionStrategy"`
	Added              []FieldChange `json:"added"`
	Removed            []FieldChange `json:"removed"`
	Retyped            []FieldChange `json:"retyped"`
	DefaultsChanged    []FieldChange `json:"defaultsChanged"`
	ValidationChanged  []FieldChange `json:"validationChanged"`
	// PrunedFromTo are the fields of an object stored in From that the API server's pruning
	// drops when it is read as To with conversion strategy None (and PrunedToFrom the
	// reverse). Worked out by running the API server's pruner on an object that sets every
	// field of the source schema.
	PrunedFromTo []string `json:"prunedFromTo"`
	PrunedToFrom []string `json:"prunedToFrom"`
	Notes        []string `json:"notes"`
}

func flatten(f Field, out map[string]Field) {
	f.Walk(func(n *Field, _ int) {
		c := *n
		c.Fields = nil
		out[c.Path] = c
	})
}

func rulesText(f Field) string {
	var parts []string
	for _, r := range f.Rules {
		parts = append(parts, r.Rule)
	}
	return strings.Join(parts, " ; ")
}

func validationText(f Field) string {
	var parts []string
	if f.Required {
		parts = append(parts, "required")
	}
	if c := f.Constraints(); c != "" {
		parts = append(parts, c)
	}
	if r := rulesText(f); r != "" {
		parts = append(parts, "rules: "+r)
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}

// Compare lists the differences between versions from and to of crd.
func Compare(crd *apiextensionsv1.CustomResourceDefinition, from, to string) (*SchemaDiff, error) {
	d := &SchemaDiff{CRD: crd.Name, From: from, To: to, ConversionStrategy: string(apiextensionsv1.NoneConverter),
		Added: []FieldChange{}, Removed: []FieldChange{}, Retyped: []FieldChange{}, DefaultsChanged: []FieldChange{},
		ValidationChanged: []FieldChange{}, PrunedFromTo: []string{}, PrunedToFrom: []string{}, Notes: []string{}}
	if crd.Spec.Conversion != nil && crd.Spec.Conversion.Strategy != "" {
		d.ConversionStrategy = string(crd.Spec.Conversion.Strategy)
	}
	ef, err := Explain(crd, from, "", true)
	if err != nil {
		return nil, err
	}
	et, err := Explain(crd, to, "", true)
	if err != nil {
		return nil, err
	}
	a, b := map[string]Field{}, map[string]Field{}
	flatten(ef.Field, a)
	flatten(et.Field, b)
	// Only the outermost added or removed field is listed: its children come and go with it.
	for _, p := range slices.Sorted(maps.Keys(b)) {
		if _, ok := a[p]; !ok && p != "" {
			if _, parentNew := a[parentPath(p)]; parentNew || parentPath(p) == "" {
				d.Added = append(d.Added, FieldChange{Path: p, To: b[p].Type})
			}
		}
	}
	for _, p := range slices.Sorted(maps.Keys(a)) {
		fa := a[p]
		fb, ok := b[p]
		if !ok {
			if _, parentKept := b[parentPath(p)]; p != "" && (parentKept || parentPath(p) == "") {
				d.Removed = append(d.Removed, FieldChange{Path: p, From: fa.Type})
			}
			continue
		}
		if fa.Type != fb.Type {
			d.Retyped = append(d.Retyped, FieldChange{Path: p, From: fa.Type, To: fb.Type})
		}
		if string(fa.Default) != string(fb.Default) {
			d.DefaultsChanged = append(d.DefaultsChanged, FieldChange{Path: p, From: orNone(string(fa.Default)), To: orNone(string(fb.Default))})
		}
		if va, vb := validationText(fa), validationText(fb); va != vb {
			d.ValidationChanged = append(d.ValidationChanged, FieldChange{Path: p, From: va, To: vb})
		}
	}
	if d.ConversionStrategy != string(apiextensionsv1.NoneConverter) {
		d.Notes = append(d.Notes, "conversion strategy is "+d.ConversionStrategy+": the webhook decides what is kept; the pruned lists say what the API server prunes after the webhook if it copies every field")
	}
	if crd.Spec.PreserveUnknownFields {
		d.Notes = append(d.Notes, "spec.preserveUnknownFields is true: the API server prunes nothing")
		return d, nil
	}
	sa, err := crdschema.SchemaFor(crd, from)
	if err != nil {
		return nil, err
	}
	sb, err := crdschema.SchemaFor(crd, to)
	if err != nil {
		return nil, err
	}
	if sa.Structural == nil || sb.Structural == nil {
		d.Notes = append(d.Notes, "a schema is not structural: the pruned lists cannot be worked out (kubectl crdver explain lists the violations)")
		return d, nil
	}
	d.PrunedFromTo = prunedReading(sa.Structural, sb.Structural)
	d.PrunedToFrom = prunedReading(sb.Structural, sa.Structural)
	return d, nil
}

func parentPath(p string) string {
	if i := strings.LastIndexByte(p, '.'); i >= 0 {
		return p[:i]
	}
	return ""
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

const sampleKey = "__key__"

var indexRE = regexp.MustCompile(`\[\d+\]`)

// prunedReading builds an object that sets every field of from (one item per list, one key
// per map), prunes it with the API server's pruner in to's schema, and returns the pruned
// paths in explain's notation (lists and maps transparent).
func prunedReading(from, to *structuralschema.Structural) []string {
	obj, _ := sampleValue(from, 0).(map[string]any)
	if obj == nil {
		return []string{}
	}
	paths := structuralpruning.PruneWithOptions(obj, to, true, structuralschema.UnknownFieldPathOptions{TrackUnknownFieldPaths: true})
	seen := map[string]bool{}
	out := []string{}
	for _, p := range paths {
		p = indexRE.ReplaceAllString(p, "")
		p = strings.ReplaceAll(p, "."+sampleKey, "")
		if !seen[p] {
			seen[p] = true
			out = append(out, p)
		}
	}
	sort.Strings(out)
	return out
}

func sampleValue(s *structuralschema.Structural, depth int) any {
	if s == nil || depth > 40 {
		return "x"
	}
	switch {
	case s.XIntOrString:
		return int64(1)
	case s.Type == "array":
		return []any{sampleValue(s.Items, depth+1)}
	case s.Type == "object" || (s.Type == "" && (len(s.Properties) > 0 || s.AdditionalProperties != nil)):
		m := map[string]any{}
		for k := range s.Properties {
			if depth == 0 && (k == "apiVersion" || k == "kind" || k == "metadata") {
				continue
			}
			p := s.Properties[k]
			m[k] = sampleValue(&p, depth+1)
		}
		if s.AdditionalProperties != nil && s.AdditionalProperties.Structural != nil {
			m[sampleKey] = sampleValue(s.AdditionalProperties.Structural, depth+1)
		}
		return m
	case s.Type == "string":
		return "x"
	case s.Type == "integer":
		return int64(1)
	case s.Type == "number":
		return 1.5
	case s.Type == "boolean":
		return true
	}
	return "x"
}
