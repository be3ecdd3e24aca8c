package explain

import (
	"sort"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
)

// FieldPaths completes a dotted field path in a version's schema (shell completion): the
// children of the part before the last dot that start with what follows it, sorted.
func FieldPaths(crd *apiextensionsv1.CustomResourceDefinition, version, toComplete string) []string {
	parent, prefix := "", toComplete
	if i := strings.LastIndex(toComplete, "."); i >= 0 {
		parent, prefix = toComplete[:i+1], toComplete[i+1:]
	}
	e, err := Explain(crd, version, strings.TrimSuffix(parent, "."), false)
	if err != nil {
		return nil
	}
	var out []string
	if parent == "" && strings.HasPrefix("metadata", prefix) {
		out = append(out, "metadata") // ObjectMeta: explain CRD metadata
	}
	for _, c := range e.Field.Fields {
		if strings.HasPrefix(c.Name, prefix) && !(parent == "" && c.Name == "metadata") {
			out = append(out, parent+c.Name)
		}
	}
	sort.Strings(out)
	return out
}
