// Package crdsource is where a command's CustomResourceDefinitions come from, as kubectl
// takes them: files (every document decoded, v1 or v1beta1, and checked with the API server's
// validation) or the cluster (one GET for a full name, else one LIST per run), and how a name
// people type resolves to one of them: full name, plural, singular, short name or kind,
// optionally followed by ".<group>"; or a group and kind (Resolver, for the objects of an
// input). Errors name files, documents and CRDs, never flags: an input that is wrong is a
// *manifest.InputError, a failed call to the API server a *ClusterError.
package crdsource

import (
	"errors"
	"fmt"
	"sort"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
)

// ErrNoMatch is wrapped by the errors of a name or kind that no CRD matches.
var ErrNoMatch = errors.New("no CustomResourceDefinition matches")

// Match finds the CRD called name: its full name, or (case-insensitively) its plural,
// singular, a short name or its kind, optionally followed by ".<group>". More than one match is
// an error that lists them; none wraps ErrNoMatch.
func Match(crds []*apiextensionsv1.CustomResourceDefinition, name string) (*apiextensionsv1.CustomResourceDefinition, error) {
	var exact []*apiextensionsv1.CustomResourceDefinition
	for _, crd := range crds {
		if crd.Name == name {
			exact = append(exact, crd)
		}
	}
	switch {
	case len(exact) == 1:
		return exact[0], nil
	case len(exact) > 1:
		return nil, &DuplicateError{Name: name, Count: len(exact)}
	}
	want := strings.ToLower(name)
	var found []*apiextensionsv1.CustomResourceDefinition
	for _, crd := range crds {
		n := crd.Spec.Names
		aliases := append([]string{n.Plural, n.Singular, strings.ToLower(n.Kind)}, n.ShortNames...)
		for _, a := range aliases {
			if a == "" {
				continue
			}
			a = strings.ToLower(a)
			if want == a || want == a+"."+strings.ToLower(crd.Spec.Group) {
				found = append(found, crd)
				break
			}
		}
	}
	switch names := Names(found); {
	case len(found) == 1:
		return found[0], nil
	case len(found) > 1 && names[0] == names[len(names)-1]:
		return nil, &DuplicateError{Name: names[0], Count: len(found), Alias: name}
	case len(found) == 0:
		return nil, fmt.Errorf("%w %q", ErrNoMatch, name)
	default:
		return nil, fmt.Errorf("%q is ambiguous: it matches %s; use the full name", name, strings.Join(Names(found), ", "))
	}
}

// Names are the CRDs' names, sorted.
func Names(crds []*apiextensionsv1.CustomResourceDefinition) []string {
	names := make([]string, len(crds))
	for i, c := range crds {
		names[i] = c.Name
	}
	sort.Strings(names)
	return names
}
