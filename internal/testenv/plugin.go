package testenv

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
)

// The plugin is two executables, installed side by side (docs/architecture.md): kubectl-crdver,
// which kubectl runs and which answers `versions --sort` and `version` itself, and
// crdver-engine, which it executes for every other command.
const (
	PluginFront  = "kubectl-crdver"
	PluginEngine = "crdver-engine"
	// VersionVar is the variable that -ldflags -X stamps the release version into, in both.
	VersionVar = "github.com/crdver/kubectl-crdver/internal/buildinfo.Version"
	// PluginVersion is the release version BuildPlugin stamps into both executables: every
	// test builds the same plugin, so that a `make test` run links it once (PluginCacheVar).
	PluginVersion = "v0.9.9"
	// PluginCacheVar names a folder where BuildPlugin keeps the plugin it builds and takes it
	// from when another test package (another process) has built it already. `make test` sets
	// it to a temporary folder of the run; unset, every call builds.
	PluginCacheVar = "CRDVER_TEST_PLUGIN_CACHE"
)

// BuildOptions tune BuildPlugin.
type BuildOptions struct {
	// Env is the build's environment (default: this process's).
	Env []string
}

// BuildPlugin builds both executables of the plugin from this module into dir (created if
// needed) and returns the path of kubectl-crdver, the one to run; crdver-engine is beside it.
// They are built as releases and `make install` build them (CGO_ENABLED=0, -trimpath, -s -w,
// PluginVersion stamped): what users run, and a third of the CPU a default build takes to link.
// With PluginCacheVar set, the build is shared: the first caller builds into the cache (under
// a lock, so that two test processes do not build at once) and every caller gets hard links
// to it (copies where links fail).
func BuildPlugin(dir string, o BuildOptions) (string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	cache := os.Getenv(PluginCacheVar)
	if cache == "" {
		if err := buildPlugin(abs, o); err != nil {
			return "", err
		}
		return filepath.Join(abs, PluginFront+exeSuffix()), nil
	}
	if err := os.MkdirAll(cache, 0o755); err != nil {
		return "", err
	}
	unlock, err := lockFile(filepath.Join(cache, "build.lock"))
	if err != nil {
		return "", err
	}
	defer unlock()
	built := filepath.Join(cache, "plugin")
	if _, err := os.Stat(filepath.Join(built, PluginEngine+exeSuffix())); errors.Is(err, os.ErrNotExist) {
		// Built into a fresh folder and renamed: a build killed half-way leaves no plugin
		// that the next caller would take for whole.
		tmp, err := os.MkdirTemp(cache, "building-")
		if err != nil {
			return "", err
		}
		if err := buildPlugin(tmp, o); err != nil {
			os.RemoveAll(tmp)
			return "", err
		}
		if err := os.Rename(tmp, built); err != nil {
			os.RemoveAll(tmp)
			return "", err
		}
	} else if err != nil {
		return "", err
	}
	for _, name := range []string{PluginFront, PluginEngine} {
		if err := linkOrCopy(filepath.Join(built, name+exeSuffix()), filepath.Join(abs, name+exeSuffix())); err != nil {
			return "", err
		}
	}
	return filepath.Join(abs, PluginFront+exeSuffix()), nil
}

// buildPlugin runs go build for both executables into dir.
func buildPlugin(dir string, o BuildOptions) error {
	root, err := RepoRoot()
	if err != nil {
		return err
	}
	args := []string{"build", "-o", dir + string(filepath.Separator), "-trimpath",
		"-ldflags", "-s -w -X " + VersionVar + "=" + PluginVersion,
		"./cmd/" + PluginFront, "./cmd/" + PluginEngine}
	cmd := exec.Command("go", args...)
	cmd.Dir = root
	cmd.Env = o.Env
	if cmd.Env == nil {
		cmd.Env = os.Environ()
	}
	cmd.Env = append(cmd.Env, "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go %v: %v\n%s", args, err, out)
	}
	return nil
}

// linkOrCopy makes dst the file src is (a hard link; a copy, executable, across file systems).
func linkOrCopy(src, dst string) error {
	_ = os.Remove(dst)
	if err := os.Link(src, dst); err == nil {
		return nil
	}
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o755)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// MustBuildPlugin is BuildPlugin for tests and benchmarks: it fails tb on error.
func MustBuildPlugin(tb interface {
	Helper()
	Fatal(...any)
}, dir string, o BuildOptions) string {
	tb.Helper()
	bin, err := BuildPlugin(dir, o)
	if err != nil {
		tb.Fatal(err)
	}
	return bin
}

// exeSuffix is ".exe" on Windows, where executables carry it.
func exeSuffix() string {
	if runtime.GOOS == "windows" {
		return ".exe"
	}
	return ""
}
