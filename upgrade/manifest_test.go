package upgrade

import (
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/yaml"
)

// Manifest: one document per CRD, in order, each what an apply sends (no status, no
// server-set metadata); nothing for no CRD.
func TestManifest(t *testing.T) {
	crd := func(name string) *apiextensionsv1.CustomResourceDefinition {
		return &apiextensionsv1.CustomResourceDefinition{
			ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID("u-" + name), ResourceVersion: "7", Labels: map[string]string{"app": "x"}},
			Spec:       apiextensionsv1.CustomResourceDefinitionSpec{Group: "example.com", Scope: apiextensionsv1.NamespaceScoped},
			Status:     apiextensionsv1.CustomResourceDefinitionStatus{StoredVersions: []string{"v1"}},
		}
	}
	for _, tc := range []struct {
		name  string
		crds  []*apiextensionsv1.CustomResourceDefinition
		names []string
	}{
		{"none", nil, nil},
		{"two, in order", []*apiextensionsv1.CustomResourceDefinition{crd("b.example.com"), crd("a.example.com")}, []string{"b.example.com", "a.example.com"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Manifest(tc.crds)
			if err != nil {
				t.Fatal(err)
			}
			docs := strings.Split(string(got), "---\n")[1:]
			if len(tc.crds) == 0 && len(got) != 0 || len(docs) != len(tc.names) {
				t.Fatalf("%d documents, want %d:\n%s", len(docs), len(tc.names), got)
			}
			for i, d := range docs {
				var u map[string]any
				if err := yaml.Unmarshal([]byte(d), &u); err != nil {
					t.Fatal(err)
				}
				md, _ := u["metadata"].(map[string]any)
				if u["kind"] != "CustomResourceDefinition" || md["name"] != tc.names[i] || md["uid"] != nil || md["resourceVersion"] != nil || u["status"] != nil {
					t.Errorf("document %d is not %s's apply body:\n%s", i, tc.names[i], d)
				}
			}
		})
	}
}
