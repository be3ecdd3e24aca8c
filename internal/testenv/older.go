package testenv

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// StartBuiltMinor starts an older minor's kube-apiserver (and etcd) for one test when its
// binaries are built already (hack/build-test-binaries.sh --kube <minor>), and skips the test
// otherwise: nothing is built here (minutes). It is stopped when the test ends. The binaries'
// cache is found beside the current minor's folder ($KUBEBUILDER_ASSETS or the folder Main
// pinned in $CRDVER_TEST_ASSETS; Main points XDG_CACHE_HOME at a temporary folder), else it is
// the user's cache folder.
func StartBuiltMinor(t testing.TB, minor string) *Env {
	t.Helper()
	e, err := StartBuiltMinorShared(minor)
	var nb *NotBuiltError
	if errors.As(err, &nb) {
		t.Skip(nb.Error())
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Stop)
	return e
}

// NotBuiltError is an older minor's kube-apiserver that hack/build-test-binaries.sh has not
// built: a test that needs it skips.
type NotBuiltError struct{ Minor string }

func (e *NotBuiltError) Error() string {
	return fmt.Sprintf("kube-apiserver %s is not built (hack/build-test-binaries.sh --kube %s)", e.Minor, e.Minor)
}

// StartBuiltMinorShared is StartBuiltMinor for a server that several tests share (started
// once, from TestMain or a sync.Once, and stopped by its caller): a *NotBuiltError when the
// binaries are not built (the tests skip), nothing built here.
func StartBuiltMinorShared(minor string) (*Env, error) {
	assets := os.Getenv("KUBEBUILDER_ASSETS")
	if assets == "" {
		assets = os.Getenv("CRDVER_TEST_ASSETS")
	}
	root, err := RepoRoot()
	if err != nil {
		return nil, err
	}
	cache, _ := os.UserCacheDir() // no pinned folder: the script's default cache
	if assets != "" {
		cache = filepath.Dir(filepath.Dir(filepath.Dir(assets)))
	}
	cmd := exec.Command("bash", filepath.Join(root, "hack", "build-test-binaries.sh"), "--kube", minor, "--dir")
	cmd.Env = append(os.Environ(), "XDG_CACHE_HOME="+cache)
	out, err := cmd.Output()
	if _, serr := os.Stat(filepath.Join(strings.TrimSpace(string(out)), "kube-apiserver")); err != nil || serr != nil {
		return nil, &NotBuiltError{Minor: minor}
	}
	xdg, had := os.LookupEnv("XDG_CACHE_HOME")
	_ = os.Setenv("XDG_CACHE_HOME", cache) // Start finds the built folder (and builds nothing)
	e, err := Start(Options{KubeMinor: minor})
	if had {
		_ = os.Setenv("XDG_CACHE_HOME", xdg)
	} else {
		_ = os.Unsetenv("XDG_CACHE_HOME")
	}
	return e, err
}
