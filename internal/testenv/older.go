package testenv

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// RequiredMinorsEnv names the variable listing (comma-separated) the older minors whose
// binaries must be built: for them a test fails instead of skipping when they are missing.
// make test sets it to the minors its test-assets target builds, so that CI never skips
// silently.
const RequiredMinorsEnv = "CRDVER_TEST_REQUIRED_MINORS"

// StartBuiltMinor starts an older minor's kube-apiserver (and etcd) for one test when its
// binaries are built already (hack/build-test-binaries.sh --kube <minor>), and skips the test
// otherwise (fails it when $CRDVER_TEST_REQUIRED_MINORS lists the minor): nothing is built
// here (minutes). It is stopped when the test ends. The binaries' cache is found beside the
// current minor's folder ($KUBEBUILDER_ASSETS or the folder Main pinned in
// $CRDVER_TEST_ASSETS; Main points XDG_CACHE_HOME at a temporary folder), else it is the
// user's cache folder.
func StartBuiltMinor(t testing.TB, minor string) *Env {
	t.Helper()
	return StartBuiltMinorWith(t, Options{KubeMinor: minor})
}

// StartBuiltMinorWith is StartBuiltMinor with opts (opts.KubeMinor names the minor; its
// ExtraBinaries, e.g. "kube-controller-manager", must be built too).
func StartBuiltMinorWith(t testing.TB, opts Options) *Env {
	t.Helper()
	e, err := StartBuiltMinorSharedWith(opts)
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

// NotBuiltError is an older minor's kube-apiserver (or another of its binaries) that
// hack/build-test-binaries.sh has not built: a test that needs it skips.
type NotBuiltError struct {
	Minor string
	// Binaries are the missing ones (nil: kube-apiserver).
	Binaries []string
}

func (e *NotBuiltError) Error() string {
	if len(e.Binaries) == 0 || slices.Equal(e.Binaries, []string{"kube-apiserver"}) {
		return fmt.Sprintf("kube-apiserver %s is not built (hack/build-test-binaries.sh --kube %s)", e.Minor, e.Minor)
	}
	build := []string{"kube-apiserver", "etcd"}
	for _, b := range e.Binaries {
		if !slices.Contains(build, b) {
			build = append(build, b)
		}
	}
	return fmt.Sprintf("%s of Kubernetes %s not built (hack/build-test-binaries.sh --kube %s %s)",
		strings.Join(e.Binaries, " and "), e.Minor, e.Minor, strings.Join(build, " "))
}

// StartBuiltMinorShared is StartBuiltMinor for a server that several tests share (started
// once, from TestMain or a sync.Once, and stopped by its caller): a *NotBuiltError when the
// binaries are not built (the tests skip), nothing built here.
func StartBuiltMinorShared(minor string) (*Env, error) {
	return StartBuiltMinorSharedWith(Options{KubeMinor: minor})
}

// StartBuiltMinorSharedWith is StartBuiltMinorShared with opts (see StartBuiltMinorWith).
// When $CRDVER_TEST_REQUIRED_MINORS lists the minor, a missing binary is an error that says
// so, not a *NotBuiltError.
func StartBuiltMinorSharedWith(opts Options) (*Env, error) {
	minor := opts.KubeMinor
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
	dir := strings.TrimSpace(string(out))
	var missing []string
	for _, b := range append([]string{"kube-apiserver"}, opts.ExtraBinaries...) {
		if _, serr := os.Stat(filepath.Join(dir, b)); err != nil || serr != nil {
			missing = append(missing, b)
		}
	}
	if len(missing) > 0 {
		nb := &NotBuiltError{Minor: minor, Binaries: missing}
		if required(minor) {
			return nil, fmt.Errorf("%s: $%s requires it (make test builds it in its test-assets target)", nb, RequiredMinorsEnv)
		}
		return nil, nb
	}
	xdg, had := os.LookupEnv("XDG_CACHE_HOME")
	_ = os.Setenv("XDG_CACHE_HOME", cache) // Start finds the built folder (and builds nothing)
	e, err := Start(opts)
	if had {
		_ = os.Setenv("XDG_CACHE_HOME", xdg)
	} else {
		_ = os.Unsetenv("XDG_CACHE_HOME")
	}
	return e, err
}

// required says whether $CRDVER_TEST_REQUIRED_MINORS lists minor.
func required(minor string) bool {
	return slices.Contains(strings.Split(os.Getenv(RequiredMinorsEnv), ","), minor)
}
