package ownership

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"
)

// values.go: managedFields entries moved with a value whose type changed.
//
// A release that types a field differently (spec.config, YAML text in v1alpha1, an object in
// v1beta1) leaves stored objects holding the old type. Converting the value (the text parsed
// into the object it spells) changes what the field's paths are: a manager that owned the
// string owned the one path .spec.config; the same manager owns the object through the paths
// of its fields. The API server cannot move that ownership itself: it types the live object
// to compare it with the new one, and the live object (a string where the schema says
// object) does not type, so the write that converts the value loses or keeps stale every
// entry (servers before 1.37 drop them all; 1.37 keeps the old ones). MoveToValues computes
// the entries the object should have after the conversion, for a second write to set.

// MoveToValues returns entries with the ownership of every value whose shape changed between
// old and converted (a scalar that became a map or a list, a list that became a map, …) moved
// to the converted value's paths: an entry that owned the value (its path, or paths below it)
// owns instead every path of fields, the converted object's typed field set as
// structured-merge-diff records it (typed.ToFieldSet), at or below the value's path. Entries
// that own no changed value are returned as they are; the second result counts the entries
// changed. old and converted are the same object before and after the conversion, read at the
// version the entries name; entries is not modified.
func MoveToValues(entries []metav1.ManagedFieldsEntry, old, converted map[string]any, fields *fieldpath.Set) ([]metav1.ManagedFieldsEntry, int, error) {
	roots := changedShapes(old, converted, fieldpath.Path{})
	out := make([]metav1.ManagedFieldsEntry, 0, len(entries))
	changed := 0
	for _, e := range entries {
		s, err := decode(e)
		if err != nil {
			return nil, 0, err
		}
		moved := false
		for _, r := range roots {
			owned := fieldpath.NewSet()
			s.Iterate(func(p fieldpath.Path) {
				if hasPrefix(p, r) {
					owned.Insert(p.Copy())
				}
			})
			if owned.Empty() {
				continue
			}
			s = s.Difference(owned).Union(under(fields, r))
			moved = true
		}
		n := *e.DeepCopy()
		if moved {
			raw, err := s.ToJSON()
			if err != nil {
				return nil, 0, err
			}
			n.FieldsV1 = &metav1.FieldsV1{Raw: raw}
			changed++
		}
		out = append(out, n)
	}
	return out, changed, nil
}

// changedShapes are the paths, below prefix, of the fields a and b both hold with values of
// another shape (map, list or scalar), walking the maps both hold: lists are not walked (an
// item's path depends on the schema's list type).
func changedShapes(a, b any, prefix fieldpath.Path) []fieldpath.Path {
	am, ok1 := a.(map[string]any)
	bm, ok2 := b.(map[string]any)
	if !ok1 || !ok2 {
		return nil
	}
	var out []fieldpath.Path
	for k, av := range am {
		if len(prefix) == 0 && (k == "apiVersion" || k == "kind" || k == "metadata") {
			continue
		}
		bv, ok := bm[k]
		if !ok {
			continue
		}
		p := append(prefix.Copy(), fieldpath.PathElement{FieldName: strPtr(k)})
		if shape(av) != shape(bv) {
			out = append(out, p)
			continue
		}
		out = append(out, changedShapes(av, bv, p)...)
	}
	return out
}

func shape(v any) string {
	switch v.(type) {
	case map[string]any:
		return "map"
	case []any:
		return "list"
	}
	return "scalar"
}

// hasPrefix reports whether p is prefix or lies below it.
func hasPrefix(p, prefix fieldpath.Path) bool {
	if len(p) < len(prefix) {
		return false
	}
	for i := range prefix {
		if !p[i].Equals(prefix[i]) {
			return false
		}
	}
	return true
}

// under is the paths of s at or below prefix.
func under(s *fieldpath.Set, prefix fieldpath.Path) *fieldpath.Set {
	out := fieldpath.NewSet()
	s.Iterate(func(p fieldpath.Path) {
		if hasPrefix(p, prefix) {
			out.Insert(p.Copy())
		}
	})
	return out
}

// Restore is the managedFields an object should have after a write that moved its values
// (MoveToValues): current is what it has now, original what it had before that write, moved
// what the move computed from original. Every entry of current that is still one of original
// (same manager, operation, subresource, apiVersion and fields: the API server kept it as it
// was, or nobody has written since) is replaced by its moved entry; an entry written since
// (by its manager, after the write) is kept, with the moved fields of the same manager added
// to it when it names the same version; a moved entry whose manager current lacks (the API
// server dropped every entry) is added. The second result reports whether the entries
// differ from current, i.e. whether a write is needed.
func Restore(current, original, moved []metav1.ManagedFieldsEntry) ([]metav1.ManagedFieldsEntry, bool, error) {
	var out []metav1.ManagedFieldsEntry
	for _, c := range current {
		same := false
		for _, o := range original {
			eq, err := sameEntry(c, o)
			if err != nil {
				return nil, false, err
			}
			if eq {
				same = true
				break
			}
		}
		if !same {
			out = append(out, *c.DeepCopy())
		}
	}
	for _, m := range moved {
		i := -1
		for j := range out {
			if identity(out[j]) == identity(m) {
				i = j
			}
		}
		if i < 0 {
			out = append(out, *m.DeepCopy())
			continue
		}
		a, err := decode(out[i])
		if err != nil {
			return nil, false, err
		}
		b, err := decode(m)
		if err != nil {
			return nil, false, err
		}
		raw, err := a.Union(b).ToJSON()
		if err != nil {
			return nil, false, err
		}
		out[i].FieldsV1 = &metav1.FieldsV1{Raw: raw}
	}
	if len(out) != len(current) {
		return out, true, nil
	}
	for i := range out {
		eq, err := sameEntry(out[i], current[i])
		if err != nil {
			return nil, false, err
		}
		if !eq {
			return out, true, nil
		}
	}
	return out, false, nil
}

// sameEntry: a and b are the same manager, operation, subresource and apiVersion with the
// same fields (their times aside).
func sameEntry(a, b metav1.ManagedFieldsEntry) (bool, error) {
	if a.Manager != b.Manager || a.Operation != b.Operation || a.Subresource != b.Subresource || a.APIVersion != b.APIVersion || a.FieldsType != b.FieldsType {
		return false, nil
	}
	sa, err := decode(a)
	if err != nil {
		return false, err
	}
	sb, err := decode(b)
	if err != nil {
		return false, err
	}
	return sa.Equals(sb), nil
}
