package convert

import (
	"strings"
	"testing"

	"github.com/crdver/kubectl-crdver/internal/testenv"
)

func TestValidateRunsTheServersCreateValidation(t *testing.T) {
	crd := testenv.LoadCRD(t, "fixtures/cel-things.yaml")
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
