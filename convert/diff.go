package convert

import (
	"fmt"
	"strconv"
)

// Difference is one JSON path where two objects differ.
type Difference struct {
	Path   string `json:"path"` // .spec.port, .spec.items[2]
	Detail string `json:"detail"`
}

// Diff lists the differences between want and got (two JSON objects), by JSON path, sorted.
// Numbers compare by value (1 equals 1.0).
func Diff(want, got map[string]any) []Difference {
	var out []Difference
	diffValue("", want, got, &out)
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
				*out = append(*out, Difference{Path: p, Detail: fmt.Sprintf("lost: was %s, missing after the round trip", jsonText(av))})
			case !inA && inB:
				*out = append(*out, Difference{Path: p, Detail: fmt.Sprintf("added: %s appeared after the round trip", jsonText(bv))})
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
			*out = append(*out, Difference{Path: path, Detail: fmt.Sprintf("list length %d became %d", len(al), len(bl))})
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
		*out = append(*out, Difference{Path: path, Detail: fmt.Sprintf("changed: %s became %s", jsonText(a), jsonText(b))})
	}
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
