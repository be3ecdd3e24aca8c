// Package priority sorts version strings in Kubernetes' version priority, with the API
// server's own comparison. It depends only on k8s.io/apimachinery/pkg/version (no
// initialiser), so that the small kubectl-crdver front binary sorts exactly as the crd
// package (crd.SortByPriority is this Sort) and the engine do.
package priority

import (
	"sort"

	"k8s.io/apimachinery/pkg/version"
)

// Sort sorts version strings in place, highest Kubernetes priority first (GA > beta > alpha,
// then by number; other strings last, alphabetically), keeping equal strings in their order,
// using k8s.io/apimachinery/pkg/version.CompareKubeAwareVersionStrings.
func Sort(versions []string) {
	sort.SliceStable(versions, func(i, j int) bool {
		return version.CompareKubeAwareVersionStrings(versions[i], versions[j]) > 0
	})
}
