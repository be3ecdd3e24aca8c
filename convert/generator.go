package convert

// generator.go: the value generator behind Generate: values for each schema node, varied
// by profile (omitted, empty, zero, separators, random), and strings from patterns. One
// cohesive thing, kept in one file.

import (
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"regexp"
	"regexp/syntax"
	"sort"
	"strings"

	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
)

type generator struct {
	rng     *rand.Rand
	profile int
}

const maxDepth = 10

func (g *generator) root(s *structuralschema.Structural) map[string]any {
	obj := map[string]any{}
	for _, name := range sortedProps(s) {
		if name == "apiVersion" || name == "kind" || name == "metadata" {
			continue
		}
		p := s.Properties[name]
		if !isRequired(s, name) && !g.include() {
			continue
		}
		obj[name] = g.value(&p, 1)
	}
	return obj
}

// include decides whether an optional field is present.
func (g *generator) include() bool {
	switch g.profile {
	case profileMinimal:
		return false
	case profileRandom:
		return g.rng.IntN(3) != 0
	}
	return true
}

func (g *generator) value(s *structuralschema.Structural, depth int) any {
	vv := s.ValueValidation
	if vv != nil && len(vv.Enum) > 0 {
		return enumValue(vv.Enum, g.pick(len(vv.Enum)))
	}
	if s.Nullable && g.profile == profileRandom && g.rng.IntN(8) == 0 {
		return nil
	}
	if s.XIntOrString {
		if g.rng.IntN(2) == 0 {
			return g.integer(vv)
		}
		return g.str(vv, []string{"50%", "1", "80"})
	}
	switch s.Type {
	case "object":
		return g.object(s, depth)
	case "array":
		return g.array(s, depth)
	case "string":
		return g.str(vv, nil)
	case "integer":
		return g.integer(vv)
	case "number":
		return g.number(vv)
	case "boolean":
		if g.profile == profileZero || g.profile == profileMinimal {
			return false
		}
		return g.rng.IntN(2) == 0
	}
	// No type: preserve-unknown-fields without properties, or a free value.
	if g.profile == profileZero {
		return map[string]any{}
	}
	return map[string]any{"free": "form:value"}
}

func (g *generator) pick(n int) int {
	switch g.profile {
	case profileMinimal, profileZero:
		return 0
	case profileFull:
		return n - 1
	}
	return g.rng.IntN(n)
}

func (g *generator) object(s *structuralschema.Structural, depth int) any {
	obj := map[string]any{}
	if s.XEmbeddedResource {
		obj["apiVersion"], obj["kind"] = "v1", "ConfigMap"
		obj["metadata"] = map[string]any{"name": "embedded"}
	}
	if depth > maxDepth {
		return obj
	}
	for _, name := range sortedProps(s) {
		if s.XEmbeddedResource && (name == "apiVersion" || name == "kind" || name == "metadata") {
			continue
		}
		p := s.Properties[name]
		if !isRequired(s, name) && !g.include() {
			continue
		}
		obj[name] = g.value(&p, depth+1)
	}
	if ap := s.AdditionalProperties; ap != nil && ap.Structural != nil && len(s.Properties) == 0 {
		n := g.count(s.ValueValidation, true)
		keys := []string{"a", "b.example.com/c", "k=v", "x:y"}
		for i := 0; i < n; i++ {
			obj[keys[(i+g.rng.IntN(len(keys)))%len(keys)]] = g.value(ap.Structural, depth+1)
		}
	} else if len(s.Properties) == 0 && s.XPreserveUnknownFields && g.profile != profileZero && g.profile != profileMinimal {
		obj["free"] = "form:value"
	}
	return obj
}

// count picks a list or map size: 0 and 1 are what conversions get wrong most.
func (g *generator) count(vv *structuralschema.ValueValidation, isMap bool) int {
	n := 0
	switch g.profile {
	case profileMinimal, profileZero:
		n = 0
	case profileFull, profileSeparators:
		n = 1
	default:
		n = []int{0, 1, 1, 2, 3}[g.rng.IntN(5)]
	}
	if vv != nil {
		lo, hi := vv.MinItems, vv.MaxItems
		if isMap {
			lo, hi = vv.MinProperties, vv.MaxProperties
		}
		if lo != nil && int64(n) < *lo {
			n = int(*lo)
		}
		if hi != nil && int64(n) > *hi {
			n = int(*hi)
		}
	}
	return n
}

func (g *generator) array(s *structuralschema.Structural, depth int) any {
	out := []any{}
	if s.Items == nil || depth > maxDepth {
		return out
	}
	n := g.count(s.ValueValidation, false)
	unique := (s.ValueValidation != nil && s.ValueValidation.UniqueItems) || (s.XListType != nil && (*s.XListType == "set" || *s.XListType == "map"))
	seen := map[string]bool{}
	for tries := 0; len(out) < n && tries < 10*n+10; tries++ {
		gen := g
		if tries > 0 && unique { // vary the retries
			gen = &generator{rng: g.rng, profile: profileRandom}
		}
		v := gen.value(s.Items, depth+1)
		if unique {
			key := listKey(v, s.XListMapKeys)
			if seen[key] {
				continue
			}
			seen[key] = true
		}
		out = append(out, v)
	}
	return out
}

func listKey(v any, mapKeys []string) string {
	if m, ok := v.(map[string]any); ok && len(mapKeys) > 0 {
		k := map[string]any{}
		for _, mk := range mapKeys {
			k[mk] = m[mk]
		}
		v = k
	}
	b, _ := json.Marshal(v)
	return string(b)
}

var separatorStrings = []string{"a:b", "a/b", "a,b", "k=v", "host.example.com:8080", "a:b/c,d=e"}

func (g *generator) str(vv *structuralschema.ValueValidation, extra []string) string {
	var cands []string
	if vv != nil && vv.Format != "" {
		if f := formatValue(vv.Format, g.rng); f != "" {
			cands = append(cands, f)
		}
	}
	if len(cands) == 0 {
		switch g.profile {
		case profileZero, profileMinimal:
			cands = append(cands, "", "x")
		case profileFull:
			cands = append(cands, "value", "x")
		case profileSeparators:
			cands = append(cands, separatorStrings[g.rng.IntN(len(separatorStrings))])
			cands = append(cands, separatorStrings...)
		default:
			all := append([]string{"", "x", "value"}, separatorStrings...)
			g.rng.Shuffle(len(all), func(i, j int) { all[i], all[j] = all[j], all[i] })
			cands = append(cands, all...)
		}
		cands = append(cands, extra...)
	}
	var re *regexp.Regexp
	if vv != nil && vv.Pattern != "" {
		re, _ = regexp.Compile(vv.Pattern)
		if re != nil {
			for i := 0; i < 3; i++ {
				if s, ok := fromPattern(vv.Pattern, g.rng); ok {
					cands = append(cands, s)
				}
			}
		}
	}
	for _, c := range cands {
		if fitsString(c, vv, re) {
			return c
		}
	}
	// Pad or cut to the length bounds.
	s := "x"
	if vv != nil && vv.MinLength != nil && int64(len(s)) < *vv.MinLength {
		s = strings.Repeat("x", int(*vv.MinLength))
	}
	if vv != nil && vv.MaxLength != nil && int64(len(s)) > *vv.MaxLength {
		s = s[:*vv.MaxLength]
	}
	return s
}

func fitsString(s string, vv *structuralschema.ValueValidation, re *regexp.Regexp) bool {
	if vv == nil {
		return true
	}
	n := int64(len([]rune(s)))
	if vv.MinLength != nil && n < *vv.MinLength || vv.MaxLength != nil && n > *vv.MaxLength {
		return false
	}
	if vv.Pattern != "" && (re == nil || !re.MatchString(s)) {
		return false
	}
	return true
}

func formatValue(format string, rng *rand.Rand) string {
	switch format {
	case "date-time", "datetime":
		return fmt.Sprintf("2026-%02d-%02dT%02d:04:05Z", 1+rng.IntN(12), 1+rng.IntN(28), rng.IntN(24))
	case "date":
		return fmt.Sprintf("2026-%02d-%02d", 1+rng.IntN(12), 1+rng.IntN(28))
	case "byte":
		return "aG9zdDpwb3J0" // "host:port"
	case "uuid":
		return fmt.Sprintf("%08x-0000-4000-8000-%012x", rng.Uint32(), rng.Uint64()&0xffffffffffff)
	case "email":
		return "someone@example.com"
	case "hostname":
		return "db.example.com"
	case "ipv4":
		return fmt.Sprintf("10.0.%d.%d", rng.IntN(256), rng.IntN(256))
	case "ipv6":
		return "fd00::1"
	case "cidr":
		return "10.0.0.0/8"
	case "mac":
		return "00:11:22:33:44:55"
	case "uri", "url":
		return "https://example.com/a/b?c=d"
	case "duration":
		return "1h30m"
	case "password":
		return "s3cr3t"
	}
	return ""
}

func (g *generator) integer(vv *structuralschema.ValueValidation) int64 {
	cands := []int64{0, 1, -1, 42, 65535, math.MaxInt32}
	switch g.profile {
	case profileFull, profileSeparators:
		cands = []int64{42, 1, 0}
	case profileRandom:
		cands = append([]int64{int64(g.rng.IntN(2000) - 1000)}, cands...)
		g.rng.Shuffle(len(cands), func(i, j int) { cands[i], cands[j] = cands[j], cands[i] })
	}
	if vv != nil {
		if vv.Minimum != nil {
			m := int64(math.Ceil(*vv.Minimum))
			if vv.ExclusiveMinimum && float64(m) == *vv.Minimum {
				m++
			}
			cands = append(cands, m)
		}
		if vv.Maximum != nil {
			m := int64(math.Floor(*vv.Maximum))
			if vv.ExclusiveMaximum && float64(m) == *vv.Maximum {
				m--
			}
			cands = append(cands, m)
		}
	}
	for _, c := range cands {
		if fitsNumber(float64(c), vv) {
			return c
		}
	}
	return cands[len(cands)-1]
}

func (g *generator) number(vv *structuralschema.ValueValidation) float64 {
	cands := []float64{0, 0.5, -1.25, 1e6}
	if g.profile == profileRandom {
		cands = append([]float64{math.Round(g.rng.Float64()*1000) / 8}, cands...)
	}
	if vv != nil {
		if vv.Minimum != nil {
			cands = append(cands, *vv.Minimum+0.5, *vv.Minimum)
		}
		if vv.Maximum != nil {
			cands = append(cands, *vv.Maximum-0.5, *vv.Maximum)
		}
	}
	for _, c := range cands {
		if fitsNumber(c, vv) {
			return c
		}
	}
	return cands[len(cands)-1]
}

func fitsNumber(f float64, vv *structuralschema.ValueValidation) bool {
	if vv == nil {
		return true
	}
	if vv.Minimum != nil && (f < *vv.Minimum || vv.ExclusiveMinimum && f == *vv.Minimum) {
		return false
	}
	if vv.Maximum != nil && (f > *vv.Maximum || vv.ExclusiveMaximum && f == *vv.Maximum) {
		return false
	}
	if vv.MultipleOf != nil && *vv.MultipleOf != 0 {
		q := f / *vv.MultipleOf
		if math.Abs(q-math.Round(q)) > 1e-9 {
			return false
		}
	}
	return true
}

func enumValue(enum []structuralschema.JSON, i int) any {
	v := enum[i].Object
	if f, ok := v.(float64); ok && f == math.Trunc(f) {
		return int64(f)
	}
	return v
}

func isRequired(s *structuralschema.Structural, name string) bool {
	if s.ValueValidation == nil {
		return false
	}
	for _, r := range s.ValueValidation.Required {
		if r == name {
			return true
		}
	}
	return false
}

func sortedProps(s *structuralschema.Structural) []string {
	out := make([]string, 0, len(s.Properties))
	for k := range s.Properties {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// fromPattern generates a string matching a regular expression, from its syntax tree.
// Unbounded repeats are kept short. ok is false when the expression has something it cannot
// generate (e.g. look-around is not in Go's syntax anyway, but word boundaries are).
func fromPattern(pattern string, rng *rand.Rand) (string, bool) {
	re, err := syntax.Parse(pattern, syntax.Perl)
	if err != nil {
		return "", false
	}
	var b strings.Builder
	if !genRegexp(&b, re.Simplify(), rng, 0) {
		return "", false
	}
	return b.String(), true
}

func genRegexp(b *strings.Builder, re *syntax.Regexp, rng *rand.Rand, depth int) bool {
	if depth > 50 {
		return false
	}
	switch re.Op {
	case syntax.OpEmptyMatch, syntax.OpBeginLine, syntax.OpEndLine, syntax.OpBeginText, syntax.OpEndText:
		return true
	case syntax.OpLiteral:
		for _, r := range re.Rune {
			b.WriteRune(r)
		}
		return true
	case syntax.OpCharClass:
		// Prefer printable ASCII from the ranges.
		var choices []rune
		for i := 0; i+1 < len(re.Rune); i += 2 {
			lo, hi := re.Rune[i], re.Rune[i+1]
			for r := lo; r <= hi && r < 0x7f && len(choices) < 200; r++ {
				if r >= 0x20 {
					choices = append(choices, r)
				}
			}
		}
		if len(choices) == 0 {
			if len(re.Rune) == 0 {
				return false
			}
			choices = []rune{re.Rune[0]}
		}
		b.WriteRune(choices[rng.IntN(len(choices))])
		return true
	case syntax.OpAnyCharNotNL, syntax.OpAnyChar:
		b.WriteByte('x')
		return true
	case syntax.OpCapture:
		return genRegexp(b, re.Sub[0], rng, depth+1)
	case syntax.OpConcat:
		for _, s := range re.Sub {
			if !genRegexp(b, s, rng, depth+1) {
				return false
			}
		}
		return true
	case syntax.OpAlternate:
		return genRegexp(b, re.Sub[rng.IntN(len(re.Sub))], rng, depth+1)
	case syntax.OpStar, syntax.OpPlus, syntax.OpQuest, syntax.OpRepeat:
		lo, hi := 0, 3
		switch re.Op {
		case syntax.OpPlus:
			lo = 1
		case syntax.OpQuest:
			hi = 1
		case syntax.OpRepeat:
			lo, hi = re.Min, re.Max
			if hi < 0 {
				hi = lo + 2
			}
		}
		n := lo
		if hi > lo {
			n += rng.IntN(hi - lo + 1)
		}
		for i := 0; i < n; i++ {
			if !genRegexp(b, re.Sub[0], rng, depth+1) {
				return false
			}
		}
		return true
	}
	return false
}
