package testenv

import "testing"

// HelmBinary builds (once, cached: hack/build-webhook.sh helm; the version is the first of
// hack/tools/helm/versions) Helm's CLI from the Go module proxy and returns its path. When it
// cannot be built the test fails under CI=true and is skipped otherwise, with the reason.
func HelmBinary(t testing.TB) string {
	t.Helper()
	return projectBinary(t, "helm", "helm")
}
