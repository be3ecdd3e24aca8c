package testenv

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestBuildScriptWarmIsNoOp: once the binaries are in the cache, hack/build-test-binaries.sh
// rebuilds nothing (a warm `make test` must not rebuild), and with KUBEBUILDER_ASSETS set it
// only echoes that folder.
func TestBuildScriptWarmIsNoOp(t *testing.T) {
	root, err := RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	script := filepath.Join(root, "hack", "build-test-binaries.sh")
	if _, err := Assets("kube-controller-manager"); err != nil {
		t.Fatal(err)
	}
	cache := exec.Command("bash", script, "--dir")
	cache.Env = append(os.Environ(), "KUBEBUILDER_ASSETS=")
	dirOut, err := cache.Output()
	if err != nil {
		t.Fatal(err)
	}
	assets := strings.TrimSpace(string(dirOut))
	if env := os.Getenv("KUBEBUILDER_ASSETS"); env != "" && filepath.Clean(env) != filepath.Clean(assets) {
		t.Logf("KUBEBUILDER_ASSETS=%s is not the script's cache %s: the warm-cache check does not apply", env, assets)
	} else {
		before := map[string]time.Time{}
		for _, b := range []string{"kube-apiserver", "etcd", "kube-controller-manager"} {
			st, err := os.Stat(filepath.Join(assets, b))
			if err != nil {
				t.Fatalf("%s not built: %v", b, err)
			}
			before[b] = st.ModTime()
		}
		cmd := exec.Command("bash", script, "kube-apiserver", "etcd", "kube-controller-manager")
		cmd.Env = append(os.Environ(), "KUBEBUILDER_ASSETS=")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%v: %s", err, out)
		}
		if strings.Contains(string(out), "building") {
			t.Errorf("warm run rebuilt something:\n%s", out)
		}
		if got := strings.TrimSpace(string(out)); got != assets {
			t.Errorf("warm run printed %q, want the folder %q", got, assets)
		}
		for b, mt := range before {
			if st, err := os.Stat(filepath.Join(assets, b)); err != nil || !st.ModTime().Equal(mt) {
				t.Errorf("%s was rewritten", b)
			}
		}
	}
	cmd := exec.Command("bash", script)
	cmd.Env = append(os.Environ(), "KUBEBUILDER_ASSETS=/some/where")
	out, err := cmd.CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "/some/where" {
		t.Errorf("with KUBEBUILDER_ASSETS set: %q, %v; want it echoed and nothing built", out, err)
	}
	cmd = exec.Command("bash", script, "kubelet")
	cmd.Env = append(os.Environ(), "KUBEBUILDER_ASSETS=")
	if out, err := cmd.CombinedOutput(); err == nil || !strings.Contains(string(out), `unknown binary "kubelet"`) {
		t.Errorf("unknown binary: %q, %v; want an error", out, err)
	}
}

// TestBuildScriptOlderMinors: --minors lists the minors hack/tools has a kube-apiserver module
// for, oldest first; --kube MINOR --dir names that minor's own cache folder (by its release,
// KUBEBUILDER_ASSETS notwithstanding: it holds the current minor); a minor without a module is
// refused with the command that adds one. Nothing is built.
func TestBuildScriptOlderMinors(t *testing.T) {
	root, err := RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	script := filepath.Join(root, "hack", "build-test-binaries.sh")
	minors, err := OlderMinors()
	if err != nil {
		t.Fatal(err)
	}
	mods, _ := filepath.Glob(filepath.Join(root, "hack", "tools", "kube-1.*", "go.mod"))
	if len(minors) == 0 || len(minors) != len(mods) {
		t.Fatalf("--minors listed %v; hack/tools has %d kube-1.* modules", minors, len(mods))
	}
	for i := 1; i < len(minors); i++ {
		var a, b int
		fmt.Sscanf(minors[i-1], "1.%d", &a)
		fmt.Sscanf(minors[i], "1.%d", &b)
		if a >= b {
			t.Errorf("--minors is not oldest first: %v", minors)
		}
	}
	cmd := exec.Command("bash", script, "--kube", minors[0], "--dir")
	cmd.Env = append(os.Environ(), "KUBEBUILDER_ASSETS=/some/where")
	out, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	dir := strings.TrimSpace(string(out))
	if !strings.Contains(filepath.Base(dir), "k8s-v"+minors[0]+".") || filepath.Base(filepath.Dir(dir)) != "testbin" {
		t.Errorf("--kube %s --dir printed %q, want .../testbin/k8s-v%s.<patch>-etcd-<version>", minors[0], dir, minors[0])
	}
	cmd = exec.Command("bash", script, "--kube", "1.9", "kube-apiserver")
	if out, err := cmd.CombinedOutput(); err == nil || !strings.Contains(string(out), "hack/new-kube-module.sh 1.9.<patch>") {
		t.Errorf("--kube 1.9: %q, %v; want an error naming hack/new-kube-module.sh", out, err)
	}
}
