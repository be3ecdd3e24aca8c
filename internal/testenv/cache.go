package testenv

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
)

// IsolateCache points the user cache folder (XDG_CACHE_HOME, which os.UserCacheDir and so
// migrate's default checkpoints honour) at a fresh temporary folder, so that tests never write
// into the user's home. The Go build cache and the control-plane binaries stay where they are
// (GOCACHE and CRDVER_TEST_ASSETS are pinned first). The returned function removes the folder
// and fails (returns an error) when the real kubectl-crdver cache changed meanwhile.
func IsolateCache() (check func() error, err error) {
	real, err := os.UserCacheDir()
	if err != nil {
		return nil, err
	}
	if os.Getenv("GOCACHE") == "" {
		out, err := exec.Command("go", "env", "GOCACHE").Output()
		if err != nil {
			return nil, fmt.Errorf("go env GOCACHE: %w", err)
		}
		if err := os.Setenv("GOCACHE", strings.TrimSpace(string(out))); err != nil {
			return nil, err
		}
	}
	if os.Getenv("KUBEBUILDER_ASSETS") == "" && os.Getenv("CRDVER_TEST_ASSETS") == "" {
		if root, err := RepoRoot(); err == nil {
			out, err := exec.Command("bash", filepath.Join(root, "hack", "build-test-binaries.sh"), "--dir").Output()
			if err != nil {
				return nil, fmt.Errorf("hack/build-test-binaries.sh --dir: %w", err)
			}
			if err := os.Setenv("CRDVER_TEST_ASSETS", strings.TrimSpace(string(out))); err != nil {
				return nil, err
			}
		}
	}
	watched := filepath.Join(real, "kubectl-crdver", "migrate")
	before := listing(watched)
	tmp, err := os.MkdirTemp("", "crdver-cache-")
	if err != nil {
		return nil, err
	}
	if err := os.Setenv("XDG_CACHE_HOME", tmp); err != nil {
		return nil, err
	}
	return func() error {
		os.RemoveAll(tmp)
		if after := listing(watched); after != before {
			return fmt.Errorf("the tests changed the user's cache %s:\nbefore:\n%s\nafter:\n%s", watched, before, after)
		}
		return nil
	}, nil
}

// listing names the files of dir with their sizes and modification times, one a line.
func listing(dir string) string {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return "(" + err.Error() + ")"
	}
	var lines []string
	for _, e := range entries {
		line := e.Name()
		if info, err := e.Info(); err == nil {
			line += fmt.Sprintf(" %d %s", info.Size(), info.ModTime().UTC().Format("2006-01-02T15:04:05.000000000"))
		}
		lines = append(lines, line)
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}
