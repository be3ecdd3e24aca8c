package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
)

// engineName is the executable that answers every command (cmd/crdver-engine). It must not
// start with "kubectl-": kubectl would list it as a plugin (`kubectl crdver engine`).
const engineName = "crdver-engine"

// installHint is how to install both executables.
const installHint = "from a clone, make install (after the first release, also go install github.com/crdver/kubectl-crdver/cmd/...@latest or kubectl krew install crdver)"

// isCompletion reports whether the binary runs as kubectl_complete-crdver, the name under which
// kubectl's plugin completion runs it.
func isCompletion(argv0 string) bool {
	return strings.TrimSuffix(filepath.Base(argv0), ".exe") == "kubectl_complete-crdver"
}

// findEngine returns the engine beside this executable, with symlinks resolved (krew's and
// kubectl_complete-crdver's links point to the installed file), or else the one on PATH.
// The error names what is missing, where it looked and how to install both.
func findEngine() (string, error) {
	name := engineName
	if runtime.GOOS == "windows" {
		name += ".exe"
	}
	var looked []string
	if self, err := os.Executable(); err == nil {
		if resolved, err := filepath.EvalSymlinks(self); err == nil {
			self = resolved
		}
		p := filepath.Join(filepath.Dir(self), name)
		if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() {
			return p, nil
		}
		looked = append(looked, p)
	}
	p, err := exec.LookPath(engineName)
	if err == nil {
		return p, nil
	}
	if !errors.Is(err, exec.ErrNotFound) && !errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("%s: %v; install it beside kubectl-crdver: %s", engineName, err, installHint)
	}
	looked = append(looked, "PATH")
	return "", fmt.Errorf("%s not found (looked in %s): kubectl-crdver runs it for every command but versions --sort and version; install both: %s",
		name, strings.Join(looked, " and "), installHint)
}

// runEngine runs the engine with argv's arguments, argv[0] kept (the engine answers completion
// when it is kubectl_complete-crdver), and returns its exit code. On unix it replaces this
// process (execEngine does not return then): signals, exit codes and the terminal are the
// engine's own.
func runEngine(argv []string) int {
	engine, err := findEngine()
	if err != nil {
		return report(os.Stderr, err)
	}
	return execEngine(engine, argv)
}
