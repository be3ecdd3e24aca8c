package convert

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
)

// Kinds of difference. The loss rule, in one place for every loss check (convert's round
// trip, its pruned-fields check and its --write gate, the preflight of migrate, retire and
// upgrade, plan's conversion sample, restore): what a conversion adds or normalises is
// reported, never a loss, and so is a default the input never held that the conversion drops;
// everything else is a loss.
const (
	// DiffLost: a field of the original is missing afterwards.
	DiffLost = "lost"
	// DiffListLength: a list has another length afterwards (shorter: elements are lost;
	// longer: the elements' positions are not the user's any more).
	DiffListLength = "list-length"
	// DiffChanged: a value changed, or its type did.
	DiffChanged = "changed"
	// DiffAdded: a field absent in the original is present afterwards (an annotation the
	// conversion keeps its data in, a zero status, a defaulted reference): not a loss.
	DiffAdded = "added"
	// DiffNormalised: a string became another spelling of the same Go duration ("5m" and
	// "5m0s") or Kubernetes quantity ("1Gi" and "1073741824"): not a loss.
	DiffNormalised = "normalised"
	// DiffDefaultDropped: a field the input did not hold (absent, or null) — a default of its
	// own version put it there before it was sent, as the API server does on create — is
	// missing afterwards: not a loss, the input never held it (Flux's GitRepository samples
	// lack spec.gitImplementation, which v1beta1 defaults and v1 does not have).
	DiffDefaultDropped = "default-dropped"
)

// Difference is one JSON path where two objects differ.
type Difference struct {
	Path   string `json:"path"` // .spec.port, .spec.items[2]
	Detail string `json:"detail"`
	// Kind is one of DiffLost, DiffListLength, DiffChanged, DiffAdded, DiffNormalised.
	Kind string `json:"kind"`
}

// Loss reports whether the difference loses something of the original: every kind but an
// addition, a normalisation and a dropped default the input never held.
func (d Difference) Loss() bool {
	return d.Kind != DiffAdded && d.Kind != DiffNormalised && d.Kind != DiffDefaultDropped
}

// Diff lists the differences between want (the original) and got (what came back), by JSON
// path, sorted, each with its kind. Numbers compare by value (1 equals 1.0).
func Diff(want, got map[string]any) []Difference {
	return DiffFrom(want, want, got)
}

// DiffFrom is Diff where want is given as it was sent: given defaulted in its own version
// (what the API server stores on create). A field of want that given does not hold (absent or
// null) and got lacks is DiffDefaultDropped, not DiffLost.
func DiffFrom(given, want, got map[string]any) []Difference {
	var out []Difference
	diffValue("", want, got, given, &out)
	return out
}

// held: the input held a value here (it is present and not null). A value the object sent
// has where the input held none was put there by a default.
func held(given any, present bool) bool { return present && given != nil }

// Losses are the differences that lose something of want (Difference.Loss).
func Losses(want, got map[string]any) []Difference {
	var out []Difference
	for _, d := range Diff(want, got) {
		if d.Loss() {
			out = append(out, d)
		}
	}
	return out
}

// defaultField is a field the object sent holds and the input did not (DiffFrom's rule): a
// default of the object's own version put it there.
type defaultField struct {
	path  string // as the API server's pruning names it: ".spec.items[0].mode"
	at    []any  // the keys (string) and list indexes (int) that lead to it
	value any
}

// defaultsAdded lists the fields sent holds (not null) that given does not hold.
func defaultsAdded(given, sent map[string]any) []defaultField {
	var out []defaultField
	var walk func(path string, at []any, g, s any)
	walk = func(path string, at []any, g, s any) {
		switch sv := s.(type) {
		case map[string]any:
			gm, _ := g.(map[string]any)
			for k, v := range sv {
				p, a := k, append(at[:len(at):len(at)], k)
				if path != "" {
					p = path + "." + k
				}
				gv, inG := gm[k]
				if v != nil && !held(gv, inG) {
					out = append(out, defaultField{path: "." + p, at: a, value: v})
					continue
				}
				walk(p, a, gv, v)
			}
		case []any:
			gl, _ := g.([]any)
			for i := 0; i < min(len(sv), len(gl)); i++ {
				walk(path+"["+strconv.Itoa(i)+"]", append(at[:len(at):len(at)], i), gl[i], sv[i])
			}
		}
	}
	walk("", nil, given, sent)
	return out
}

// defaultsHeld keeps the defaults obj holds at the same path with the same value.
func defaultsHeld(ds []defaultField, obj map[string]any) []defaultField {
	out := ds[:0]
	for _, d := range ds {
		var cur any = obj
		for _, k := range d.at {
			switch c := cur.(type) {
			case map[string]any:
				key, _ := k.(string)
				cur = c[key]
			case []any:
				i, _ := k.(int)
				if i >= len(c) {
					cur = nil
					break
				}
				cur = c[i]
			default:
				cur = nil
			}
		}
		if cur != nil && jsonEqual(cur, d.value) {
			out = append(out, d)
		}
	}
	return out
}

// defaultAt is the default at the pruned path p, or nil.
func defaultAt(ds []defaultField, p string) *defaultField {
	for i := range ds {
		if ds[i].path == p {
			return &ds[i]
		}
	}
	return nil
}

// diffValue diffs a (what was sent) with b (what came back); g is the input's value at the
// same path (nil when it has none).
func diffValue(path string, a, b, g any, out *[]Difference) {
	am, aIsMap := a.(map[string]any)
	bm, bIsMap := b.(map[string]any)
	if aIsMap && bIsMap {
		keys := map[string]bool{}
		for k := range am {
			keys[k] = true
		}
		for k := range bm {
			keys[k] = true
		}
		gm, _ := g.(map[string]any)
		for _, k := range sortedKeys(keys) {
			p := path + pathKey(k)
			av, inA := am[k]
			bv, inB := bm[k]
			gv, inG := gm[k]
			switch {
			case inA && !inB && av != nil && !held(gv, inG):
				*out = append(*out, Difference{Path: p, Kind: DiffDefaultDropped, Detail: fmt.Sprintf("dropped: %s was a default the input did not hold, missing after the round trip", jsonText(av))})
			case inA && !inB:
				*out = append(*out, Difference{Path: p, Kind: DiffLost, Detail: fmt.Sprintf("lost: was %s, missing after the round trip", jsonText(av))})
			case !inA && inB:
				*out = append(*out, Difference{Path: p, Kind: DiffAdded, Detail: fmt.Sprintf("added: %s appeared after the round trip", jsonText(bv))})
			default:
				diffValue(p, av, bv, gv, out)
			}
		}
		return
	}
	al, aIsList := a.([]any)
	bl, bIsList := b.([]any)
	if aIsList && bIsList {
		if len(al) != len(bl) {
			*out = append(*out, Difference{Path: path, Kind: DiffListLength, Detail: fmt.Sprintf("list length %d became %d", len(al), len(bl))})
		}
		gl, _ := g.([]any)
		for i := 0; i < min(len(al), len(bl)); i++ {
			var gv any
			if i < len(gl) {
				gv = gl[i]
			}
			diffValue(path+"["+strconv.Itoa(i)+"]", al[i], bl[i], gv, out)
		}
		return
	}
	if !jsonEqual(a, b) {
		if path == "" {
			path = "."
		}
		if as, ok := a.(string); ok {
			if bs, ok := b.(string); ok {
				if what := sameValue(as, bs); what != "" {
					*out = append(*out, Difference{Path: path, Kind: DiffNormalised, Detail: fmt.Sprintf("normalised: %s became %s (the same %s)", jsonText(a), jsonText(b), what)})
					return
				}
			}
		}
		*out = append(*out, Difference{Path: path, Kind: DiffChanged, Detail: fmt.Sprintf("changed: %s became %s", jsonText(a), jsonText(b))})
	}
}

// sameValue says what two different strings both spell the same value of: "duration" when
// both parse as Go durations (time.ParseDuration) and are equal, "quantity" when both parse
// as Kubernetes quantities (resource.ParseQuantity) and compare equal, else "".
func sameValue(a, b string) string {
	if da, err := time.ParseDuration(a); err == nil {
		if db, err := time.ParseDuration(b); err == nil && da == db {
			return "duration"
		}
	}
	if qa, err := resource.ParseQuantity(a); err == nil {
		if qb, err := resource.ParseQuantity(b); err == nil && qa.Cmp(qb) == 0 {
			return "quantity"
		}
	}
	return ""
}

// PathOf is the JSON path of a field by its keys, as Diff names it (.spec.port,
// .metadata.labels["app.kubernetes.io/name"]).
func PathOf(keys ...string) string {
	var b strings.Builder
	for _, k := range keys {
		b.WriteString(pathKey(k))
	}
	return b.String()
}

// pathKey writes a map key as a JSON path segment: plain when it is an identifier, else
// quoted in brackets (.metadata.labels["app.kubernetes.io/name"]).
func pathKey(k string) string {
	if k == "" {
		return `[""]`
	}
	for i, c := range k {
		if !(c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || i > 0 && (c >= '0' && c <= '9' || c == '-')) {
			return "[" + strconv.Quote(k) + "]"
		}
	}
	return "." + k
}

// jsonText shows a value as compact JSON (null for null), cut at 80 characters.
func jsonText(v any) string {
	if v == nil {
		return "null"
	}
	return compact(v)
}
