package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/creack/pty"
	"github.com/google/go-cmp/cmp"

	"github.com/crdver/kubectl-crdver/internal/testenv"
)

// binDir holds the built kubectl-crdver, crdver-engine beside it and the kubectl_complete-crdver link.
var binDir string

const testVersion = testenv.PluginVersion

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "crdver-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binDir = dir
	// Both executables, side by side as installed: kubectl-crdver and crdver-engine.
	if _, err := testenv.BuildPlugin(dir, testenv.BuildOptions{}); err != nil {
		fmt.Fprintln(os.Stderr, "building kubectl-crdver and crdver-engine:", err)
		os.Exit(1)
	}
	if err := os.Symlink("kubectl-crdver", filepath.Join(dir, "kubectl_complete-crdver")); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	// The binaries run here get a temporary cache folder (checkpoints of a migrate without
	// --checkpoint land there); the run fails when the user's real one changed.
	check, err := testenv.IsolateCache()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	if env != nil {
		env.Stop()
	}
	if err := check(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		code = 1
	}
	os.RemoveAll(dir)
	os.Exit(code)
}

// kubectl returns the path of the real kubectl, or skips the test.
func kubectl(t testing.TB) string {
	t.Helper()
	p, err := exec.LookPath("kubectl")
	if err != nil {
		t.Skip("kubectl is not on PATH: the plugin-discovery tests need the real kubectl")
	}
	return p
}

// runKubectl runs the real kubectl with the built plugin first on PATH.
func runKubectl(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	k := kubectl(t)
	cmd := exec.Command(k, args...)
	cmd.Dir = filepath.Join("..", "..")
	// Only the built plugin and kubectl on PATH: an installed kubectl-crdver elsewhere on the
	// user's PATH must neither shadow it nor make kubectl warn.
	cmd.Env = append(os.Environ(), "PATH="+binDir+string(os.PathListSeparator)+filepath.Dir(k), "KUBECONFIG="+filepath.Join(binDir, "no-kubeconfig"))
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		code = ee.ExitCode()
	case err != nil:
		t.Fatal(err)
	}
	return out.String(), errOut.String(), code
}

// TestThroughKubectl runs the built plugin as `kubectl crdver ...`, through the real kubectl's
// plugin discovery, and checks output and exit codes survive the trip.
func TestThroughKubectl(t *testing.T) {
	golden := func(name string) string {
		b, err := os.ReadFile(filepath.Join("..", "..", "plugin", "testdata", "golden", name))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	for _, tc := range []struct {
		args   []string
		code   int
		stdout string // exact, when set
		stderr string // contained, when set
	}{
		{args: []string{"crdver", "versions", "-f", "testdata/crds/crontab.yaml"}, stdout: golden("versions-crontab.txt")},
		{args: []string{"crdver", "versions", "-f", "testdata/crds/crontab.yaml", "-o", "json"}, stdout: golden("versions-crontab.json")},
		{args: []string{"crdver", "versions", "--sort", "v1", "v2beta1", "foo", "v2"}, stdout: "v2\nv1\nv2beta1\nfoo\n"},
		{args: []string{"crdver", "versions", "-f", "testdata/crds/crontab.yaml", "--can-remove", "v1beta1"}, code: 1, stderr: `error: crontabs.stable.example.com: version "v1beta1" is not safe to remove`},
		{args: []string{"crdver", "versions", "--bogus"}, code: 2, stderr: "error: unknown flag: --bogus"},
		{args: []string{"crdver", "versions", "-f", "testdata/nope.yaml"}, code: 2, stderr: "error: testdata/nope.yaml: no such file or directory"},
		{args: []string{"crdver", "version"}, stdout: ""},
		// answered by crdver-engine, which kubectl-crdver executes
		{args: []string{"crdver", "versions", "--sort", "v1", "-o", "wide"}, code: 2, stderr: "error: --sort prints version strings: -o wide does not apply"},
		{args: []string{"crdver", "explain", "-f", "testdata/crds/crontab.yaml"}, stderr: ""},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			stdout, stderr, code := runKubectl(t, tc.args...)
			if code != tc.code {
				t.Errorf("exit code %d, want %d (stderr %q)", code, tc.code, stderr)
			}
			if tc.stdout != "" {
				if diff := cmp.Diff(tc.stdout, stdout); diff != "" {
					t.Errorf("stdout (-want +got):\n%s", diff)
				}
			}
			if tc.stderr != "" && !strings.Contains(stderr, tc.stderr) {
				t.Errorf("stderr %q does not contain %q", stderr, tc.stderr)
			}
			if strings.Contains(stderr, "goroutine ") || strings.Contains(stderr, "panic") {
				t.Errorf("stack trace on stderr: %s", stderr)
			}
		})
	}
}

// TestVersionStamped: the version set with -ldflags at build time, and the Kubernetes library
// version from the build info, are what `kubectl crdver version` prints.
func TestVersionStamped(t *testing.T) {
	stdout, stderr, code := runKubectl(t, "crdver", "version")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	for _, want := range []string{"kubectl-crdver " + testVersion, "Kubernetes libraries v0.37."} {
		if !strings.Contains(stdout, want) {
			t.Errorf("version output %q lacks %q", stdout, want)
		}
	}
}

// TestPluginList: kubectl's plugin discovery finds the binary (and raises no warning about it),
// and does not take crdver-engine, beside it, for a plugin.
func TestPluginList(t *testing.T) {
	stdout, stderr, _ := runKubectl(t, "plugin", "list")
	if !strings.Contains(stdout, filepath.Join(binDir, "kubectl-crdver")) {
		t.Errorf("kubectl plugin list does not show the plugin:\n%s\n%s", stdout, stderr)
	}
	if strings.Contains(stdout+stderr, "crdver-engine") {
		t.Errorf("kubectl plugin list mentions crdver-engine:\n%s\n%s", stdout, stderr)
	}
	if strings.Contains(stderr, "kubectl-crdver") && strings.Contains(stderr, "warning") {
		t.Errorf("kubectl warns about the plugin: %s", stderr)
	}
}

// TestKubectlCompletion: kubectl (>= 1.26) completes `kubectl crdver ...` by calling
// kubectl_complete-crdver, here a link to the plugin binary that answers by its name.
func TestKubectlCompletion(t *testing.T) {
	stdout, stderr, code := runKubectl(t, "__complete", "crdver", "ver")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var words []string
	for _, l := range strings.Split(strings.TrimSpace(stdout), "\n") {
		if !strings.HasPrefix(l, ":") {
			words = append(words, strings.SplitN(l, "\t", 2)[0])
		}
	}
	sort.Strings(words)
	if diff := cmp.Diff([]string{"version", "versions"}, words); diff != "" {
		t.Errorf("completions of `kubectl crdver ver` (-want +got):\n%s\nfull output:\n%s", diff, stdout)
	}
	stdout, _, _ = runKubectl(t, "__complete", "crdver", "versions", "-o", "")
	for _, want := range []string{"wide", "json", "yaml"} {
		if !strings.Contains(stdout, want+"\n") {
			t.Errorf("completions of -o lack %q:\n%s", want, stdout)
		}
	}
}

// TestCompletionCommand: the binary run directly generates cobra's completion scripts, and
// kubectl's plugin completion completes version flags from the CRD file.
func TestCompletionCommand(t *testing.T) {
	for shell, want := range map[string]string{
		"bash":       "# bash completion V2 for kubectl-crdver",
		"zsh":        "#compdef kubectl-crdver",
		"fish":       "# fish completion for kubectl-crdver",
		"powershell": "# powershell completion for kubectl-crdver",
	} {
		out, err := exec.Command(filepath.Join(binDir, "kubectl-crdver"), "completion", shell).Output()
		if err != nil {
			t.Errorf("completion %s: %v", shell, err)
			continue
		}
		if !strings.Contains(string(out), want) {
			t.Errorf("completion %s does not contain %q:\n%.300s", shell, want, out)
		}
	}
	crdFile, err := filepath.Abs(filepath.Join("..", "..", "testdata", "crds", "crontab.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	stdout, stderr, code := runKubectl(t, "__complete", "crdver", "versions", "-f", crdFile, "--can-remove", "")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	for _, want := range []string{"v1\n", "v1beta1\n", "v1alpha1\n"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("completions of --can-remove lack %q:\n%s", want, stdout)
		}
	}
}

// TestDiffColourOnTerminal: preview --diff colours removed lines red and added lines green when
// stdout is a terminal (--color=auto), and not with NO_COLOR set or --color=never.
func TestDiffColourOnTerminal(t *testing.T) {
	repo := filepath.Join("..", "..")
	onTerminal := func(env []string, extra ...string) string {
		t.Helper()
		args := append([]string{"preview", "-f", filepath.Join(repo, "testdata", "preview", "widgets.yaml"),
			"--crd-file", filepath.Join(repo, "testdata", "crds", "widget.yaml"), "--diff"}, extra...)
		cmd := exec.Command(filepath.Join(binDir, "kubectl-crdver"), args...)
		cmd.Env = append(os.Environ(), env...)
		cmd.Stderr = io.Discard
		screen, _ := runOnTerminal(t, cmd, func(tty *os.File) { cmd.Stdout = tty }, time.Minute) // exit 1: some objects are rejected
		return screen
	}
	const red, green = "\x1b[31m-", "\x1b[32m+"
	out := onTerminal(nil)
	if !strings.Contains(out, red) || !strings.Contains(out, green) || !strings.Contains(out, "--- input") {
		t.Errorf("no red/green diff on a terminal:\n%q", out)
	}
	for name, o := range map[string]string{
		"NO_COLOR=1":    onTerminal([]string{"NO_COLOR=1"}),
		"--color=never": onTerminal(nil, "--color=never"),
	} {
		if strings.Contains(o, "\x1b[") || !strings.Contains(o, "--- input") {
			t.Errorf("%s: want a diff without colour:\n%q", name, o)
		}
	}
	// not a terminal: auto gives no colour, always does
	plain, _ := exec.Command(filepath.Join(binDir, "kubectl-crdver"), "preview", "-f", filepath.Join(repo, "testdata", "preview", "widgets.yaml"),
		"--crd-file", filepath.Join(repo, "testdata", "crds", "widget.yaml"), "--diff").Output()
	forced, _ := exec.Command(filepath.Join(binDir, "kubectl-crdver"), "preview", "-f", filepath.Join(repo, "testdata", "preview", "widgets.yaml"),
		"--crd-file", filepath.Join(repo, "testdata", "crds", "widget.yaml"), "--diff", "--color=always").Output()
	if strings.Contains(string(plain), "\x1b[") {
		t.Errorf("colour in a pipe with --color=auto:\n%q", plain)
	}
	if !strings.Contains(string(forced), red) {
		t.Errorf("no colour with --color=always:\n%q", forced)
	}
}

// runOnTerminal runs cmd with a pseudo-terminal that attach connects (stdout or stderr) and
// returns what the terminal showed and how cmd ended; it skips the test without a pty and fails
// it when cmd runs past timeout.
func runOnTerminal(t *testing.T, cmd *exec.Cmd, attach func(tty *os.File), timeout time.Duration) (string, error) {
	t.Helper()
	ptmx, tty, err := pty.Open()
	if err != nil {
		t.Skipf("no pseudo-terminal available: %v", err)
	}
	defer ptmx.Close()
	if err := pty.Setsize(ptmx, &pty.Winsize{Rows: 24, Cols: 160}); err != nil {
		t.Fatal(err)
	}
	attach(tty)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	tty.Close()
	var screen bytes.Buffer
	copied := make(chan struct{})
	go func() { _, _ = io.Copy(&screen, ptmx); close(copied) }()
	waitErr := make(chan error, 1)
	go func() { waitErr <- cmd.Wait() }()
	select {
	case err = <-waitErr:
	case <-time.After(timeout):
		_ = cmd.Process.Kill()
		t.Fatalf("%s did not finish within %s", strings.Join(cmd.Args, " "), timeout)
	}
	select {
	case <-copied:
	case <-time.After(5 * time.Second):
	}
	return screen.String(), err
}
