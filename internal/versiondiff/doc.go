// Package versiondiff holds the differential test of kubectl-crdver's answers for a
// cluster's own Kubernetes version (--kube-version) against real kube-apiservers of each
// supported minor, built from the Go module proxy by hack/build-test-binaries.sh --kube.
//
// For each minor it compares, over the CRD corpus (../shared/corpus/crds beside the clone,
// skipped when absent) and the CEL-library probe CRDs of testdata/kube-versions:
//
//   - CRD-file validation (`kubectl crdver versions -f FILE --kube-version MINOR`) with the
//     server's answer to a dry-run create of the CRD;
//   - preview of generated objects (convert.Generate, preview.WithKubeVersion) with the
//     server's dry-run create of each object;
//   - plan's offline apply verdict (plan.Options.KubeVersion) with the server's dry-run create
//     or update of the CRD.
//
// Which minors run: $CRDVER_KUBE_MINORS, a comma-separated list of minors ("1.34"), "current"
// (the linked minor's kube-apiserver, as every other integration test uses) or "all" (current
// and every minor hack/tools has a module for). Unset, it runs what CI runs: current and
// CIOlderMinor. docs/kubernetes-versions.md has the measured agreement table.
package versiondiff

// CIOlderMinor is the older minor that `make test` (CI) checks besides the current one:
// the oldest that the linked libraries' own emulation covers (binary minor - 3), so that both
// the emulation and the CEL compatibility version are exercised in every CI run.
const CIOlderMinor = "1.34"
