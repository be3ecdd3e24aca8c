package preview

import (
	"maps"
	"slices"
	"sort"

	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	structuraldefaulting "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/defaulting"
)

// defaultTree is where in a structural schema the API server's defaulter
// (structuraldefaulting.Default) can change an object: a node exists for a schema only when
// Default can change a value of that schema (a default on one of its properties, on its
// additionalProperties or its items, or deeper). It is built once per version, so that
// recording what defaulting set copies and compares only those parts of each object, not the
// whole object: the rest is left untouched by Default, and the same answer follows.
type defaultTree struct {
	// props holds every declared property; nil where Default changes nothing under it.
	props map[string]*defaultTree
	// additional and items: nil where Default changes nothing under them.
	additional, items *defaultTree
	// itemsDefault: the items' schema has a default (a null item may be replaced).
	itemsDefault bool
}

// newDefaultTree is s's tree; nil when Default(x, s) changes nothing whatever x is (it follows
// Default's walk: Properties, else AdditionalProperties, and Items).
func newDefaultTree(s *structuralschema.Structural) *defaultTree {
	if s == nil {
		return nil
	}
	t := &defaultTree{props: make(map[string]*defaultTree, len(s.Properties))}
	changes := false
	for k := range s.Properties {
		prop := s.Properties[k]
		c := newDefaultTree(&prop)
		t.props[k] = c
		changes = changes || c != nil || prop.Default.Object != nil
	}
	if s.AdditionalProperties != nil && s.AdditionalProperties.Structural != nil {
		ap := s.AdditionalProperties.Structural
		t.additional = newDefaultTree(ap)
		changes = changes || t.additional != nil || ap.Default.Object != nil
	}
	if s.Items != nil {
		t.items = newDefaultTree(s.Items)
		t.itemsDefault = s.Items.Default.Object != nil
		changes = changes || t.items != nil || t.itemsDefault
	}
	if !changes {
		return nil
	}
	return t
}

// child is the tree of a map's key k: its property's, else additionalProperties'.
func (t *defaultTree) child(k string) *defaultTree {
	if c, declared := t.props[k]; declared {
		return c
	}
	return t.additional
}

// defaultTracked runs the API server's defaulter on obj with version v's structural schema and
// returns the outermost paths it set (as defaultedPaths of a copy taken before and obj after),
// copying beforehand only the parts of obj that Default can change.
func (p *Previewer) defaultTracked(obj map[string]any, v string) []string {
	s := p.schemas[v].Structural
	t, ok := p.defaults[v]
	if !ok {
		t = newDefaultTree(s)
		p.defaults[v] = t
	}
	if t == nil {
		return nil // no default anywhere in the schema: Default changes nothing
	}
	before := copyForDefaulting(obj, t)
	structuraldefaulting.Default(obj, s)
	return defaultedIn(before, obj, t, "")
}

// copyForDefaulting copies x where t says Default can change it and shares the rest.
func copyForDefaulting(x any, t *defaultTree) any {
	if t == nil {
		return x
	}
	switch v := x.(type) {
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, c := range v {
			out[k] = copyForDefaulting(c, t.child(k))
		}
		return out
	case []any:
		out := make([]any, len(v))
		for i, c := range v {
			out[i] = copyForDefaulting(c, t.items)
		}
		return out
	}
	return x
}

// defaultedIn is defaultedPaths(before, after, path) for before made by copyForDefaulting(…, t)
// and after by Default: it does not descend where Default changed nothing (the value there is
// the same in both, so defaultedPaths would find nothing).
func defaultedIn(before, after any, t *defaultTree, path string) []string {
	if t == nil {
		return defaultedPaths(before, after, path)
	}
	var out []string
	switch a := after.(type) {
	case map[string]any:
		b, ok := before.(map[string]any)
		if !ok {
			return defaultedPaths(before, after, path)
		}
		for _, k := range slices.Sorted(maps.Keys(a)) {
			bv, ok := b[k]
			switch c := t.child(k); {
			case !ok || (bv == nil && a[k] != nil):
				out = append(out, childPath(path, k))
			case c != nil:
				out = append(out, defaultedIn(bv, a[k], c, childPath(path, k))...)
			}
		}
	case []any:
		b, ok := before.([]any)
		if !ok || len(a) != len(b) {
			return defaultedPaths(before, after, path)
		}
		for i := range a {
			switch {
			case b[i] == nil: // possibly replaced by the items' default
				out = append(out, defaultedPaths(b[i], a[i], indexPath(path, i))...)
			case t.items != nil:
				out = append(out, defaultedIn(b[i], a[i], t.items, indexPath(path, i))...)
			}
		}
	}
	sort.Strings(out)
	return out
}
