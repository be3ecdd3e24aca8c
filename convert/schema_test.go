package convert

import (
	"strings"
	"testing"

	crdinfo "github.com/crdver/kubectl-crdver/crd"
)

// celCRD has a v1 schema with a CEL rule, a list-type set and an embedded resource: what the
// target-schema check must enforce beyond plain OpenAPI, as the API server's create validation does.
const celCRD = `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: things.cel.example.com}
spec:
  group: cel.example.com
  scope: Namespaced
  names: {plural: things, singular: thing, kind: Thing}
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
            x-kubernetes-validations:
            - rule: "self.min <= self.max"
              messageExpression: "'min ' + string(self.min) + ' exceeds max ' + string(self.max)"
            properties:
              min: {type: integer}
              max: {type: integer}
              tags:
                type: array
                x-kubernetes-list-type: set
                items: {type: string}
              template:
                type: object
                x-kubernetes-embedded-resource: true
                x-kubernetes-preserve-unknown-fields: true
`

func TestValidateRunsTheServersCreateValidation(t *testing.T) {
	crd, err := crdinfo.Decode([]byte(celCRD))
	if err != nil {
		t.Fatal(err)
	}
	vs, err := newVersionSchema(crd, "v1")
	if err != nil {
		t.Fatal(err)
	}
	obj := func(spec map[string]any) map[string]any {
		return map[string]any{"apiVersion": "cel.example.com/v1", "kind": "Thing", "metadata": map[string]any{"name": "a", "namespace": "default"}, "spec": spec}
	}
	for _, tc := range []struct {
		name string
		spec map[string]any
		want string // "" for valid
	}{
		{"valid", map[string]any{"min": int64(1), "max": int64(2), "tags": []any{"a", "b"}}, ""},
		{"CEL rule with messageExpression", map[string]any{"min": int64(3), "max": int64(2)}, "spec: Invalid value: min 3 exceeds max 2"},
		{"list-type set", map[string]any{"min": int64(1), "max": int64(2), "tags": []any{"a", "a"}}, `spec.tags[1]: Duplicate value: "a"`},
		{"embedded resource without kind", map[string]any{"min": int64(1), "max": int64(2), "template": map[string]any{"apiVersion": "v1"}}, "spec.template.kind: Required value"},
		{"blocking error stops CEL", map[string]any{"min": "x", "max": int64(2)}, "some validation rules were not checked"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			errs := vs.validate(obj(tc.spec))
			got := strings.Join(errorListStrings(errs), "\n")
			if tc.want == "" {
				if len(errs) > 0 {
					t.Errorf("want valid, got:\n%s", got)
				}
				return
			}
			if !strings.Contains(got, tc.want) {
				t.Errorf("errors do not contain %q:\n%s", tc.want, got)
			}
		})
	}
}
