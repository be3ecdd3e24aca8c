package preview

import (
	"fmt"
	"math/rand"
	"reflect"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	structuraldefaulting "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/defaulting"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"
)

// defaultsCRD has defaults at every place the defaulter looks (properties, nested objects,
// additionalProperties, array items, a null item), beside subtrees without any.
const defaultsCRD = `
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: gizmos.example.com}
spec:
  group: example.com
  scope: Namespaced
  names: {plural: gizmos, singular: gizmo, kind: Gizmo, listKind: GizmoList}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              mode: {type: string, default: fast}
              plain: {type: object, properties: {a: {type: string}, b: {type: array, items: {type: string}}}}
              nested:
                type: object
                default: {}
                properties:
                  level: {type: integer, default: 3}
                  deep: {type: object, properties: {flag: {type: boolean, default: true}}}
              byName:
                type: object
                additionalProperties:
                  type: object
                  properties:
                    port: {type: integer, default: 80}
                    host: {type: string}
              ports:
                type: array
                items:
                  type: object
                  default: {protocol: TCP}
                  properties:
                    protocol: {type: string, default: UDP}
                    number: {type: integer}
              rules:
                type: array
                items:
                  type: object
                  default: {action: allow}
                  properties: {action: {type: string}}
              names:
                type: array
                items: {type: string, default: x}
          status:
            type: object
            properties:
              phase: {type: string}
  - name: v2
    served: true
    storage: false
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec: {type: object, properties: {mode: {type: string}, plain: {type: object, x-kubernetes-preserve-unknown-fields: true}}}
`

// defaultTracked (which copies only what the defaulter can change) answers as the plain way
// does (a deep copy of the whole object, the defaulter, defaultedPaths), and leaves the object
// the same, on objects that omit, null or give every field of a schema with defaults and of
// one without.
func TestDefaultTrackedAsFullCopy(t *testing.T) {
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := yaml.Unmarshal([]byte(defaultsCRD), crd); err != nil {
		t.Fatal(err)
	}
	p, err := NewPreviewer(crd)
	if err != nil {
		t.Fatal(err)
	}
	rnd := rand.New(rand.NewSource(1))
	// pick returns one of: absent (ok false), null, or the value.
	pick := func(v any) (any, bool) {
		switch rnd.Intn(4) {
		case 0:
			return nil, false
		case 1:
			return nil, true
		default:
			return v, true
		}
	}
	put := func(m map[string]any, k string, v any) {
		if v, ok := pick(v); ok {
			m[k] = v
		}
	}
	items := func(mk func(i int) any) []any {
		var out []any
		for i := range rnd.Intn(4) {
			if v, ok := pick(mk(i)); ok {
				out = append(out, v)
			} else {
				out = append(out, nil)
			}
		}
		return out
	}
	defaulted := 0
	for n := range 2000 {
		spec := map[string]any{}
		put(spec, "mode", "slow")
		plain := map[string]any{}
		put(plain, "a", "b")
		put(plain, "b", items(func(i int) any { return fmt.Sprint(i) }))
		put(spec, "plain", plain)
		nested := map[string]any{}
		put(nested, "level", int64(7))
		deep := map[string]any{}
		put(deep, "flag", false)
		put(nested, "deep", deep)
		put(spec, "nested", nested)
		byName := map[string]any{}
		for i := range rnd.Intn(3) {
			e := map[string]any{}
			put(e, "port", int64(8080))
			put(e, "host", "h")
			put(byName, fmt.Sprint("n", i), e)
		}
		put(spec, "byName", byName)
		put(spec, "ports", items(func(i int) any {
			e := map[string]any{}
			put(e, "protocol", "SCTP")
			put(e, "number", int64(i))
			return e
		}))
		put(spec, "rules", items(func(int) any { return map[string]any{"action": "deny"} }))
		put(spec, "names", items(func(i int) any { return fmt.Sprint("name", i) }))
		obj := map[string]any{"apiVersion": "example.com/v1", "kind": "Gizmo", "metadata": map[string]any{"name": "g"}}
		put(obj, "spec", spec)
		put(obj, "status", map[string]any{"phase": "Ready"})
		for _, v := range []string{"v1", "v2"} {
			want := runtime.DeepCopyJSON(obj)
			before := runtime.DeepCopyJSON(want)
			structuraldefaulting.Default(want, p.schemas[v].Structural)
			wantPaths := defaultedPaths(before, want, "")
			got := runtime.DeepCopyJSON(obj)
			gotPaths := p.defaultTracked(got, v)
			if !reflect.DeepEqual(gotPaths, wantPaths) || !reflect.DeepEqual(got, want) {
				t.Fatalf("object %d at %s: %v\ndefaultTracked: %v, %v\nfull copy:      %v, %v", n, v, obj, gotPaths, got, wantPaths, want)
			}
			if len(gotPaths) > 0 {
				defaulted++
			}
		}
	}
	if defaulted < 500 {
		t.Errorf("only %d of the 2,000 objects at v1 had something defaulted: they do not exercise the defaults", defaulted)
	}
}
