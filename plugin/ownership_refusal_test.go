package plugin

import (
	"bytes"
	"strings"
	"testing"

	"github.com/crdver/kubectl-crdver/outcome"
	"github.com/crdver/kubectl-crdver/preflight"
	"github.com/crdver/kubectl-crdver/printers"
)

// TestRefusalOwnershipNeedsItsOwnConsent: a preflight whose dry runs drop field managers
// refuses; --allow-data-loss does not make it go on, --allow-ownership-loss does; and the
// refusal names that flag and the objects' managers are printed for people.
func TestRefusalOwnershipNeedsItsOwnConsent(t *testing.T) {
	rep := &preflight.Report{CRD: "brokers.typechange.example.com", Target: "v2", Strategy: "None", Objects: 3,
		OwnershipLossCount: 1, OwnershipLosses: []preflight.OwnershipLoss{{Namespace: "default", Name: "text-config",
			Lost: []string{"editor (Update at typechange.example.com/v1)", "gitops (Apply at typechange.example.com/v1)"}, Reset: true}}}
	cmd := "kubectl crdver migrate brokers.typechange.example.com"
	for _, c := range []struct {
		name   string
		flags  RewriteFlags
		refuse bool
	}{
		{"no flag", RewriteFlags{}, true},
		{"--allow-data-loss", RewriteFlags{AllowDataLoss: true, SkipInvalid: true}, true},
		{"--allow-ownership-loss", RewriteFlags{AllowOwnershipLoss: true}, false},
	} {
		err := c.flags.refusal([]*preflight.Report{rep}, cmd)
		if (err != nil) != c.refuse {
			t.Errorf("%s: refusal %v, want refused %v", c.name, err, c.refuse)
			continue
		}
		if out, ok := outcome.Of(err); err != nil && (!ok || out.Kind() != outcome.Findings || !strings.Contains(err.Error(), "1 object would lose field managers") || !strings.Contains(err.Error(), cmd+" --allow-ownership-loss")) {
			t.Errorf("%s: %v", c.name, err)
		}
	}
	var out bytes.Buffer
	if err := (printers.Human{}).PrintReport(&out, printers.Preflight(rep)); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"1 object would lose field managers through a write at v2", "default/text-config", "all: editor (Update at typechange.example.com/v1), gitops (Apply at"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("printed report lacks %q:\n%s", want, out.String())
		}
	}
}
