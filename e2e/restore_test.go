package e2e

import (
	"encoding/json"
	"path/filepath"
	"slices"
	"testing"

	"github.com/crdver/kubectl-crdver/restore"
)

// TestUpgradeBackAndRestore takes a real release up and back down (issue 20 C): the old
// release applied with kubectl and its own sample objects written by kubectl-create, the
// controller and a GitOps applier; `kubectl crdver upgrade -f NEW/ --yes`; then
// `kubectl crdver upgrade -f OLD/ --yes`, which must end with the old release's CRDs (their
// versions, the old storage version, storedVersions trimmed), every object stored at the old
// storage version holding every field it held before the first upgrade and every manager's
// entries; then `kubectl crdver restore -f BACKUP` of the first upgrade's backup, which finds
// nothing to change (exit 0, every object unchanged) and writes nothing.
func TestUpgradeBackAndRestore(t *testing.T) {
	for _, rel := range []release{
		{Project: "gateway-api", Old: "v0.5.1", New: "v1.0.0", Samples: []string{"samples/*.yaml"},
			Controller: "gateway-api-controller", Applier: "argocd-controller", Status: gatewayStatus},
		{Project: "flux", Old: "source-controller-v1.6.2", New: "source-controller-v1.7.4", Samples: []string{"samples/*.yaml"},
			Controller: "source-controller", Applier: "kustomize-controller"},
	} {
		t.Run(rel.Project+"-"+rel.Old+"-"+rel.New+"-and-back", func(t *testing.T) {
			h := newHarness(t, rel)
			oldDir := h.installOld()
			files, _ := filepath.Glob(filepath.Join(oldDir, "*.yaml"))
			var names []string
			for _, f := range files {
				names = append(names, crdName(t, f))
			}
			h.createSamples(names)
			oldVersions := map[string][]string{}
			oldStorage := map[string]string{}
			for _, n := range names {
				crd := h.liveCRD(n)
				for _, v := range crd.Spec.Versions {
					oldVersions[n] = append(oldVersions[n], v.Name)
				}
				oldStorage[n] = storageVersion(crd)
			}
			before := h.snapshot()
			backup := filepath.Join(t.TempDir(), "backup.yaml")
			if r := h.crdver("upgrade", "-f", h.releaseDir(rel.New), "--yes", "--backup", backup); r.code != 0 {
				t.Fatalf("upgrade -f NEW: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
			}
			r := h.crdver("upgrade", "-f", oldDir, "--yes", "--backup", filepath.Join(t.TempDir(), "backup-back.yaml"))
			t.Logf("upgrade -f OLD: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
			if r.code != 0 {
				t.Fatalf("upgrade -f OLD: exit %d", r.code)
			}
			for _, n := range names {
				crd := h.liveCRD(n)
				var vs []string
				for _, v := range crd.Spec.Versions {
					vs = append(vs, v.Name)
				}
				if !slices.Equal(vs, oldVersions[n]) || storageVersion(crd) != oldStorage[n] || !slices.Equal(crd.Status.StoredVersions, []string{oldStorage[n]}) {
					t.Errorf("%s after going back: versions %v storage %s storedVersions %v; want %v, %s, [%s]", n, vs, storageVersion(crd), crd.Status.StoredVersions, oldVersions[n], oldStorage[n], oldStorage[n])
				}
			}
			back := h.snapshot()
			for o, b := range before {
				a := back[o]
				if a == nil {
					t.Errorf("%s: gone after going back", o)
					continue
				}
				sv := oldStorage[o.CRD]
				if versionOf(a.StoredAPIVersion) != sv {
					t.Errorf("%s: stored at %s after going back, want %s", o, a.StoredAPIVersion, sv)
				}
				if lost := lostFields(b.Data[sv], a.Data[sv], "apiVersion", "metadata.resourceVersion"); len(lost) > 0 {
					t.Errorf("%s: lost %v after going back (read at %s)", o, lost, sv)
				}
				if lost := lostManagers(b.Managers, a.Managers); len(lost) > 0 {
					t.Errorf("%s: lost managers %v after going back", o, lost)
				}
			}
			if fails := h.ssaByEveryManager(nil); len(fails) > 0 {
				t.Errorf("writes after going back failed:\n%v", fails)
			}
			// The backup of the first upgrade: nothing to restore, nothing written.
			res := h.crdver("restore", "-f", backup, "--yes", "-o", "json")
			var rep restore.Report
			if err := json.Unmarshal([]byte(res.stdout), &rep); err != nil {
				t.Fatalf("restore -o json (exit %d): %v\n%s\n%s", res.code, err, res.stdout, res.stderr)
			}
			if res.code != 0 || rep.Counts[restore.StateUnchanged] != len(rep.Objects) || len(rep.Objects) < len(before) {
				t.Errorf("restore after going back: exit %d, counts %v of %d documents (%d objects)\n%s", res.code, rep.Counts, len(rep.Objects), len(before), res.stdout)
			}
			after := h.snapshot()
			for o, a := range back {
				if after[o] == nil || after[o].ResourceVersion != a.ResourceVersion {
					t.Errorf("%s: written by a restore with nothing to restore", o)
				}
			}
		})
	}
}
