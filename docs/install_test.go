package docs

import (
	"bytes"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestREADMELeadsWithWhatWorks: README's install section leads with the route that works today
// (from a clone, make install) and marks the others as for after the first release; it keeps
// exactly the two set-up commands.
func TestREADMELeadsWithWhatWorks(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	readme := string(b)
	install, _, _ := strings.Cut(readme[strings.Index(readme, "## Install"):], "\n## A first run")
	first := strings.Index(install, "make install")
	for _, later := range []string{"go install", "krew install", "releases page"} {
		i := strings.Index(install, later)
		if i < 0 {
			t.Errorf("README's install section does not mention %q", later)
			continue
		}
		if i < first {
			t.Errorf("README's install section offers %q before make install, the route that works", later)
		}
	}
	if !strings.Contains(strings.ToLower(install), "after the first release") {
		t.Errorf("README's install section does not say which routes work only after the first release")
	}
	for _, want := range []string{`export PATH="$(go env GOPATH)/bin:$PATH"`, `unknown command "crdver"`} {
		if !strings.Contains(install, want) {
			t.Errorf("README's install section lacks %q", want)
		}
	}
	setup, _, _ := strings.Cut(readme[strings.Index(readme, "## The two set-up commands"):], "\n## ")
	block := setup[strings.Index(setup, "```sh\n")+6:]
	block = block[:strings.Index(block, "```")]
	var cmds []string
	for _, l := range strings.Split(strings.TrimSpace(block), "\n") {
		cmd, _, _ := strings.Cut(l, "#")
		cmds = append(cmds, strings.TrimSpace(cmd))
	}
	if strings.Join(cmds, ";") != "make install;make test" {
		t.Errorf("README's set-up commands are %q, want make install and make test", cmds)
	}
}

// TestMakeInstallFromCleanClone: README's first command as a newcomer runs it, in a copy of the
// repository's files (what a clone holds) with a fresh HOME and the install folder not on
// PATH: make install says first what it builds and how long it takes, runs the bundled example
// and ends with the exact line that puts the folder on PATH; after that line (and only then)
// `kubectl crdver` works. The Go caches are the usual ones (warm): what a cold build costs is
// in docs/development.md.
func TestMakeInstallFromCleanClone(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the plugin (-short)")
	}
	for _, tool := range []string{"make", "kubectl", "git"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s is not installed", tool)
		}
	}
	clone := copyTracked(t, "..")
	home := t.TempDir()
	gobin := filepath.Join(home, "go", "bin")
	env := newcomerEnv(t, home)
	cmd := exec.Command("make", "install")
	cmd.Dir, cmd.Env = clone, env
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("make install: %v\n%s", err, out)
	}
	lines := strings.Split(strings.TrimRight(string(out), "\n"), "\n")
	if !strings.HasPrefix(lines[0], "Building kubectl-crdver and crdver-engine") || !strings.Contains(lines[0], gobin) || !strings.Contains(lines[1]+lines[2], "minutes") {
		t.Errorf("make install does not begin by saying what it builds, where and how long it takes:\n%s", out)
	}
	if !strings.Contains(string(out), "\n$ "+gobin+"/kubectl-crdver versions -f testdata/crds/crontab.yaml\nRANK   VERSION") {
		t.Errorf("make install does not run the example with the installed binary:\n%s", out)
	}
	exportLine := `export PATH="` + gobin + `:$PATH"`
	if last := lines[len(lines)-1]; last != exportLine {
		t.Errorf("make install ends with\n%s\nwant\n%s", last, exportLine)
	}
	example := "kubectl crdver versions -f testdata/crds/crontab.yaml"
	before := shell(t, clone, env, example)
	if before.err == nil || !strings.Contains(before.out, `unknown command "crdver"`) {
		t.Errorf("before the export line, %s: %v\n%s", example, before.err, before.out)
	}
	after := shell(t, clone, env, lines[len(lines)-1]+"\n"+example)
	if after.err != nil || !strings.HasPrefix(after.out, "RANK   VERSION") {
		t.Errorf("after the export line make install printed, %s: %v\n%s", example, after.err, after.out)
	}
}

type shellResult struct {
	out string
	err error
}

// shell runs script with bash in dir.
func shell(t *testing.T, dir string, env []string, script string) shellResult {
	t.Helper()
	cmd := exec.Command("bash", "-c", script)
	cmd.Dir, cmd.Env = dir, env
	out, err := cmd.CombinedOutput()
	return shellResult{string(out), err}
}

// newcomerEnv is a fresh HOME's environment: this one without Go's install folder on PATH,
// with the Go caches kept (they are what makes the build take seconds, not minutes).
func newcomerEnv(t *testing.T, home string) []string {
	t.Helper()
	goenv := func(name string) string {
		out, err := exec.Command("go", "env", name).Output()
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(string(out))
	}
	realBin := filepath.Join(goenv("GOPATH"), "bin")
	if gb := goenv("GOBIN"); gb != "" {
		realBin = gb
	}
	var path []string
	for _, p := range filepath.SplitList(os.Getenv("PATH")) {
		if p != realBin {
			path = append(path, p)
		}
	}
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		switch k {
		case "PATH", "HOME", "GOPATH", "GOBIN", "XDG_CACHE_HOME", "XDG_CONFIG_HOME", "KUBECONFIG", "GOFLAGS":
			continue
		}
		env = append(env, kv)
	}
	return append(env, "PATH="+strings.Join(path, string(os.PathListSeparator)), "HOME="+home,
		"GOCACHE="+goenv("GOCACHE"), "GOMODCACHE="+goenv("GOMODCACHE"), "GOTOOLCHAIN=local")
}

// copyTracked copies the files git tracks in the repository at root (as they are in the working
// tree) into a new folder: what a clone holds, without .git.
func copyTracked(t *testing.T, root string) string {
	t.Helper()
	cmd := exec.Command("git", "ls-files", "-z")
	cmd.Dir = root
	list, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(t.TempDir(), "kubectl-crdver")
	for _, f := range bytes.Split(bytes.TrimRight(list, "\x00"), []byte{0}) {
		name := string(f)
		if err := copyFile(filepath.Join(root, name), filepath.Join(dst, name)); err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
	}
	return dst
}

func copyFile(src, dst string) error {
	info, err := os.Lstat(src)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	if info.Mode()&os.ModeSymlink != 0 {
		target, err := os.Readlink(src)
		if err != nil {
			return err
		}
		return os.Symlink(target, dst)
	}
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, info.Mode().Perm())
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
