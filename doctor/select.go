package doctor

import (
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	"github.com/crdver/kubectl-crdver/crdsource"
)

// Select is the CRDs of all that names name (crdsource.Match: full name, plural, singular,
// short name or kind), each once, in the order first named; every CRD of all when names is
// empty. A name no CRD matches is an error wrapping crdsource.ErrNoMatch.
func Select(all []*apiextensionsv1.CustomResourceDefinition, names []string) ([]*apiextensionsv1.CustomResourceDefinition, error) {
	if len(names) == 0 {
		return all, nil
	}
	var crds []*apiextensionsv1.CustomResourceDefinition
	seen := map[string]bool{}
	for _, n := range names {
		crd, err := crdsource.Match(all, n)
		if err != nil {
			return nil, err
		}
		if !seen[crd.Name] {
			seen[crd.Name] = true
			crds = append(crds, crd)
		}
	}
	return crds, nil
}
