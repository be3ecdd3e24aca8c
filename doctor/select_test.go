package doctor

import (
	"errors"
	"slices"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/crdver/kubectl-crdver/crdsource"
)

func TestSelect(t *testing.T) {
	crd := func(plural, group, kind string, short ...string) *apiextensionsv1.CustomResourceDefinition {
		return &apiextensionsv1.CustomResourceDefinition{ObjectMeta: metav1.ObjectMeta{Name: plural + "." + group},
			Spec: apiextensionsv1.CustomResourceDefinitionSpec{Group: group,
				Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: plural, Kind: kind, ShortNames: short}}}
	}
	all := []*apiextensionsv1.CustomResourceDefinition{
		crd("crontabs", "stable.example.com", "CronTab", "ct"),
		crd("widgets", "example.org", "Widget"),
	}
	for _, tc := range []struct {
		name    string
		names   []string
		want    []string
		noMatch bool
	}{
		{"no names: every CRD", nil, []string{"crontabs.stable.example.com", "widgets.example.org"}, false},
		{"in the order named, each once", []string{"widget", "ct", "crontabs.stable.example.com"}, []string{"widgets.example.org", "crontabs.stable.example.com"}, false},
		{"unknown name", []string{"ct", "gadgets"}, nil, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Select(all, tc.names)
			if tc.noMatch {
				if !errors.Is(err, crdsource.ErrNoMatch) {
					t.Fatalf("err = %v, want one wrapping crdsource.ErrNoMatch", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, c := range got {
				names = append(names, c.Name)
			}
			if !slices.Equal(names, tc.want) {
				t.Errorf("Select(%v) = %v, want %v", tc.names, names, tc.want)
			}
		})
	}
}
