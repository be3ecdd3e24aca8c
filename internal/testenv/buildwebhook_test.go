package testenv

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestBuildWebhookScript: hack/build-webhook.sh names each webhook's cached binary by what it
// is built from (--path builds nothing; helm's CLI too), refuses a cert-manager version that
// hack/tools/cm-webhook/versions does not pin and an unknown webhook (exit 2), and, once a
// binary is in the cache, prints it and builds nothing.
func TestBuildWebhookScript(t *testing.T) {
	root, err := RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	script := filepath.Join(root, "hack", "build-webhook.sh")
	run := func(args ...string) (string, int) {
		cmd := exec.Command("bash", append([]string{script}, args...)...)
		cmd.Env = append(os.Environ(), buildEnv()...)
		out, err := cmd.CombinedOutput()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(string(out)), code
	}
	cm, code := run("cert-manager", "--path")
	if code != 0 || !strings.HasPrefix(filepath.Base(filepath.Dir(cm)), "cm-webhook-v1.6.3-") || filepath.Base(cm) != "cm-webhook" {
		t.Errorf("cert-manager --path: %q (exit %d), want .../cm-webhook-v1.6.3-<sum>/cm-webhook", cm, code)
	}
	if again, _ := run("cert-manager", "v1.6.3", "--path"); again != cm {
		t.Errorf("cert-manager v1.6.3 --path: %q, the default version's is %q", again, cm)
	}
	if hp, code := run("helm", "--path"); code != 0 || !strings.HasPrefix(filepath.Base(filepath.Dir(hp)), "helm-v3.22.0-") || filepath.Base(hp) != "helm" {
		t.Errorf("helm --path: %q (exit %d), want .../helm-v3.22.0-<sum>/helm", hp, code)
	}
	capi, code := run("capi", "--path")
	wrapper, _ := exec.Command("bash", filepath.Join(root, "hack", "build-capi-webhook.sh"), "--path").Output()
	if code != 0 || !strings.HasPrefix(filepath.Base(filepath.Dir(capi)), "capi-webhook-") || strings.TrimSpace(string(wrapper)) != capi {
		t.Errorf("capi --path: %q (exit %d); build-capi-webhook.sh --path: %q", capi, code, wrapper)
	}
	if out, code := run("cert-manager", "v1.5.5"); code != 2 || !strings.Contains(out, "cert-manager v1.5.5 is not in hack/tools/cm-webhook/versions (have: v1.6.3 )") {
		t.Errorf("an unpinned version: %q (exit %d), want exit 2 naming the versions file", out, code)
	}
	if out, code := run("istio"); code != 2 || !strings.Contains(out, `unknown webhook "istio"`) {
		t.Errorf("an unknown webhook: %q (exit %d), want exit 2", out, code)
	}
	if _, err := os.Stat(cm); err != nil {
		t.Logf("%s is not built (make test-assets builds it): the warm-cache check does not apply", cm)
		return
	}
	st, _ := os.Stat(cm)
	out, code := run("cert-manager")
	if code != 0 || out != cm {
		t.Errorf("warm run: %q (exit %d), want only %s", out, code, cm)
	}
	if now, err := os.Stat(cm); err != nil || !now.ModTime().Equal(st.ModTime()) {
		t.Errorf("warm run rewrote %s", cm)
	}
}
