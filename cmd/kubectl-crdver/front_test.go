package main

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/crdver/kubectl-crdver/internal/testenv"
)

// result is how a process ended: its output and exit code.
type result struct {
	stdout, stderr string
	code           int
}

// runBin runs bin with args from the repository root, with env added to this process's
// environment, and stdout sent to stdout when it is set (e.g. /dev/full).
func runBin(t *testing.T, bin string, env []string, stdout *os.File, args ...string) result {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Dir = filepath.Join("..", "..")
	cmd.Env = append(os.Environ(), append([]string{"KUBECONFIG=" + filepath.Join(binDir, "no-kubeconfig")}, env...)...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if stdout != nil {
		cmd.Stdout = stdout
	}
	err := cmd.Run()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatalf("%s %s: %v", bin, strings.Join(args, " "), err)
	}
	return result{stdout: out.String(), stderr: errOut.String(), code: cmd.ProcessState.ExitCode()}
}

// TestFrontAnswersAsTheEngine: for the argument vectors kubectl-crdver answers by itself
// (versions --sort, version) and for their neighbours, which it must hand to crdver-engine, the
// two executables run directly print the same bytes on stdout and stderr and exit with the same
// code. light says which of them the front answers itself (checked on light too, so that a
// vector the front hands over by mistake is seen, not hidden by the identical output).
func TestFrontAnswersAsTheEngine(t *testing.T) {
	many := strings.Fields("v10 v2 v1 v11beta2 v10beta3 v3beta1 v12alpha1 v11alpha2 foo1 foo10 v1 V1 v1.2 v01 v1beta v1alpha0 v0 zeta alpha")
	for _, tc := range []struct {
		args  []string
		light bool
	}{
		{[]string{"versions", "--sort", "v1", "v2beta1", "foo"}, true},
		{[]string{"versions", "--sort", "v1"}, true},
		{append([]string{"versions", "--sort"}, many...), true},
		{append(append([]string{"versions"}, many...), "--sort"), true},
		{[]string{"versions", "v2", "--sort", "v1", "v3alpha1"}, true},
		{[]string{"versions", "--sort", "--sort", "v1", "v1"}, true},
		{[]string{"versions", "--sort", "", "v1", "ünïcödé", "two words", "a\tb", "v1\nv2", "*", "versions", "version", "help"}, true},
		{[]string{"versions", "--sort", "v1", "v2beta1", "-o", "json"}, true},
		{[]string{"versions", "--sort", "v1", "v2beta1", "-o", "yaml"}, true},
		{[]string{"versions", "-ojson", "--sort", "v1", "v2beta1"}, true},
		{[]string{"versions", "--sort", "-o=yaml", "v1", "v2beta1"}, true},
		{[]string{"versions", "--sort", "--output", "json", "v1", "x: y", "z -", "null", "'q'"}, true},
		{[]string{"versions", "--sort", "--output=yaml", "v1", "x: y", "z -", "null", "'q'", "true", "1"}, true},
		{[]string{"versions", "--sort", "-o", "yaml", "-o", "json", "v1"}, true},
		{[]string{"versions", "--sort", "-o", "json", "-o", "wide", "v1"}, false},
		{[]string{"versions", "--sort"}, false},
		{[]string{"versions", "--sort", "-o", "json"}, false},
		{[]string{"versions", "v1", "v2"}, false},
		{[]string{"versions"}, false},
		{[]string{"versions", "--sort", "-o", "wide", "v1"}, false},
		{[]string{"versions", "--sort", "-o", "name", "v1"}, false},
		{[]string{"versions", "--sort", "-o", "markdown", "v1"}, false},
		{[]string{"versions", "--sort", "-o", "", "v1"}, false},
		{[]string{"versions", "--sort", "-o", "JSON", "v1"}, false},
		{[]string{"versions", "--sort", "-o", "table", "v1"}, false},
		{[]string{"versions", "--sort", "-o=", "v1"}, false},
		{[]string{"version", "-o", "table"}, false},
		{[]string{"versions", "--sort", "v1", "-o"}, false},
		{[]string{"versions", "--sort", "--no-headers", "v1"}, false},
		{[]string{"versions", "--sort", "--all", "v1"}, false},
		{[]string{"versions", "--sort", "-f", "testdata/crds/crontab.yaml", "v1"}, false},
		{[]string{"versions", "--sort", "--can-remove", "v1", "v2"}, false},
		{[]string{"versions", "--sort", "--bogus", "v1"}, false},
		{[]string{"versions", "--sort", "-x", "v1"}, false},
		{[]string{"versions", "--sort", "--", "v1", "-v2"}, false},
		{[]string{"versions", "--sort", "-", "v1"}, false},
		{[]string{"versions", "--sort=true", "v1"}, false},
		{[]string{"versions", "--sort=false", "v1"}, false},
		{[]string{"versions", "--sort", "--kubeconfig", "/nowhere", "v1"}, false},
		{[]string{"versions", "--sort", "-v", "9", "v1"}, false},
		{[]string{"versions", "--sort", "v1", "-h"}, false},
		{[]string{"versions", "--help"}, true},
		{[]string{"Versions", "--sort", "v1"}, false},
		{[]string{"version"}, true},
		{[]string{"version", "-o", "json"}, true},
		{[]string{"version", "-o", "yaml"}, true},
		{[]string{"version", "--output=json"}, true},
		{[]string{"version", "-oyaml"}, true},
		{[]string{"version", "extra"}, false},
		{[]string{"version", "--sort"}, false},
		{[]string{"version", "--no-headers"}, false},
		{[]string{"version", "-o", "wide"}, false},
		{[]string{"version", "-o"}, false},
		{[]string{"version", "--help"}, true},
		{[]string{"version", "--context", "x"}, false},
		{[]string{}, true},
		{[]string{"--help"}, true},
		{[]string{"-h"}, true},
		{[]string{"help"}, true},
		{[]string{"help", "versions"}, true},
		{[]string{"help", "migrate", "status"}, true},
		{[]string{"migrate", "status", "--help"}, true},
		{[]string{"plan", "-h"}, true},
		{[]string{"preview", "--help"}, true},
		{[]string{"completion", "bash", "--help"}, true},
		{[]string{"help", "help"}, true},
		{[]string{"nosuch", "--help"}, false},
		{[]string{"help", "nosuch"}, false},
		{[]string{"help", "--help"}, false},
		{[]string{"--help", "plan"}, false},
		{[]string{"plan", "--kubeconfig", "x", "--help"}, false},
		{[]string{"plan", "--help", "-h"}, false},
		{[]string{"", "--help"}, false},
		{[]string{"-o", "json", "version"}, false},
	} {
		name := strings.Join(tc.args, " ")
		if len(name) > 80 {
			name = name[:80]
		}
		t.Run(name, func(t *testing.T) {
			// The vectors are independent runs of the two executables: two at a time.
			t.Parallel()
			if got := light(append([]string{"kubectl-crdver"}, tc.args...)) != nil; got != tc.light {
				t.Errorf("answered by kubectl-crdver itself: %v, want %v", got, tc.light)
			}
			front := runBin(t, filepath.Join(binDir, testenv.PluginFront), nil, nil, tc.args...)
			engine := runBin(t, filepath.Join(binDir, testenv.PluginEngine), nil, nil, tc.args...)
			if diff := cmp.Diff(engine, front, cmp.AllowUnexported(result{})); diff != "" {
				t.Errorf("kubectl-crdver vs crdver-engine (-engine +front):\n%s", diff)
			}
			if front.stdout == "" && front.stderr == "" {
				t.Errorf("no output at all (exit %d)", front.code)
			}
		})
	}
	// Help texts hold what the engine's flags take from the machine: the same in both.
	for _, env := range [][]string{
		{"HOME=/home/someone-else"},
		{"HOME="},
		{"KUBECACHEDIR=/var/cache/kube", "HOME=/root"},
		{"GOMAXPROCS=3"},
	} {
		t.Run("help with "+strings.Join(env, " "), func(t *testing.T) {
			t.Parallel()
			for _, args := range [][]string{{"--help"}, {"preview", "--help"}} {
				front := runBin(t, filepath.Join(binDir, testenv.PluginFront), env, nil, args...)
				engine := runBin(t, filepath.Join(binDir, testenv.PluginEngine), env, nil, args...)
				if diff := cmp.Diff(engine, front, cmp.AllowUnexported(result{})); diff != "" {
					t.Errorf("%v: kubectl-crdver vs crdver-engine (-engine +front):\n%s", args, diff)
				}
			}
		})
	}
	// A write that fails (a full disk): the same error line and exit code 3.
	t.Run("write to a full disk", func(t *testing.T) { t.Parallel(); frontFailedWrite(t) })
}

// frontFailedWrite: a write that fails (a full disk) gives the same error line and exit code 3
// from both executables.
func frontFailedWrite(t *testing.T) {
	full, err := os.OpenFile("/dev/full", os.O_WRONLY, 0)
	if err != nil {
		t.Logf("no /dev/full (%v): the failed-write case is not checked", err)
		return
	}
	defer full.Close()
	for _, args := range [][]string{{"versions", "--sort", "v1", "v2"}, {"version", "-o", "json"}} {
		front := runBin(t, filepath.Join(binDir, testenv.PluginFront), nil, full, args...)
		engine := runBin(t, filepath.Join(binDir, testenv.PluginEngine), nil, full, args...)
		if diff := cmp.Diff(engine, front, cmp.AllowUnexported(result{})); diff != "" || front.code != 3 {
			t.Errorf("%s > /dev/full: exit %d, kubectl-crdver vs crdver-engine (-engine +front):\n%s", strings.Join(args, " "), front.code, diff)
		}
	}
}

// install puts the named files of binDir into a new folder (a copy, or a symbolic link to
// binDir's file when the name is given as "link:NAME"), and returns the folder.
func install(t *testing.T, names ...string) string {
	t.Helper()
	dir := t.TempDir()
	for _, n := range names {
		if target, ok := strings.CutPrefix(n, "link:"); ok {
			if err := os.Symlink(filepath.Join(binDir, testenv.PluginFront), filepath.Join(dir, target)); err != nil {
				t.Fatal(err)
			}
			continue
		}
		b, err := os.ReadFile(filepath.Join(binDir, n))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, n), b, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// TestFrontWithoutEngine: alone, kubectl-crdver still answers what it answers itself; every
// other command fails with one error line that names the missing file, where it was looked
// for and how to install both, and exit code 3 (could not complete).
func TestFrontWithoutEngine(t *testing.T) {
	dir := install(t, testenv.PluginFront)
	env := []string{"PATH=" + t.TempDir()} // no crdver-engine on PATH either
	bin := filepath.Join(dir, testenv.PluginFront)
	if r := runBin(t, bin, env, nil, "versions", "--sort", "v1", "v2beta1", "v2"); r.code != 0 || r.stdout != "v2\nv1\nv2beta1\n" || r.stderr != "" {
		t.Errorf("versions --sort without the engine: %+v", r)
	}
	if r := runBin(t, bin, env, nil, "version"); r.code != 0 || !strings.Contains(r.stdout, testVersion) {
		t.Errorf("version without the engine: %+v", r)
	}
	r := runBin(t, bin, env, nil, "versions", "-f", "testdata/crds/crontab.yaml")
	if r.code != 3 || r.stdout != "" || strings.Count(r.stderr, "\n") != 1 || !strings.HasPrefix(r.stderr, "error: ") {
		t.Fatalf("without crdver-engine: exit %d, stdout %q, stderr %q; want exit 3 and one error line", r.code, r.stdout, r.stderr)
	}
	for _, want := range []string{"crdver-engine not found", filepath.Join(dir, testenv.PluginEngine), "PATH", "from a clone, make install"} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("error %q does not say %q", r.stderr, want)
		}
	}
}

// TestFrontFindsEngine: kubectl-crdver runs crdver-engine for the other commands when it is
// beside the file a link points to (krew links bin/kubectl-crdver into its store; completion
// runs the kubectl_complete-crdver link), or else on PATH.
func TestFrontFindsEngine(t *testing.T) {
	want := runBin(t, filepath.Join(binDir, testenv.PluginEngine), nil, nil, "versions", "-f", "testdata/crds/crontab.yaml", "-o", "json")
	if want.code != 0 || !strings.Contains(want.stdout, `"storageVersion": "v1"`) {
		t.Fatalf("crdver-engine versions -f crontab.yaml: %+v", want)
	}
	empty := []string{"PATH=" + t.TempDir()}
	links := install(t, "link:kubectl-crdver", "link:kubectl_complete-crdver")
	alone := install(t, testenv.PluginFront)
	for name, c := range map[string]struct {
		bin string
		env []string
	}{
		"beside the link's target": {filepath.Join(links, "kubectl-crdver"), empty},
		"on PATH":                  {filepath.Join(alone, "kubectl-crdver"), []string{"PATH=" + binDir}},
	} {
		if got := runBin(t, c.bin, c.env, nil, "versions", "-f", "testdata/crds/crontab.yaml", "-o", "json"); !cmp.Equal(want, got, cmp.AllowUnexported(result{})) {
			t.Errorf("%s: versions -f crontab.yaml through kubectl-crdver: %+v, want %+v", name, got, want)
		}
	}
	// The completion link: the engine answers __complete because argv[0] is kept.
	r := runBin(t, filepath.Join(links, "kubectl_complete-crdver"), empty, nil, "versions", "--so")
	if r.code != 0 || !strings.Contains(r.stdout, "--sort\t") {
		t.Errorf("kubectl_complete-crdver versions --so: %+v, want the --sort flag completed", r)
	}
	r = runBin(t, filepath.Join(links, "kubectl_complete-crdver"), empty, nil, "version", "")
	if r.code != 0 || !strings.HasPrefix(r.stdout, ":") {
		t.Errorf("kubectl_complete-crdver version '': %+v, want completions (not the version)", r)
	}
}

// TestFrontLinksNoHeavyPackages keeps kubectl-crdver small: none of the packages whose
// initialisers the split keeps out of `versions --sort` (the API server's, client-go's but its
// one-variable version package, cli-runtime, cobra, klog, plugin) may come back through an
// import (docs/benchmarks.md#start-up).
func TestFrontLinksNoHeavyPackages(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	deps := strings.Fields(string(out))
	for _, p := range deps {
		for _, heavy := range []string{"k8s.io/apiextensions-apiserver", "k8s.io/apiserver", "k8s.io/cli-runtime", "k8s.io/client-go/", "k8s.io/component-base",
			"k8s.io/kube-openapi", "k8s.io/klog", "github.com/spf13/", "github.com/google/cel-go", "github.com/prometheus", "google.golang.org/protobuf",
			"github.com/crdver/kubectl-crdver/plugin", "github.com/crdver/kubectl-crdver/printers", "k8s.io/apimachinery/pkg/runtime"} {
			if strings.HasPrefix(p, heavy) && p != "k8s.io/client-go/pkg/version" {
				t.Errorf("kubectl-crdver links %s", p)
			}
		}
	}
	if len(deps) > 100 {
		t.Errorf("kubectl-crdver links %d packages (82 at the split), want at most 100", len(deps))
	}
}
