package testenv

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
)

// The plugin is two executables, installed side by side (docs/architecture.md): kubectl-crdver,
// which kubectl runs and which answers `versions --sort` and `version` itself, and
// crdver-engine, which it executes for every other command.
const (
	PluginFront  = "kubectl-crdver"
	PluginEngine = "crdver-engine"
	// VersionVar is the variable that -ldflags -X stamps the release version into, in both.
	VersionVar = "github.com/crdver/kubectl-crdver/internal/buildinfo.Version"
)

// BuildOptions tune BuildPlugin.
type BuildOptions struct {
	// Version, when set, is stamped into both executables (VersionVar).
	Version string
	// Release builds as releases and `make install` do: CGO_ENABLED=0, -trimpath, -s -w.
	Release bool
	// Env is the build's environment (default: this process's).
	Env []string
}

// BuildPlugin builds both executables of the plugin from this module into dir (created if
// needed) and returns the path of kubectl-crdver, the one to run; crdver-engine is beside it.
func BuildPlugin(dir string, o BuildOptions) (string, error) {
	root, err := RepoRoot()
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	ldflags := ""
	if o.Release {
		ldflags = "-s -w"
	}
	if o.Version != "" {
		ldflags += " -X " + VersionVar + "=" + o.Version
	}
	args := []string{"build", "-o", abs + string(filepath.Separator)}
	if o.Release {
		args = append(args, "-trimpath")
	}
	if ldflags != "" {
		args = append(args, "-ldflags", ldflags)
	}
	args = append(args, "./cmd/"+PluginFront, "./cmd/"+PluginEngine)
	cmd := exec.Command("go", args...)
	cmd.Dir = root
	cmd.Env = o.Env
	if cmd.Env == nil {
		cmd.Env = os.Environ()
	}
	if o.Release {
		cmd.Env = append(cmd.Env, "CGO_ENABLED=0")
	}
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go %v: %v\n%s", args, err, out)
	}
	return filepath.Join(abs, PluginFront+exeSuffix()), nil
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
