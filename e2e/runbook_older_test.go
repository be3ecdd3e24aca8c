package e2e

import "testing"

// TestRunbookFluxHistoryOnOlderServer (issue 40, item 8): Flux source-controller v1.6.2 →
// v1.7.4 on kube-apiserver 1.34, on a cluster with a long history: its CRDs once stored at
// v1beta1 (Flux 0.x), so status.storedVersions is [v1beta1 v1] and the runbook's retire of
// v1beta1 rewrites every object at v1, after a preflight that dry-runs each rewrite. Flux's own
// sample helmrepository-sample, written at v1beta1 by kubectl create, is stored at v1 and read
// there with v1's default spec.provider, which v1beta1's schema lacks: a write at v1 that keeps
// its v1beta1 entries makes the API server convert the object to v1beta1 for them, which does
// not type, and kube-apiserver before 1.37 then drops every managedFields entry. The rewrite
// moves the entries to v1 within its write and keeps every manager; its preflight must send
// that same write (it sent the object with its entries unmoved, saw every manager dropped and
// refused, exit 1, after the runbook's earlier steps had written). The runbook, followed at a
// terminal, must end with its verify step passing, every manager kept.
func TestRunbookFluxHistoryOnOlderServer(t *testing.T) {
	testRunbook(t, releaseCase{name: "flux-2.6-to-2.7-history-1.34", onOlder: true, rel: release{
		Project: "flux", Old: "source-controller-v1.6.2", New: "source-controller-v1.7.4",
		EarlierStorage: "v1beta1",
		Samples:        []string{"samples/*.yaml", "history/*.yaml"},
		Controller:     "source-controller", Applier: "kustomize-controller", Fix: fixFlux,
	}})
}
