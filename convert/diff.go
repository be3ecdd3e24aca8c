package convert

import (
	"fmt"
	"strconv"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
)

// Kinds of difference. The loss rule, in one place for every loss check (convert's round
// trip and its --write gate, the preflight of migrate, retire and upgrade, plan's conversion
// sample): what a conversion adds or normalises is reported, never a loss; everything else is.
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
)

// Difference is one JSON path where two objects differ.
type Difference struct {
	Path   string `json:"path"` // .spec.port, .spec.items[2]
	Detail string `json:"detail"`
	// Kind is one of DiffLost, DiffListLength, DiffChanged, DiffAdded, DiffNormalised.
	Kind string `json:"kind"`
}

// Loss reports whether the difference loses something of the original: every kind but an
// addition and a normalisation.
func (d Difference) Loss() bool { return d.Kind != DiffAdded && d.Kind != DiffNormalised }

// Diff lists the differences between want (the original) and got (what came back), by JSON
// path, sorted, each with its kind. Numbers compare by value (1 equals 1.0).
func Diff(want, got map[string]any) []Difference {
	var out []Difference
	diffValue("", want, got, &out)
	return out
}

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

func diffValue(path string, a, b any, out *[]Difference) {
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
		for _, k := range sortedKeys(keys) {
			p := path + pathKey(k)
			av, inA := am[k]
			bv, inB := bm[k]
			switch {
			case inA && !inB:
				*out = append(*out, Difference{Path: p, Kind: DiffLost, Detail: fmt.Sprintf("lost: was %s, missing after the round trip", jsonText(av))})
			case !inA && inB:
				*out = append(*out, Difference{Path: p, Kind: DiffAdded, Detail: fmt.Sprintf("added: %s appeared after the round trip", jsonText(bv))})
			default:
				diffValue(p, av, bv, out)
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
		for i := 0; i < min(len(al), len(bl)); i++ {
			diffValue(path+"["+strconv.Itoa(i)+"]", al[i], bl[i], out)
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
