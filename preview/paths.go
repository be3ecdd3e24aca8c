package preview

import (
	"maps"
	"reflect"
	"slices"
	"sort"
	"strconv"
)

// childPath extends a JSON path the way the API server's pruning reports unknown fields:
// keys joined with dots, indexes in brackets (spec.items[0].name).
func childPath(parent, key string) string {
	if parent == "" {
		return key
	}
	return parent + "." + key
}

func indexPath(parent string, i int) string { return parent + "[" + strconv.Itoa(i) + "]" }

// droppedNulls lists the paths holding null in before that are gone from after (the API
// server drops nulls of non-nullable fields that have no default). Arrays are compared item
// by item: pruning never removes array items.
func droppedNulls(before, after any, path string) []string {
	var out []string
	switch b := before.(type) {
	case map[string]any:
		a, _ := after.(map[string]any)
		for _, k := range slices.Sorted(maps.Keys(b)) {
			v := b[k]
			av, ok := a[k]
			if v == nil {
				if !ok && a != nil {
					out = append(out, childPath(path, k))
				}
				continue
			}
			if ok {
				out = append(out, droppedNulls(v, av, childPath(path, k))...)
			}
		}
	case []any:
		a, _ := after.([]any)
		if len(a) != len(b) {
			return nil
		}
		for i := range b {
			out = append(out, droppedNulls(b[i], a[i], indexPath(path, i))...)
		}
	}
	return out
}

// defaultedPaths lists the outermost paths that defaulting set: absent or null in before,
// set in after.
func defaultedPaths(before, after any, path string) []string {
	var out []string
	switch a := after.(type) {
	case map[string]any:
		b, _ := before.(map[string]any)
		for _, k := range slices.Sorted(maps.Keys(a)) {
			bv, ok := b[k]
			switch {
			case !ok || (bv == nil && a[k] != nil):
				out = append(out, childPath(path, k))
			default:
				out = append(out, defaultedPaths(bv, a[k], childPath(path, k))...)
			}
		}
	case []any:
		b, _ := before.([]any)
		if len(a) != len(b) {
			if !reflect.DeepEqual(a, b) && path != "" {
				out = append(out, path)
			}
			return out
		}
		for i := range a {
			out = append(out, defaultedPaths(b[i], a[i], indexPath(path, i))...)
		}
	}
	sort.Strings(out)
	return out
}

// hasNull reports whether x holds a null anywhere.
func hasNull(x any) bool {
	switch v := x.(type) {
	case nil:
		return true
	case map[string]any:
		for _, c := range v {
			if hasNull(c) {
				return true
			}
		}
	case []any:
		for _, c := range v {
			if hasNull(c) {
				return true
			}
		}
	}
	return false
}
