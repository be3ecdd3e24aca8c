package convert

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestDiff(t *testing.T) {
	cases := []struct {
		name      string
		want, got map[string]any
		diffs     []Difference
	}{
		{"equal, numbers by value", map[string]any{"a": int64(1), "b": []any{"x"}}, map[string]any{"a": 1.0, "b": []any{"x"}}, nil},
		{"lost and added", map[string]any{"spec": map[string]any{"port": "80"}}, map[string]any{"spec": map[string]any{"host": ""}}, []Difference{
			{Path: ".spec.host", Detail: `added: "" appeared after the round trip`},
			{Path: ".spec.port", Detail: `lost: was "80", missing after the round trip`},
		}},
		{"changed type", map[string]any{"a": "1"}, map[string]any{"a": int64(1)}, []Difference{{Path: ".a", Detail: `changed: "1" became 1`}}},
		{"lists", map[string]any{"l": []any{"a", "b"}}, map[string]any{"l": []any{"a"}}, []Difference{{Path: ".l", Detail: "list length 2 became 1"}}},
		{"list items", map[string]any{"l": []any{map[string]any{"k": "a"}}}, map[string]any{"l": []any{map[string]any{"k": "b"}}}, []Difference{{Path: ".l[0].k", Detail: `changed: "a" became "b"`}}},
		{"keys that are not identifiers", map[string]any{"metadata": map[string]any{"labels": map[string]any{"app.kubernetes.io/name": "x"}}}, map[string]any{"metadata": map[string]any{"labels": map[string]any{}}},
			[]Difference{{Path: `.metadata.labels["app.kubernetes.io/name"]`, Detail: `lost: was "x", missing after the round trip`}}},
		{"null versus missing", map[string]any{"a": nil}, map[string]any{}, []Difference{{Path: ".a", Detail: "lost: was null, missing after the round trip"}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.diffs, Diff(tc.want, tc.got)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}
