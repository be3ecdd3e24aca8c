package e2e

import (
	"slices"
	"testing"
)

// TestRunbookNamesWhatItsVerifyFinds (issue 40, item 7): Cluster API 1.10 → 1.11 with the CRD
// files' conversion None, and two ClusterClasses created at v1alpha4 with `spec: {workers:
// {}}` (testdata/releases/cluster-api/history): stored at v1beta1, which requires nothing in
// spec; 1.11 stores at v1beta2, which requires spec.controlPlane and spec.infrastructure, and
// still serves v1beta1. Their writes are accepted (ratcheting) and a re-create as listed at
// v1beta1 too, but once the migration has rewritten them at v1beta2 a re-create of them as
// stored is refused: the runbook's verify step (plan of the same release, listing at v1beta2)
// names them. The first plan must name them as well, with the same errors, in its
// fix-invalid-on-recreate step: the runbook is followed at a terminal, the user deleting what
// the fix steps name, and must end with its verify step passing.
func TestRunbookNamesWhatItsVerifyFinds(t *testing.T) {
	rc := releaseCase{name: "cluster-api-1.10-to-1.11", rel: release{
		Project: "cluster-api", Old: "v1.10.7", New: "v1.11.0",
		Samples:          []string{"history/clusterclass-v1alpha4-workers-only.yaml"},
		ServedAtCreation: []string{"v1alpha4"}, DeleteNamed: true,
	}}
	h := testRunbook(t, rc)
	var named []string
	for _, d := range h.deleted {
		named = append(named, d.o.Name)
		if !anyContains(d.errs, "spec.controlPlane: Required value") {
			t.Errorf("%s: named for %v, want the error the verify step gives (spec.controlPlane: Required value)", d.o, d.errs)
		}
	}
	slices.Sort(named)
	if want := []string{"workers-only-a", "workers-only-b"}; !slices.Equal(named, want) {
		t.Errorf("the runbook's fix steps named %v, want %v", named, want)
	}
}
