package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/crdver/kubectl-crdver/upgrade"
)

// TestUpgradeRelease runs `kubectl crdver upgrade -f NEW/ --yes` on a real release (the old
// release applied with kubectl, its own sample objects written by kubectl-create, the operator
// and a GitOps applier) and proves: every CRD ends with status.storedVersions = [storage]; no
// field an object held is gone (read before and after at the storage version); server-side
// apply by every manager works afterwards; plan of the same release is not breaking.
func TestUpgradeRelease(t *testing.T) {
	for _, rc := range releaseCases {
		if rc.name != "gateway-api-0.5-to-1.0" {
			continue
		}
		t.Run(rc.name, func(t *testing.T) {
			h := newHarness(t, rc.rel)
			h.setUp(rc.via)
			before := h.snapshot()
			newDir := h.releaseDir(rc.rel.New)
			backup := filepath.Join(t.TempDir(), "backup.yaml")
			r := h.crdver("upgrade", "-f", newDir, "--yes", "--backup", backup, "-o", "json")
			var rep upgrade.Report
			if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
				t.Fatalf("upgrade -o json (exit %d): %v\n%s\n%s", r.code, err, r.stdout, r.stderr)
			}
			if r.code != 0 {
				t.Fatalf("upgrade: exit %d\n%s\n%s", r.code, r.stderr, r.stdout)
			}
			after := h.snapshot()
			for o, b := range before {
				a := after[o]
				if a == nil {
					t.Errorf("%s: gone after the upgrade", o)
					continue
				}
				// What the object held at the version it was stored at, against what it holds at
				// the version it is stored at now.
				bv, av := versionOf(b.StoredAPIVersion), versionOf(a.StoredAPIVersion)
				if av != storageVersion(h.liveCRD(o.CRD)) {
					t.Errorf("%s: stored at %s in etcd after the upgrade", o, a.StoredAPIVersion)
				}
				if lost := lostFields(b.Data[bv], a.Data[av], "apiVersion", "metadata"); len(lost) > 0 {
					t.Errorf("%s: lost %v (held at %s before, at %s after)", o, lost, bv, av)
				}
				if lost := lostManagers(b.Managers, a.Managers); len(lost) > 0 {
					t.Errorf("%s: lost managers %v", o, lost)
				}
			}
			for _, v := range rep.Verify.CRDs {
				if !v.StoredOK || len(v.SSAFailures) > 0 || v.StaleManagedFields > 0 {
					t.Errorf("%s: verify %+v", v.CRD, v)
				}
			}
			if fails := h.ssaByEveryManager(nil); len(fails) > 0 {
				t.Errorf("writes after the upgrade failed:\n%v", fails)
			}
			if p := h.crdver("plan", "-f", newDir); p.code != 0 {
				t.Errorf("plan of the same release after the upgrade: exit %d\n%s", p.code, p.stdout)
			}
			for _, s := range rep.Steps {
				t.Logf("step %s %v: %s (%s)", s.Action, s.CRDs, s.State, s.Detail)
			}
			if len(before) == 0 {
				t.Fatal("no sample objects were created: nothing was checked")
			}
			applies := 0
			for _, s := range rep.Steps {
				if s.Action == "apply" {
					applies++
				}
			}
			if applies != 1 || !slices.ContainsFunc(rep.Steps, func(s upgrade.StepResult) bool { return s.Action == "backup" && s.State == "done" }) {
				t.Errorf("steps: %+v", rep.Steps)
			}
		})
	}
}

func versionOf(apiVersion string) string {
	_, v, _ := strings.Cut(apiVersion, "/")
	return v
}

// TestUpgradeReleaseRefusesDataLoss: Strimzi 0.51 → 1.0 makes v1 the storage version, which
// lacks fields the sample objects hold at v1beta2 (KafkaUser ACLs' operation, …), and some
// KafkaConnects lack v1's required groupId. upgrade refuses before any write: every object's
// resourceVersion and etcd encoding, and every CRD, are unchanged; the refusal names the
// objects and fields.
func TestUpgradeReleaseRefusesDataLoss(t *testing.T) {
	for _, rc := range releaseCases {
		if rc.name != "strimzi-0.51-to-1.0" {
			continue
		}
		t.Run(rc.name, func(t *testing.T) {
			h := newHarness(t, rc.rel)
			names := h.setUp(rc.via)
			before := h.snapshot()
			crdRV := map[string]string{}
			for _, n := range names {
				crdRV[n] = h.liveCRD(n).ResourceVersion
			}
			backup := filepath.Join(t.TempDir(), "backup.yaml")
			r := h.crdver("upgrade", "-f", h.releaseDir(rc.rel.New), "--yes", "--backup", backup, "-o", "json")
			if r.code != 1 {
				t.Fatalf("upgrade: exit %d, want 1 (refused)\n%s\n%s", r.code, r.stderr, r.stdout)
			}
			var rep upgrade.Report
			if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
				t.Fatalf("upgrade -o json: %v\n%s", err, r.stdout)
			}
			if !rep.Preflight.Refused || len(rep.Preflight.DataLoss) == 0 {
				t.Errorf("preflight: %+v", rep.Preflight)
			}
			if !slices.ContainsFunc(rep.Preflight.DataLoss, func(f upgrade.ObjectFinding) bool {
				return strings.HasPrefix(f.CRD, "kafkausers.") && slices.ContainsFunc(f.Fields, func(p string) bool { return strings.Contains(p, "acls") })
			}) {
				t.Errorf("no KafkaUser ACL loss in the preflight: %+v", rep.Preflight.DataLoss)
			}
			after := h.snapshot()
			for o, b := range before {
				if a := after[o]; a == nil || a.ResourceVersion != b.ResourceVersion || a.StoredAPIVersion != b.StoredAPIVersion {
					t.Errorf("%s: written by the refused upgrade", o)
				}
			}
			for _, n := range names {
				if rv := h.liveCRD(n).ResourceVersion; rv != crdRV[n] {
					t.Errorf("%s: changed by the refused upgrade", n)
				}
			}
			if _, err := os.Stat(backup); err == nil {
				t.Errorf("the refused upgrade wrote a backup")
			}
		})
	}
}

// TestUpgradeStaticManifestNotHelm: cert-manager v0.16.1's static manifest (rendered with helm
// template) labels its CRDs app.kubernetes.io/managed-by: Helm without a Helm release (no
// meta.helm.sh/release-name/-namespace annotations). `upgrade -f v1.7.3` straight from v0.16.1
// applies the release itself: no step leaves the apply to Helm, the apply is done, and the
// outcome is 0, or 1 only for objects left invalid on re-create.
func TestUpgradeStaticManifestNotHelm(t *testing.T) {
	rel := release{Project: "cert-manager", Old: "v0.16.1", New: "v1.7.3", Samples: []string{"samples/*.yaml"},
		Controller: "cert-manager-certificates-issuing", Applier: "kustomize-controller", WriteMayFail: certManager016WriteMayFail}
	h := newHarness(t, rel)
	h.setUp(nil)
	newDir := h.releaseDir(rel.New)
	// --allow-data-loss: the test webhook converts by apiVersion only, so one sample loses a
	// field v1 spells differently (certManagerWriteMayFail); cert-manager's webhook moves it.
	r := h.crdver("upgrade", "-f", newDir, "--yes", "--allow-data-loss", "--backup", filepath.Join(t.TempDir(), "backup.yaml"), "-o", "json")
	var rep upgrade.Report
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Fatalf("upgrade -o json (exit %d): %v\n%s\n%s", r.code, err, r.stdout, r.stderr)
	}
	applied := false
	for _, s := range rep.Steps {
		t.Logf("step %s %v: %s (%s)", s.Action, s.CRDs, s.State, s.Detail)
		if s.Action == "tool-apply" {
			t.Errorf("a step leaves the apply to a tool: %s", s.Why)
		}
		if s.Action == "apply" && s.State == upgrade.StateDone {
			applied = true
		}
	}
	if strings.Contains(r.stdout+r.stderr, `release ""`) || strings.Contains(r.stdout+r.stderr, "let Helm") {
		t.Errorf("the output still names a Helm release:\n%s", r.stderr)
	}
	if !applied {
		t.Errorf("the release was not applied (exit %d): %v\n%s", r.code, rep.Problems, r.stderr)
	}
	if r.code != 0 && (r.code != 1 || rep.Verify == nil || len(rep.Verify.InvalidOnRecreate) == 0 || len(rep.Problems) > 0) {
		t.Errorf("exit %d; problems %v\n%s", r.code, rep.Problems, r.stderr)
	}
}
