package preflight

import (
	"context"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	"github.com/crdver/kubectl-crdver/internal/testenv"
)

// Versions in status.storedVersions that cannot be read as stored: one the CRD has but does
// not serve, and one it no longer lists at all (the API server refuses to leave a CRD so, but
// a CRD read from a backup or an older server may be). Each is an unknown answer, with the
// exact way to read it where there is one, never a pass and never a failed list (404).
func TestCheckStoredVersionsNotReadable(t *testing.T) {
	spec := apiextensionsv1.JSONSchemaProps{Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{"size": {Type: "integer"}}}
	crd := testenv.TwoVersionCRD("notreadable.preflight.example.com", "widgets", "Widget", spec)
	dyn := setup(t, crd, "notreadable")
	create(t, dyn, crd, "v1beta1", "notreadable", "w", map[string]any{"size": int64(1)})
	live := fresh(t, crd.Name)

	// v1beta1 stored and not served; v0 stored and gone; v1 is the storage version.
	c := live.DeepCopy()
	c.Spec.Versions[0].Served, c.Spec.Versions[0].Storage, c.Spec.Versions[1].Storage = false, false, true
	c.Status.StoredVersions = []string{"v0", "v1beta1", "v1"}
	r, err := Check(context.Background(), dyn, c, Options{Target: "v1"})
	if err != nil {
		t.Fatalf("Check: %v (want the unreadable versions as unknown, not a failure)", err)
	}
	if r.Safe() || !r.LosesData() {
		t.Errorf("Safe %v LosesData %v: want neither a pass nor a known no-loss", r.Safe(), r.LosesData())
	}
	all := strings.Join(append(r.Unknown, Advice(r)...), "\n")
	serve := `kubectl patch crd widgets.notreadable.preflight.example.com --type=json -p '[{"op":"test","path":"/spec/versions/0/name","value":"v1beta1"},{"op":"replace","path":"/spec/versions/0/served","value":true}]'`
	for _, want := range []string{
		"v1beta1 is in status.storedVersions but not served", serve,
		"v0 is in status.storedVersions but not in spec.versions: objects stored at it cannot be read by any request",
	} {
		if !strings.Contains(all, want) {
			t.Errorf("unknown lacks %q:\n%s", want, all)
		}
	}
	for _, b := range r.Backup {
		if strings.Contains(b, ".v1beta1.") || strings.Contains(b, ".v0.") {
			t.Errorf("backup command reads a version that cannot be read: %s", b)
		}
	}
}
