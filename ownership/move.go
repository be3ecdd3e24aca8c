// Package ownership reads and rewrites the metadata.managedFields of custom resources: how
// many objects still hold entries of each version (Census), and moving every entry of a
// version that is about to be removed to another version while keeping each manager's
// ownership (Move). It is the managedFields half of `kubectl crdver retire`; it has no
// command-line code in it.
//
// Why: once a version is gone from a CRD's spec.versions, a server-side apply of an object
// that still has a managedFields entry of that version fails with "request to convert CR to
// an invalid group/version", and a plain update silently drops all managedFields
// (kubernetes#111937). The API server's field manager keeps each entry in the version it was
// written in and converts the object (not the field set) to that version whenever it compares;
// so an entry must be moved before its version goes.
//
// How a field set is moved (Move). An entry's FieldsV1 lists paths of the object as seen in
// its version F. The target version T may name the same fields differently (a conversion
// webhook renames or splits fields). The API server converts the object for us: the caller
// reads the same object (same resourceVersion) at F and at T, both through the CRD's own
// conversion while F is still served. Then, per entry of F:
//
//   - every owned path that exists in the object read at T is kept as it is. This is exact
//     when the versions' schemas use the same paths (conversion None, or a webhook that
//     renames nothing), which is the common case;
//   - an owned path that exists at F but not at T was renamed by the conversion. The paths the
//     conversion produced instead are the leaves of the object at T that do not exist at F
//     ("appeared"). They are given to the managers that own the vanished paths, but only when
//     that attribution is unambiguous: every vanished leaf is owned by the same set of
//     managers (one manager, or co-owners that applied the same values). Otherwise the entry
//     is not moved and the object is reported as unresolved with the reason: we never guess.
//   - when nothing appeared (the target's schema has no such fields: they are pruned there),
//     the vanished paths are dropped from every set: they are not in the object at T;
//   - an owned path that exists neither at F nor at T (ownership of a field no longer in the
//     object) is kept as it is: it names nothing, in either version.
//
// Lists are compared as a whole where they differ (no schema is needed): a rename inside the
// items of a list that exists at both versions is reported as unresolved.
//
// Entries that become identical managers after the move (the same manager, operation and
// subresource updating at both F and T) are merged: their field sets are united and the later
// time kept, since the API server would otherwise keep only one of them.
package ownership

import (
	"bytes"
	"fmt"
	"sort"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"
	"sigs.k8s.io/structured-merge-diff/v6/value"
)

// MoveResult says what Move did to one object's managedFields.
type MoveResult struct {
	// Moved is the number of entries relabelled from the old to the new version.
	Moved int
	// Converted is the number of those whose field set was translated (renamed fields).
	Converted int
	// Merged is the number of entries merged into another entry of the same manager.
	Merged int
	// Unresolved says why an entry could not be moved ("" when every entry was).
	Unresolved string
}

// NeedsSource reports whether moving the entries of apiVersion from needs the object read at
// that version too: some owned path does not exist in target (the object read at the target
// version). When false, Move can be called with source nil.
func NeedsSource(entries []metav1.ManagedFieldsEntry, from string, target map[string]any) (bool, error) {
	for _, e := range entries {
		if e.APIVersion != from {
			continue
		}
		s, err := decode(e)
		if err != nil {
			return false, err
		}
		missing := false
		s.Iterate(func(p fieldpath.Path) {
			if !missing && !Exists(target, p) {
				missing = true
			}
		})
		if missing {
			return true, nil
		}
	}
	return false, nil
}

// Move returns entries with every entry whose apiVersion is from moved to apiVersion to,
// keeping each manager's ownership (see the package documentation). target is the object read
// at to; source is the same object (same resourceVersion) read at from, needed only when
// NeedsSource says so. entries is not modified. When the ownership of some entry cannot be
// worked out, the returned entries equal the input and MoveResult.Unresolved says why.
func Move(entries []metav1.ManagedFieldsEntry, from, to string, source, target map[string]any) ([]metav1.ManagedFieldsEntry, MoveResult, error) {
	var res MoveResult
	sets := make([]*fieldpath.Set, len(entries))
	lost := map[int]*fieldpath.Set{}
	for i, e := range entries {
		if e.APIVersion != from {
			continue
		}
		s, err := decode(e)
		if err != nil {
			return nil, res, err
		}
		sets[i] = s
		l := fieldpath.NewSet()
		s.Iterate(func(p fieldpath.Path) {
			if !Exists(target, p) && source != nil && Exists(source, p) {
				l.Insert(p.Copy())
			}
		})
		if !l.Empty() {
			lost[i] = l
		} else if source == nil {
			if need, _ := NeedsSource([]metav1.ManagedFieldsEntry{e}, from, target); need {
				return nil, res, fmt.Errorf("the object read at %s is needed to move the managedFields entry of %q", from, e.Manager)
			}
		}
	}

	var appeared *fieldpath.Set
	if len(lost) > 0 {
		vanished := diffLeaves(source, target, fieldpath.Path{})
		appeared = diffLeaves(target, source, fieldpath.Path{})
		// Nothing appeared (the target's schema dropped the fields): there is nothing to
		// attribute, the lost paths are simply no longer in the object.
		if reason := attributable(entries, lost, sets, vanished); reason != "" && !appeared.Empty() {
			res.Unresolved = reason
			return entries, res, nil
		}
	}

	out := make([]metav1.ManagedFieldsEntry, 0, len(entries))
	for i, e := range entries {
		if e.APIVersion != from {
			out = append(out, *e.DeepCopy())
			continue
		}
		s := sets[i]
		if l, ok := lost[i]; ok {
			s = s.Difference(l).Union(appeared)
			res.Converted++
		}
		b, err := s.ToJSON()
		if err != nil {
			return nil, res, err
		}
		n := *e.DeepCopy()
		n.APIVersion = to
		n.FieldsV1 = &metav1.FieldsV1{Raw: b}
		out = append(out, n)
		res.Moved++
	}
	out, merged, err := mergeSameManager(out)
	if err != nil {
		return nil, res, err
	}
	res.Merged = merged
	return out, res, nil
}

// attributable says why the appeared leaves cannot be given to the owners of the vanished
// ones ("" when they can): every vanished leaf must be owned by exactly the same managers,
// and every owned path that vanished must lie under a vanished leaf.
func attributable(entries []metav1.ManagedFieldsEntry, lost map[int]*fieldpath.Set, sets []*fieldpath.Set, vanished *fieldpath.Set) string {
	var owners []int
	for i := range lost {
		owners = append(owners, i)
	}
	sort.Ints(owners)
	var names []string
	for _, i := range owners {
		names = append(names, entries[i].Manager)
	}
	var problem string
	vanished.Iterate(func(p fieldpath.Path) {
		if problem != "" {
			return
		}
		var who []string
		for _, i := range owners {
			if sets[i].Has(p) {
				who = append(who, entries[i].Manager)
			}
		}
		if len(who) != len(owners) {
			problem = fmt.Sprintf("the conversion renamed fields owned by different managers (%s; %s is owned by %s): which new field belongs to whom is unknown",
				strings.Join(names, ", "), p, orNone(who))
		}
	})
	if problem != "" {
		return problem
	}
	for _, i := range owners {
		lost[i].Iterate(func(p fieldpath.Path) {
			if problem != "" || underAny(p, vanished) || hasBelow(vanished, p) {
				return
			}
			problem = fmt.Sprintf("%s owns %s, which has no counterpart at the target version inside a list or field that exists at both: which new field it became is unknown", entries[i].Manager, p)
		})
	}
	return problem
}

func orNone(s []string) string {
	if len(s) == 0 {
		return "no manager"
	}
	return strings.Join(s, ", ")
}

// underAny reports whether p is one of the paths of s or below one of them.
func underAny(p fieldpath.Path, s *fieldpath.Set) bool {
	for n := len(p); n > 0; n-- {
		if s.Has(p[:n]) {
			return true
		}
	}
	return false
}

// diffLeaves is the set of leaves of a that do not exist in b: walking maps, a field of a
// missing in b is added whole (its leaves when it is a map; the field itself otherwise).
func diffLeaves(a, b any, prefix fieldpath.Path) *fieldpath.Set {
	out := fieldpath.NewSet()
	am, ok := a.(map[string]any)
	if !ok {
		return out
	}
	bm, _ := b.(map[string]any)
	for k, av := range am {
		if len(prefix) == 0 && (k == "apiVersion" || k == "kind" || k == "metadata") {
			continue
		}
		p := append(prefix.Copy(), fieldpath.PathElement{FieldName: strPtr(k)})
		bv, present := bm[k]
		switch {
		case !present:
			out = out.Union(allLeaves(av, p))
		default:
			out = out.Union(diffLeaves(av, bv, p))
		}
	}
	return out
}

// allLeaves is every leaf below v (v itself when it is not a non-empty map), prefixed by p.
func allLeaves(v any, p fieldpath.Path) *fieldpath.Set {
	m, ok := v.(map[string]any)
	if !ok || len(m) == 0 {
		return fieldpath.NewSet(p)
	}
	out := fieldpath.NewSet()
	for k, c := range m {
		out = out.Union(allLeaves(c, append(p.Copy(), fieldpath.PathElement{FieldName: strPtr(k)})))
	}
	return out
}

// hasBelow reports whether s has a path strictly below p (p is an owned parent of a vanished
// leaf, such as the map holding it).
func hasBelow(s *fieldpath.Set, p fieldpath.Path) bool {
	cur := s
	for _, pe := range p {
		next, ok := cur.Children.Get(pe)
		if !ok {
			return false
		}
		cur = next
	}
	return !cur.Empty()
}

func strPtr(s string) *string { return &s }

// Exists reports whether path p names something in obj (an unstructured object): field
// names select map entries, keys and values select list items, indexes list positions.
func Exists(obj any, p fieldpath.Path) bool {
	cur := obj
	for _, pe := range p {
		switch {
		case pe.FieldName != nil:
			m, ok := cur.(map[string]any)
			if !ok {
				return false
			}
			if cur, ok = m[*pe.FieldName]; !ok {
				return false
			}
		case pe.Key != nil:
			l, ok := cur.([]any)
			if !ok {
				return false
			}
			found := false
			for _, it := range l {
				im, ok := it.(map[string]any)
				if !ok {
					continue
				}
				match := true
				for _, f := range *pe.Key {
					v, ok := im[f.Name]
					if !ok || !value.Equals(value.NewValueInterface(v), f.Value) {
						match = false
						break
					}
				}
				if match {
					cur, found = it, true
					break
				}
			}
			if !found {
				return false
			}
		case pe.Value != nil:
			l, ok := cur.([]any)
			if !ok {
				return false
			}
			found := false
			for _, it := range l {
				if value.Equals(value.NewValueInterface(it), *pe.Value) {
					cur, found = it, true
					break
				}
			}
			if !found {
				return false
			}
		case pe.Index != nil:
			l, ok := cur.([]any)
			if !ok || *pe.Index < 0 || *pe.Index >= len(l) {
				return false
			}
			cur = l[*pe.Index]
		default:
			return false
		}
	}
	return true
}

func decode(e metav1.ManagedFieldsEntry) (*fieldpath.Set, error) {
	if e.FieldsType != "FieldsV1" {
		return nil, fmt.Errorf("managedFields entry of %q has fieldsType %q, not FieldsV1", e.Manager, e.FieldsType)
	}
	s := fieldpath.NewSet()
	if e.FieldsV1 == nil || len(e.FieldsV1.Raw) == 0 {
		return s, nil
	}
	if err := s.FromJSON(bytes.NewReader(e.FieldsV1.Raw)); err != nil {
		return nil, fmt.Errorf("managedFields entry of %q: %w", e.Manager, err)
	}
	return s, nil
}

// identity is how the API server keys managers (managedfields' BuildManagerIdentifier):
// manager, operation and subresource, and the apiVersion for Update entries only.
func identity(e metav1.ManagedFieldsEntry) string {
	v := e.APIVersion
	if e.Operation == metav1.ManagedFieldsOperationApply {
		v = ""
	}
	return strings.Join([]string{e.Manager, string(e.Operation), e.Subresource, v}, "\x00")
}

// mergeSameManager merges entries with the same identity: the union of their sets and the
// later time, at the position of the first.
func mergeSameManager(entries []metav1.ManagedFieldsEntry) ([]metav1.ManagedFieldsEntry, int, error) {
	first := map[string]int{}
	var out []metav1.ManagedFieldsEntry
	merged := 0
	for _, e := range entries {
		id := identity(e)
		j, seen := first[id]
		if !seen {
			first[id] = len(out)
			out = append(out, e)
			continue
		}
		a, err := decode(out[j])
		if err != nil {
			return nil, 0, err
		}
		b, err := decode(e)
		if err != nil {
			return nil, 0, err
		}
		raw, err := a.Union(b).ToJSON()
		if err != nil {
			return nil, 0, err
		}
		out[j].FieldsV1 = &metav1.FieldsV1{Raw: raw}
		if e.Time != nil && (out[j].Time == nil || out[j].Time.Before(e.Time)) {
			out[j].Time = e.Time
		}
		merged++
	}
	return out, merged, nil
}
