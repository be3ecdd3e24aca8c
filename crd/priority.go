package crd

import (
	"regexp"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/version"

	"github.com/crdver/kubectl-crdver/crd/priority"
)

// Stability is how Kubernetes classifies a version name.
type Stability string

// The stabilities, in priority order.
const (
	GA      Stability = "GA"
	Beta    Stability = "beta"
	Alpha   Stability = "alpha"
	NonKube Stability = "other"
)

// kubeVersion is the pattern CompareKubeAwareVersionStrings treats as a Kubernetes version.
var kubeVersion = regexp.MustCompile(`^v\d+(?:(alpha|beta)\d+)?$`)

// StabilityOf classifies a version string as GA, beta, alpha or other (not a Kubernetes-style
// version such as "foo1" or "v1.2", which sorts after every Kubernetes-style one).
func StabilityOf(v string) Stability {
	m := kubeVersion.FindStringSubmatch(v)
	switch {
	case m == nil:
		return NonKube
	case m[1] == "alpha":
		return Alpha
	case m[1] == "beta":
		return Beta
	default:
		return GA
	}
}

// SortByPriority sorts version strings in place, highest Kubernetes priority first, using the
// API server's own comparison (k8s.io/apimachinery/pkg/version.CompareKubeAwareVersionStrings),
// through the light crd/priority package that the kubectl-crdver front binary uses too.
func SortByPriority(versions []string) {
	priority.Sort(versions)
}

// PreferredVersions returns, for every API group, the version that the API server's discovery
// reports as preferred: the highest-priority version served by any of the group's CRDs (the
// storage flag plays no part). Pass every established CRD that is known (the whole cluster, or
// all the CRDs of the files read) so that CRDs sharing a group are taken into account.
func PreferredVersions(crds []*apiextensionsv1.CustomResourceDefinition) map[string]string {
	preferred := map[string]string{}
	for _, crd := range crds {
		for _, v := range crd.Spec.Versions {
			if !v.Served {
				continue
			}
			cur, ok := preferred[crd.Spec.Group]
			if !ok || version.CompareKubeAwareVersionStrings(v.Name, cur) > 0 {
				preferred[crd.Spec.Group] = v.Name
			}
		}
	}
	return preferred
}

// PreferredVersion is crd's preferred version when it is the only CRD of its group, or "" when
// it serves none.
func PreferredVersion(crd *apiextensionsv1.CustomResourceDefinition) string {
	return PreferredVersions([]*apiextensionsv1.CustomResourceDefinition{crd})[crd.Spec.Group]
}
