package action

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// TestActionChecksManifests runs action.yml's manifests step (kubectl crdver convert --check)
// with the plugin built from this checkout: on the Gateway API manifests of testdata/manifests
// and the v1.0.0 HTTPRoute CRD it fails (exit 1) and writes the Markdown list to the job
// summary and the step's output file; on the manifests once at v1, it passes.
func TestActionChecksManifests(t *testing.T) {
	raw, err := os.ReadFile("../../action.yml")
	if err != nil {
		t.Fatal(err)
	}
	var a struct {
		Inputs map[string]any `json:"inputs"`
		Runs   struct {
			Steps []struct {
				ID  string            `json:"id"`
				If  string            `json:"if"`
				Run string            `json:"run"`
				Env map[string]string `json:"env"`
			} `json:"steps"`
		} `json:"runs"`
	}
	if err := yaml.Unmarshal(raw, &a); err != nil {
		t.Fatal(err)
	}
	for _, in := range []string{"manifests", "manifests-to"} {
		if _, ok := a.Inputs[in]; !ok {
			t.Errorf("action.yml has no input %q", in)
		}
	}
	idx := -1
	for i, s := range a.Runs.Steps {
		if s.ID == "manifests" {
			idx = i
		}
	}
	if idx < 0 {
		t.Fatal("action.yml has no step with id manifests")
	}
	step := a.Runs.Steps[idx]
	if !strings.Contains(step.If, "inputs.manifests != ''") || !strings.Contains(step.Run, "--check -o markdown") {
		t.Errorf("the manifests step: if %q, run:\n%s", step.If, step.Run)
	}
	bin := buildPlugin(t)
	crd, _ := filepath.Abs(filepath.Join("..", "..", "testdata", "releases", "gateway-api", "v1.0.0", "gateway.networking.k8s.io_httproutes.yaml"))
	manifests := t.TempDir()
	orig, err := os.ReadFile(filepath.Join("..", "..", "testdata", "manifests", "gateway-api", "http-routing.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(manifests, "http-routing.yaml")
	if err := os.WriteFile(file, orig, 0o644); err != nil {
		t.Fatal(err)
	}
	runStep := func(to string) (int, string, string) {
		runner := t.TempDir()
		summary, output := filepath.Join(runner, "summary"), filepath.Join(runner, "output")
		cmd := exec.Command("bash", "-c", step.Run)
		cmd.Env = append(os.Environ(), "CRDS="+crd, "MANIFESTS="+manifests, "TO="+to, "CRDVER="+bin,
			"RUNNER_TEMP="+runner, "GITHUB_STEP_SUMMARY="+summary, "GITHUB_OUTPUT="+output)
		out, err := cmd.CombinedOutput()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		s, _ := os.ReadFile(summary)
		o, _ := os.ReadFile(output)
		if !strings.Contains(string(o), "manifests-file="+filepath.Join(runner, "kubectl-crdver-convert-check.md")) {
			t.Errorf("step output %q", o)
		}
		return code, string(s), string(out)
	}
	code, summary, out := runStep("v1") // the CRD stores v1beta1: without TO, those objects are at the target
	if code != 1 || !strings.Contains(summary, "2 object(s) still at a version other than `v1`") || !strings.Contains(summary, "`foo-route`") {
		t.Fatalf("v1beta1 manifests: exit %d, want 1; summary:\n%s\noutput:\n%s", code, summary, out)
	}
	if err := os.WriteFile(file, []byte(strings.ReplaceAll(string(orig), "gateway.networking.k8s.io/v1beta1", "gateway.networking.k8s.io/v1")), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, summary, out = runStep("v1"); code != 0 || !strings.Contains(summary, "Every object of httproutes.gateway.networking.k8s.io in the files is at `v1` (2)") {
		t.Errorf("v1 manifests: exit %d, want 0; summary:\n%s\noutput:\n%s", code, summary, out)
	}
}
