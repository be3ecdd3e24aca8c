package plan

import (
	"fmt"
	"slices"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	crdinfo "github.com/crdver/kubectl-crdver/crd"
	"github.com/crdver/kubectl-crdver/preflight"
)

// ActionServeStored: serve again the versions in status.storedVersions that the live CRD has
// but does not serve (cert-manager 1.6's v1alpha2/v1beta1), so the objects stored at them can
// be read as stored: by the preflight, the backup and the rewrite's managedFields move. It is
// a CRD write: `kubectl crdver upgrade` asks for it like any write, and serves them no longer
// when the upgrade is then refused or not confirmed.
const ActionServeStored = "serve-stored"

// UnservedStored are the versions in live's status.storedVersions that are in spec.versions
// but not served: objects may be stored at them and cannot be read at them until they are
// served again.
func UnservedStored(live *apiextensionsv1.CustomResourceDefinition) []string {
	var out []string
	if live == nil {
		return nil
	}
	for _, v := range live.Status.StoredVersions {
		if lv, err := crdinfo.Lookup(live, v); err == nil && !lv.Served && !slices.Contains(out, v) {
			out = append(out, v)
		}
	}
	return out
}

// serveStoredStep is the runbook step that serves the unserved stored versions of the CRDs
// whose objects are read (backed up and rewritten), or nil when none needs it.
func serveStoredStep(plans []*crdPlan) *RunbookStep {
	var crds, cmds, what []string
	for _, p := range plans {
		if !p.servesStored() {
			continue
		}
		vs := UnservedStored(p.live)
		crds = append(crds, p.live.Name)
		what = append(what, p.live.Name+" "+strings.Join(vs, ", "))
		for _, v := range vs {
			cmds = append(cmds, preflight.ServeCommand(p.live, v, true))
		}
	}
	if len(crds) == 0 {
		return nil
	}
	return &RunbookStep{Phase: PhaseBackup, Action: ActionServeStored, CRDs: crds, Commands: cmds,
		Why: fmt.Sprintf("serve again the versions in status.storedVersions the live CRDs do not serve (%s): objects stored at them can be read as stored only at them, for the backup and the storage steps (the release's apply sets served as the release has it)", strings.Join(what, "; "))}
}

// servesStored: the live CRD holds objects, some of whose data may be stored at versions it
// does not serve, and the runbook reads them (backup, rewrite).
func (p *crdPlan) servesStored() bool {
	return p.live != nil && p.it.Objects.Total != 0 && p.migrate && len(UnservedStored(p.live)) > 0
}
