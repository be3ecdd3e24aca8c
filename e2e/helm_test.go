package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/crdver/kubectl-crdver/internal/testenv"
	"github.com/crdver/kubectl-crdver/plan"
	"github.com/crdver/kubectl-crdver/upgrade"
)

// TestUpgradeHelmInstalledCRD (issue 26, item 0): a chart whose CRD is in templates/ —
// external-secrets v0.15.1's ExternalSecret CRD — installed by the real helm (v3.22.0, built
// from the Go module proxy: hack/build-webhook.sh helm) as release "eso" in namespace
// "helm-e2e", with the project's sample object. Helm marks the CRD with its release
// annotations, and that is the rule that matches:
//
//   - plan -f v0.16.2 leaves the apply to Helm, naming release "eso" in namespace "helm-e2e"
//     and the annotations;
//   - upgrade -f v0.16.2 --yes does every storage step itself but not the apply, and ends exit
//     1 naming the release (the person must act);
//   - after `helm upgrade eso` with the new chart (the person's act), the same upgrade command
//     ends exit 0, applied and verified, the object holding every field it held.
func TestUpgradeHelmInstalledCRD(t *testing.T) {
	helm := testenv.HelmBinary(t)
	rel := release{Project: "external-secrets", Old: "v0.15.1", New: "v0.16.2", Samples: []string{"samples/*.yaml"},
		Controller: "external-secrets", Applier: "argocd-controller"}
	h := newHarness(t, rel)
	const name, ns = "externalsecrets.external-secrets.io", "helm-e2e"
	chart := func(ver string) string {
		// The release's CRD files, as releaseDir writes them, are the chart's templates/.
		dir := filepath.Join(t.TempDir(), "chart")
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(h.releaseDir(ver), filepath.Join(dir, "templates")); err != nil {
			t.Fatal(err)
		}
		meta := "apiVersion: v2\nname: eso-crds\nversion: " + strings.TrimPrefix(ver, "v") + "\n"
		if err := os.WriteFile(filepath.Join(dir, "Chart.yaml"), []byte(meta), 0o644); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	runHelm := func(args ...string) string {
		t.Helper()
		ctx, cancel := context.WithTimeout(h.ctx, 3*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, helm, append(args, "--kubeconfig", env.Kubeconfig)...)
		cmd.Env = append(os.Environ(), "HOME="+h.home, "HELM_CACHE_HOME="+filepath.Join(h.home, "helm-cache"),
			"HELM_CONFIG_HOME="+filepath.Join(h.home, "helm-config"), "HELM_DATA_HOME="+filepath.Join(h.home, "helm-data"))
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Run(); err != nil {
			t.Fatalf("helm %s: %v\n%s", strings.Join(args, " "), err, out.String())
		}
		return out.String()
	}

	h.crds[name] = true // deleted at the end
	t.Logf("helm install: %s", firstLineOf(runHelm("install", "eso", chart(rel.Old), "--namespace", ns, "--create-namespace")))
	crd, err := env.WaitEstablished(h.ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	if got := crd.Annotations["meta.helm.sh/release-name"]; got != "eso" {
		t.Fatalf("helm install wrote annotations %v on the CRD, want meta.helm.sh/release-name eso", crd.Annotations)
	}
	h.createSamples([]string{name})
	before := h.snapshot()
	newDir := h.releaseDir(rel.New)
	const byHelm = `Helm (release "eso" in namespace "helm-e2e", annotations meta.helm.sh/release-name, meta.helm.sh/release-namespace)`

	// plan: the apply is Helm's, named by its release.
	p := h.crdver("plan", "-f", newDir, "-o", "json")
	var prep plan.Report
	if err := json.Unmarshal([]byte(p.stdout), &prep); err != nil {
		t.Fatalf("plan -o json (exit %d): %v\n%s", p.code, err, p.stderr)
	}
	toolApply := func(steps []plan.RunbookStep) *plan.RunbookStep {
		for i := range steps {
			if steps[i].Action == plan.ActionToolApply {
				return &steps[i]
			}
		}
		return nil
	}
	if st := toolApply(prep.Runbook); st == nil || !strings.Contains(st.Why, byHelm) {
		t.Errorf("plan's runbook does not leave the apply to %s: %+v", byHelm, st)
	}

	// upgrade: the storage steps, not the apply; exit 1, naming the release.
	backup := filepath.Join(t.TempDir(), "backup.yaml")
	u := h.crdver("upgrade", "-f", newDir, "--yes", "--backup", backup, "-o", "json")
	var urep upgrade.Report
	if err := json.Unmarshal([]byte(u.stdout), &urep); err != nil {
		t.Fatalf("upgrade -o json (exit %d): %v\n%s", u.code, err, u.stderr)
	}
	t.Logf("upgrade -f %s: exit %d: %s", rel.New, u.code, firstLineOf(u.stderr))
	if u.code != 1 || !strings.Contains(u.stderr, `release "eso"`) {
		t.Errorf("upgrade with a Helm-managed CRD: exit %d, want 1 naming release \"eso\"\n%s", u.code, u.stderr)
	}
	for _, s := range urep.Steps {
		if s.Action == "apply" && s.State == upgrade.StateDone {
			t.Errorf("upgrade applied the release itself; Helm manages the CRD")
		}
	}
	live := h.liveCRD(name)
	if live.Annotations["meta.helm.sh/release-name"] != "eso" {
		t.Errorf("the CRD lost Helm's release annotations: %v", live.Annotations)
	}

	// The person's act: helm upgrade with the new release's chart; then the same command ends.
	t.Logf("helm upgrade: %s", firstLineOf(runHelm("upgrade", "eso", chart(rel.New), "--namespace", ns)))
	u2 := h.crdver("upgrade", "-f", newDir, "--yes", "--backup", backup, "-o", "json")
	var u2rep upgrade.Report
	if err := json.Unmarshal([]byte(u2.stdout), &u2rep); err != nil {
		t.Fatalf("upgrade again -o json (exit %d): %v\n%s", u2.code, err, u2.stderr)
	}
	t.Logf("upgrade -f %s after helm upgrade: exit %d: %s", rel.New, u2.code, firstLineOf(u2.stderr+u2.stdout))
	if u2.code != 0 {
		t.Errorf("upgrade after helm upgrade: exit %d, want 0\n%s", u2.code, u2.stderr)
	}
	if v := h.releaseApplied(newDir); len(v) > 0 {
		t.Errorf("after helm upgrade: %v", v)
	}
	crd = h.liveCRD(name)
	if want := storageVersion(crd); !slices.Equal(crd.Status.StoredVersions, []string{want}) {
		t.Errorf("storedVersions %v, want [%s]", crd.Status.StoredVersions, want)
	}
	after := h.snapshot()
	for o, b := range before {
		a := after[o]
		old := versionOf(b.StoredAPIVersion)
		if a == nil || a.Data[storageVersion(crd)] == nil {
			t.Errorf("%s: unreadable after the upgrade", o)
			continue
		}
		if lost := lostManagers(b.Managers, a.Managers); len(lost) > 0 {
			t.Errorf("%s: managers lost: %v", o, lost)
		}
		if d := a.Data[old]; d != nil {
			if lost := lostFields(b.Data[old], d, "apiVersion", "metadata"); len(lost) > 0 {
				t.Errorf("%s: lost %v (read at %s)", o, lost, old)
			}
		}
	}
}
