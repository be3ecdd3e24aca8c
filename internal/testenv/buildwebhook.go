package testenv

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// projectBinary builds (once, cached) a project's real binary (a conversion webhook, or
// Helm's CLI) with hack/build-webhook.sh ARGS and returns its path; what names it in the
// reason. When it cannot be built the test fails under CI=true and is skipped otherwise, with
// the reason.
func projectBinary(t testing.TB, what string, args ...string) string {
	t.Helper()
	root, err := RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("bash", append([]string{filepath.Join(root, "hack", "build-webhook.sh")}, args...)...)
	cmd.Env = append(os.Environ(), buildEnv()...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	bin := strings.TrimSpace(lastLine(string(out)))
	if err == nil {
		if _, serr := os.Stat(bin); serr != nil {
			err = serr
		}
	}
	if err != nil {
		why := fmt.Sprintf("cannot build %s (hack/build-webhook.sh %s): %v\n%s", what, strings.Join(args, " "), err, stderr.String())
		if os.Getenv("CI") == "true" {
			t.Fatal(why)
		}
		t.Skip(why)
	}
	return bin
}

// buildEnv pins where hack/build-webhook.sh builds and caches, from the process's
// environment as it is at the first call (start the webhook before a test moves HOME, as the
// e2e harness does; IsolateCache pins what it moves): the control-plane binaries' cache root (CRDVER_TESTBIN as make test sets it, else
// the folder above their pinned folder) and Go's build and module caches.
var buildEnv = sync.OnceValue(func() []string {
	var env []string
	if os.Getenv("CRDVER_TESTBIN") == "" {
		assets := os.Getenv("KUBEBUILDER_ASSETS")
		if assets == "" {
			assets = os.Getenv("CRDVER_TEST_ASSETS")
		}
		if assets != "" {
			env = append(env, "CRDVER_TESTBIN="+filepath.Dir(assets))
		}
	}
	for _, v := range []string{"GOCACHE", "GOMODCACHE"} {
		if os.Getenv(v) == "" {
			if out, err := exec.Command("go", "env", v).Output(); err == nil {
				env = append(env, v+"="+strings.TrimSpace(string(out)))
			}
		}
	}
	return env
})

func lastLine(s string) string {
	s = strings.TrimRight(s, "\n")
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		return s[i+1:]
	}
	return s
}
