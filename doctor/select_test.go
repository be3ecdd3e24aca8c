package doctor

import (
	"errors"
	"slices"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	"github.com/crdver/kubectl-crdver/crdsource"
	"github.com/crdver/kubectl-crdver/internal/testcrd"
)

func TestSelect(t *testing.T) {
	all := []*apiextensionsv1.CustomResourceDefinition{
		testcrd.New("stable.example.com", "CronTab", testcrd.ShortNames("ct")),
		testcrd.New("example.org", "Widget"),
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
