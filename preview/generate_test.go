package preview

import (
	"fmt"
	"math"
	"math/rand"
	"regexp"
	"sort"
	"strings"

	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
)

// objectGenerator makes random objects from a structural schema for the differential test:
// mostly plausible values (enums, formats, bounds, required fields, unique list keys) with
// mutations that exercise what the API server does: unknown fields (also in metadata), nulls,
// omitted optional fields, wrong types, out-of-range values, values that break CEL rules.
type objectGenerator struct {
	r *rand.Rand
	// mutate is the probability of a mutation at each node.
	mutate float64
}

var sampleStrings = []string{"a", "abc", "example", "foo-bar", "x.example.com", "1", "10", "5 * * * *", "*/5 * * * *",
	"user@example.com", "http://example.com/x", "/path", "TCP", "10.0.0.0/8", "1m", "30s", "v1", "Pod", "default",
	"a:b", "k=v", "a,b", "", "UPPER", "with space", "ÿ", "0.5", "true", "null", "2024-01-02T03:04:05Z"}

func (g *objectGenerator) chance(p float64) bool { return g.r.Float64() < p }

func (g *objectGenerator) object(s *structuralschema.Structural, depth int) any {
	if g.chance(g.mutate) {
		if v, ok := g.mutation(s); ok {
			return v
		}
	}
	if s == nil {
		return g.anyValue(depth)
	}
	if vv := s.ValueValidation; vv != nil && len(vv.Enum) > 0 && !g.chance(g.mutate) {
		return vv.Enum[g.r.Intn(len(vv.Enum))].Object
	}
	if s.XIntOrString {
		if g.chance(0.5) {
			return int64(g.r.Intn(100))
		}
		return []string{"50%", "http", "1", ""}[g.r.Intn(4)]
	}
	switch s.Type {
	case "object":
		return g.mapValue(s, depth)
	case "array":
		return g.arrayValue(s, depth)
	case "string":
		return g.stringValue(s)
	case "integer":
		return g.intValue(s)
	case "number":
		lo, hi := bounds(s, -1000, 1000)
		return math.Round((lo+g.r.Float64()*(hi-lo))*100) / 100
	case "boolean":
		return g.chance(0.5)
	}
	if s.XPreserveUnknownFields {
		return g.anyValue(depth)
	}
	return nil
}

// mutation returns a value that is probably wrong for s.
func (g *objectGenerator) mutation(s *structuralschema.Structural) (any, bool) {
	switch g.r.Intn(6) {
	case 0:
		return nil, true // null
	case 1: // wrong type
		if s != nil && s.Type == "string" {
			return int64(7), true
		}
		return "wrong-type", true
	case 2: // out of range
		if s != nil && s.ValueValidation != nil {
			vv := s.ValueValidation
			switch {
			case vv.Maximum != nil:
				return int64(*vv.Maximum) + 1, true
			case vv.Minimum != nil:
				return int64(*vv.Minimum) - 1, true
			case vv.MaxLength != nil:
				return strings.Repeat("x", int(*vv.MaxLength)+1), true
			}
		}
		return int64(-1), true
	case 3:
		return "", true
	case 4:
		return map[string]any{}, true
	}
	return []any{}, true
}

func (g *objectGenerator) anyValue(depth int) any {
	if depth > 3 {
		return "leaf"
	}
	switch g.r.Intn(5) {
	case 0:
		return map[string]any{"k" + fmt.Sprint(g.r.Intn(3)): g.anyValue(depth + 1)}
	case 1:
		return []any{g.anyValue(depth + 1)}
	case 2:
		return int64(g.r.Intn(10))
	case 3:
		return nil
	}
	return sampleStrings[g.r.Intn(len(sampleStrings))]
}

func bounds(s *structuralschema.Structural, lo, hi float64) (float64, float64) {
	if vv := s.ValueValidation; vv != nil {
		if vv.Minimum != nil {
			lo = *vv.Minimum
			if vv.ExclusiveMinimum {
				lo++
			}
		}
		if vv.Maximum != nil {
			hi = *vv.Maximum
			if vv.ExclusiveMaximum {
				hi--
			}
		}
	}
	if hi < lo {
		hi = lo
	}
	return lo, hi
}

func (g *objectGenerator) intValue(s *structuralschema.Structural) any {
	if g.chance(g.mutate) {
		return []any{2.5, 1e30, float64(-0.5)}[g.r.Intn(3)] // not integers, or out of int64
	}
	lo, hi := bounds(s, 0, 20)
	if hi-lo > 1000 {
		hi = lo + 1000
	}
	return int64(lo) + int64(g.r.Intn(int(hi-lo)+1))
}

var formatSamples = map[string][]string{
	"date-time": {"2024-01-02T03:04:05Z", "2024-13-01T00:00:00Z"},
	"date":      {"2024-01-02"},
	"email":     {"a@example.com", "not-an-email"},
	"uri":       {"https://example.com/a"},
	"hostname":  {"example.com"},
	"ipv4":      {"10.0.0.1"},
	"uuid":      {"7a6f3c2e-1b7d-4f0a-9c3e-2d5b8e9f0a1b", "nope"},
	"cidr":      {"10.0.0.0/8", "300.0.0.0/8"},
	"duration":  {"1m30s", "forever"},
	"byte":      {"aGVsbG8="},
	"int32":     {"1"},
}

func (g *objectGenerator) stringValue(s *structuralschema.Structural) any {
	vv := s.ValueValidation
	if vv != nil && formatSamples[vv.Format] != nil {
		c := formatSamples[vv.Format]
		return c[g.r.Intn(len(c))]
	}
	candidates := sampleStrings
	if vv != nil && vv.Pattern != "" {
		if re, err := regexp.Compile(vv.Pattern); err == nil {
			var ok []string
			for _, c := range sampleStrings {
				if re.MatchString(c) {
					ok = append(ok, c)
				}
			}
			if len(ok) > 0 && !g.chance(0.1) {
				candidates = ok
			}
		}
	}
	v := candidates[g.r.Intn(len(candidates))]
	if vv != nil && vv.MaxLength != nil && int64(len(v)) > *vv.MaxLength && !g.chance(0.2) {
		v = v[:*vv.MaxLength]
	}
	if vv != nil && vv.MinLength != nil && int64(len(v)) < *vv.MinLength && !g.chance(0.2) {
		v += strings.Repeat("z", int(*vv.MinLength)-len(v))
	}
	return v
}

func (g *objectGenerator) arrayValue(s *structuralschema.Structural, depth int) any {
	n := g.r.Intn(3)
	if depth > 6 {
		n = 0
	}
	if vv := s.ValueValidation; vv != nil {
		if vv.MinItems != nil && int64(n) < *vv.MinItems {
			n = int(*vv.MinItems)
		}
		if vv.MaxItems != nil && int64(n) > *vv.MaxItems && !g.chance(0.2) {
			n = int(*vv.MaxItems)
		}
	}
	out := []any{}
	seen := map[string]bool{}
	for i := 0; i < n; i++ {
		v := g.object(s.Items, depth+1)
		if s.XListType != nil && !g.chance(0.1) {
			// keep sets and map keys unique most of the time
			switch *s.XListType {
			case "set":
				k := fmt.Sprint(v)
				if seen[k] {
					continue
				}
				seen[k] = true
			case "map":
				m, ok := v.(map[string]any)
				if ok {
					for _, key := range s.XListMapKeys {
						if _, has := m[key]; !has && !g.chance(0.1) {
							m[key] = g.object(propOf(s.Items, key), depth+2)
						}
					}
					var parts []string
					for _, key := range s.XListMapKeys {
						parts = append(parts, fmt.Sprint(m[key]))
					}
					k := strings.Join(parts, "/")
					if seen[k] {
						continue
					}
					seen[k] = true
				}
			}
		}
		out = append(out, v)
	}
	return out
}

func propOf(s *structuralschema.Structural, key string) *structuralschema.Structural {
	if s == nil {
		return nil
	}
	if p, ok := s.Properties[key]; ok {
		return &p
	}
	return nil
}

func (g *objectGenerator) mapValue(s *structuralschema.Structural, depth int) any {
	out := map[string]any{}
	if depth > 8 {
		return out
	}
	required := map[string]bool{}
	if s.ValueValidation != nil {
		for _, r := range s.ValueValidation.Required {
			required[r] = true
		}
	}
	keys := make([]string, 0, len(s.Properties))
	for k := range s.Properties {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if depth == 0 && (k == "metadata" || k == "apiVersion" || k == "kind") {
			continue
		}
		if !required[k] && g.chance(0.5) {
			continue
		}
		p := s.Properties[k]
		out[k] = g.object(&p, depth+1)
	}
	if s.AdditionalProperties != nil && s.AdditionalProperties.Structural != nil {
		for i := 0; i < g.r.Intn(3); i++ {
			out[fmt.Sprintf("key%d", i)] = g.object(s.AdditionalProperties.Structural, depth+1)
		}
	}
	if (len(s.Properties) == 0 && s.AdditionalProperties == nil && s.XPreserveUnknownFields) || s.XEmbeddedResource {
		if s.XEmbeddedResource && g.chance(0.8) {
			out["apiVersion"] = "v1"
			out["kind"] = []string{"ConfigMap", "Pod"}[g.r.Intn(2)]
			md := map[string]any{"name": "embedded"}
			if g.chance(0.3) {
				md["unknownMeta"] = "x"
			}
			if g.chance(0.2) {
				md["name"] = "Not_Valid"
			}
			out["metadata"] = md
		}
		if s.XPreserveUnknownFields && g.chance(0.5) {
			out["free"] = g.anyValue(depth + 1)
		}
	}
	// unknown fields
	if g.chance(g.mutate * 2) {
		out[fmt.Sprintf("unknown%d", g.r.Intn(3))] = g.anyValue(depth + 1)
	}
	return out
}

// generate makes one whole object of version v of the schema's CRD.
func (g *objectGenerator) generate(s *structuralschema.Structural, apiVersion, kind, name, namespace string) map[string]any {
	obj, _ := g.mapValue(s, 0).(map[string]any)
	if obj == nil {
		obj = map[string]any{}
	}
	obj["apiVersion"] = apiVersion
	obj["kind"] = kind
	md := map[string]any{"name": name}
	if namespace != "" {
		md["namespace"] = namespace
	}
	if g.chance(0.3) {
		md["labels"] = map[string]any{"app": "demo"}
	}
	if g.chance(g.mutate) {
		md["unknownMetaField"] = "x"
	}
	if g.chance(g.mutate / 2) {
		md["labels"] = map[string]any{"bad label": "x"}
	}
	if g.chance(g.mutate / 2) {
		md["finalizers"] = []any{"example.com/finalizer", "nodomain"}
	}
	if g.chance(g.mutate) {
		ref := map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "name": "owner", "uid": "6c1f2a4e-0000-4000-8000-000000000001"}
		refs := []any{ref, runtimeDeepCopyValue(ref)}
		if g.chance(0.3) {
			delete(ref, "uid") // invalid: uid is required
		}
		md["ownerReferences"] = refs
	}
	if g.chance(g.mutate / 4) {
		md["labels"] = "not-a-map" // malformed metadata: the decoder refuses it
	}
	obj["metadata"] = md
	if g.chance(g.mutate) {
		obj["unknownTopLevel"] = int64(1)
	}
	return obj
}

func runtimeDeepCopyValue(m map[string]any) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}
