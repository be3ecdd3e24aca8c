// Package action holds the test of the GitHub Action's script (plan-pr.sh, called by the
// repository's action.yml).
package action

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/crdver/kubectl-crdver/internal/testenv"
)

// repo is a temporary git repository whose commits hold releases of a testdata release.
type repo struct {
	t   *testing.T
	dir string
}

func newRepo(t *testing.T) *repo {
	r := &repo{t: t, dir: t.TempDir()}
	r.git("init", "-q")
	return r
}

func (r *repo) git(args ...string) string {
	r.t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = r.dir
	cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com", "GIT_COMMITTER_NAME=t",
		"GIT_COMMITTER_EMAIL=t@example.com", "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		r.t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return strings.TrimSpace(string(out))
}

// commit copies the files of each source directory into the repository directory it maps to
// (replacing what was there) and commits; it returns the commit.
func (r *repo) commit(msg string, dirs map[string]string) string {
	r.t.Helper()
	for dst, src := range dirs {
		target := filepath.Join(r.dir, dst)
		if err := os.RemoveAll(target); err != nil {
			r.t.Fatal(err)
		}
		if err := os.MkdirAll(target, 0o755); err != nil {
			r.t.Fatal(err)
		}
		entries, err := os.ReadDir(src)
		if err != nil {
			r.t.Fatal(err)
		}
		for _, e := range entries {
			b, err := os.ReadFile(filepath.Join(src, e.Name()))
			if err != nil {
				r.t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(target, e.Name()), b, 0o644); err != nil {
				r.t.Fatal(err)
			}
		}
	}
	r.git("add", "-A")
	r.git("commit", "-q", "--allow-empty", "-m", msg)
	return r.git("rev-parse", "HEAD")
}

// releaseTag is the version stamped into the plugin the tests build (the install step's
// archive is named by it).
const releaseTag = testenv.PluginVersion

// built is the plugin the package's tests share: built once (linking both executables takes
// seconds each on 2 cores), removed by TestMain.
var built struct {
	once     sync.Once
	dir, bin string
	err      error
}

func TestMain(m *testing.M) {
	code := m.Run()
	if built.dir != "" {
		os.RemoveAll(built.dir)
	}
	os.Exit(code)
}

// buildPlugin builds kubectl-crdver and crdver-engine, beside it, from this checkout, once for
// the package (releaseTag stamped as the version), and returns kubectl-crdver's path.
func buildPlugin(t *testing.T) string {
	t.Helper()
	built.once.Do(func() {
		if built.dir, built.err = os.MkdirTemp("", "crdver-action-bin-"); built.err == nil {
			built.bin, built.err = testenv.BuildPlugin(built.dir, testenv.BuildOptions{})
		}
	})
	if built.err != nil {
		t.Fatal(built.err)
	}
	return built.bin
}

type runResult struct {
	code    int
	comment string
	stderr  string
}

// runScript runs plan-pr.sh in the repository, with the comment written to a file (no posting,
// no download: CRDVER is the binary built here).
func (r *repo) runScript(bin string, env ...string) runResult {
	r.t.Helper()
	script, err := filepath.Abs("plan-pr.sh")
	if err != nil {
		r.t.Fatal(err)
	}
	comment := filepath.Join(r.t.TempDir(), "comment.md")
	cmd := exec.Command("bash", script)
	cmd.Dir = r.dir
	cmd.Env = append(os.Environ(), append([]string{"CRDVER=" + bin, "COMMENT_FILE=" + comment, "GITHUB_TOKEN=", "PR_NUMBER=", "HOME=" + r.t.TempDir()}, env...)...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		r.t.Fatal(err)
	}
	b, _ := os.ReadFile(comment)
	return runResult{code: code, comment: string(b), stderr: stderr.String() + string(out)}
}

const releases = "../../testdata/releases/cert-manager"

// TestPlanPR runs the action's script over the revisions of a repository holding cert-manager
// v1.5.5, v1.6.3 and v1.7.3 in turn (config/crds) and its sample objects (samples/), with the
// binary built from this checkout: v1.5.5 → v1.6.3 changes the three CRDs, safely (exit 0 whatever --fail-on), v1.6.3 →
// v1.7.3 removes versions whose storedVersions the files cannot tell (unknown: exit 1 unless
// FAIL_ON=never), a commit that changes no CRD plans nothing, and a bad FAIL_ON is a usage error.
func TestPlanPR(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not installed")
	}
	bin := buildPlugin(t)
	r := newRepo(t)
	samples := filepath.Join(releases, "samples")
	c1 := r.commit("cert-manager v1.5.5", map[string]string{"config/crds": filepath.Join(releases, "v1.5.5"), "samples": samples})
	c2 := r.commit("cert-manager v1.6.3", map[string]string{"config/crds": filepath.Join(releases, "v1.6.3")})
	c3 := r.commit("cert-manager v1.7.3", map[string]string{"config/crds": filepath.Join(releases, "v1.7.3")})
	if err := os.WriteFile(filepath.Join(r.dir, "README.md"), []byte("docs only\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r.git("add", "-A")
	r.git("commit", "-q", "-m", "docs")
	c4 := r.git("rev-parse", "HEAD")

	env := func(base, head, failOn string) []string {
		return []string{"BASE=" + base, "HEAD=" + head, "CRDS=config/crds", "OBJECTS=samples", "FAIL_ON=" + failOn}
	}
	for _, tc := range []struct {
		name, base, head, failOn string
		code                     int
		comment                  []string
	}{
		{"safe", c1, c2, "breaking", 0, []string{"## kubectl crdver plan: **safe**", "3 CRDs: 3 safe.", "`certificaterequests.cert-manager.io` | update | **safe**", "`certificates.cert-manager.io` | update | **safe**", "`issuers.cert-manager.io` | update | **safe**"}},
		{"safe-stricter", c1, c2, "stricter", 0, []string{"## kubectl crdver plan: **safe**"}},
		{"unknown", c2, c3, "breaking", 1, []string{"## kubectl crdver plan: **unknown**", "3 CRDs: 3 unknown.", "- **unknown:** status.storedVersions of the live CRD is not known", "objects with findings"}},
		{"unknown-stricter", c2, c3, "stricter", 1, []string{"## kubectl crdver plan: **unknown**"}},
		{"unknown-never", c2, c3, "never", 0, []string{"## kubectl crdver plan: **unknown**"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := r.runScript(bin, env(tc.base, tc.head, tc.failOn)...)
			if res.code != tc.code {
				t.Errorf("exit %d, want %d; stderr:\n%s", res.code, tc.code, res.stderr)
			}
			if !strings.HasPrefix(res.comment, "## kubectl crdver plan: ") {
				t.Errorf("the comment does not start with the verdict:\n%.300s", res.comment)
			}
			for _, w := range tc.comment {
				if !strings.Contains(res.comment, w) {
					t.Errorf("the comment lacks %q:\n%s", w, res.comment)
				}
			}
			// The runbook names the repository's files, not the script's temporary copies.
			if strings.Contains(res.comment, os.TempDir()) || !strings.Contains(res.comment, "-f config/crds/crd-certificaterequests.yaml") {
				t.Errorf("the comment names temporary files, or not config/crds/crd-certificaterequests.yaml:\n%s", res.comment)
			}
			if len(res.comment) > 65536 {
				t.Errorf("the comment is %d bytes, over GitHub's limit", len(res.comment))
			}
		})
	}

	t.Run("no-crd-changed", func(t *testing.T) {
		res := r.runScript(bin, env(c3, c4, "breaking")...)
		if res.code != 0 || res.comment != "" || !strings.Contains(res.stderr, "no CustomResourceDefinition changed") {
			t.Errorf("exit %d, comment %q, output %q; want exit 0, no comment, and a line saying no CRD changed", res.code, res.comment, res.stderr)
		}
	})
	t.Run("created", func(t *testing.T) {
		// Every CRD is new at c1: planned as creates against an empty --old-file.
		empty := r.git("hash-object", "-t", "tree", "/dev/null")
		res := r.runScript(bin, env(empty, c1, "breaking")...)
		if res.code != 0 || strings.Count(res.comment, "| create | **safe**") != 3 {
			t.Errorf("exit %d; want 0 and creates:\n%s\n%s", res.code, res.comment, res.stderr)
		}
	})
	t.Run("bad-fail-on", func(t *testing.T) {
		res := r.runScript(bin, env(c1, c2, "sometimes")...)
		if res.code != 2 || !strings.Contains(res.stderr, "error: FAIL_ON=sometimes") {
			t.Errorf("exit %d, stderr %q; want 2 and one error line", res.code, res.stderr)
		}
	})
}

// TestActionCallsTheScript: action.yml is a composite action whose plan step runs plan-pr.sh
// with every variable the script reads, and installs the release archive .goreleaser.yaml names.
func TestActionCallsTheScript(t *testing.T) {
	raw, err := os.ReadFile("../../action.yml")
	if err != nil {
		t.Fatal(err)
	}
	var a struct {
		Inputs map[string]any `json:"inputs"`
		Runs   struct {
			Using string `json:"using"`
			Steps []struct {
				Run string            `json:"run"`
				Env map[string]string `json:"env"`
			} `json:"steps"`
		} `json:"runs"`
	}
	if err := yaml.Unmarshal(raw, &a); err != nil {
		t.Fatal(err)
	}
	if a.Runs.Using != "composite" || len(a.Runs.Steps) < 2 {
		t.Fatalf("runs.using %q with %d steps, want a composite action with install and plan", a.Runs.Using, len(a.Runs.Steps))
	}
	for _, in := range []string{"version", "crds", "objects", "fail-on", "github-token"} {
		if _, ok := a.Inputs[in]; !ok {
			t.Errorf("action.yml has no input %q", in)
		}
	}
	install, planStep := a.Runs.Steps[0], a.Runs.Steps[1]
	if !strings.Contains(install.Run, `kubectl-crdver_${VERSION}_${platform}.tar.gz`) || !strings.Contains(install.Run, "releases/download/${VERSION}") {
		t.Errorf("the install step does not download the goreleaser archive kubectl-crdver_<tag>_<os>_<arch>.tar.gz:\n%s", install.Run)
	}
	if !strings.Contains(planStep.Run, "hack/action/plan-pr.sh") {
		t.Errorf("the plan step does not run hack/action/plan-pr.sh:\n%s", planStep.Run)
	}
	script, err := os.ReadFile("plan-pr.sh")
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range []string{"BASE", "HEAD", "CRDS", "OBJECTS", "FAIL_ON", "KUBE_VERSION", "CRDVER", "GITHUB_TOKEN", "PR_NUMBER"} {
		if _, ok := planStep.Env[v]; !ok {
			t.Errorf("the plan step does not set %s", v)
		}
		if !strings.Contains(string(script), "$"+v) && !strings.Contains(string(script), "${"+v) {
			t.Errorf("plan-pr.sh does not read %s", v)
		}
	}
}

// TestActionInstallsBothExecutables runs the install step of action.yml against a release
// archive built from this checkout (curl is a stand-in that serves the archive and its
// checksums from a folder): both executables land in the folder added to PATH, and a command
// that kubectl-crdver hands to crdver-engine works from there.
func TestActionInstallsBothExecutables(t *testing.T) {
	if runtime.GOOS != "linux" && runtime.GOOS != "darwin" {
		t.Skip("the install step is a bash script for Linux and macOS runners")
	}
	raw, err := os.ReadFile("../../action.yml")
	if err != nil {
		t.Fatal(err)
	}
	var a struct {
		Runs struct {
			Steps []struct {
				Run string `json:"run"`
			} `json:"steps"`
		} `json:"runs"`
	}
	if err := yaml.Unmarshal(raw, &a); err != nil || len(a.Runs.Steps) == 0 {
		t.Fatalf("action.yml: %v", err)
	}
	const tag = releaseTag
	runnerOS, runnerArch := map[string]string{"linux": "Linux", "darwin": "macOS"}[runtime.GOOS], map[string]string{"amd64": "X64", "arm64": "ARM64"}[runtime.GOARCH]
	if runnerArch == "" {
		t.Skipf("no release for %s", runtime.GOARCH)
	}
	served := t.TempDir()
	// The package's build (built as releases are: testenv.BuildPlugin), packed as
	// goreleaser names the archive.
	bin := buildPlugin(t)
	archive := "kubectl-crdver_" + tag + "_" + runtime.GOOS + "_" + runtime.GOARCH + ".tar.gz"
	pack := exec.Command("tar", "-czf", filepath.Join(served, archive), "-C", filepath.Dir(bin), testenv.PluginFront, testenv.PluginEngine)
	if out, err := pack.CombinedOutput(); err != nil {
		t.Fatalf("tar: %v\n%s", err, out)
	}
	sum := exec.Command("sh", "-c", "sha256sum "+archive+" > checksums.txt || shasum -a 256 "+archive+" > checksums.txt")
	sum.Dir = served
	if out, err := sum.CombinedOutput(); err != nil {
		t.Fatalf("checksums: %v\n%s", err, out)
	}
	// curl -fsSL --retry 3 -o FILE URL: copy the served file named like the URL's last part.
	tools := t.TempDir()
	fakeCurl := "#!/bin/sh\nwhile [ $# -gt 1 ]; do case $1 in -o) out=$2; shift;; esac; shift; done\ncp \"" + served + "/${1##*/}\" \"$out\"\n"
	if err := os.WriteFile(filepath.Join(tools, "curl"), []byte(fakeCurl), 0o755); err != nil {
		t.Fatal(err)
	}
	runner := t.TempDir()
	ghPath := filepath.Join(runner, "github_path")
	step := exec.Command("bash", "-c", a.Runs.Steps[0].Run)
	step.Env = append(os.Environ(), "PATH="+tools+string(os.PathListSeparator)+os.Getenv("PATH"), "VERSION="+tag,
		"RUNNER_OS="+runnerOS, "RUNNER_ARCH="+runnerArch, "RUNNER_TEMP="+runner, "GITHUB_PATH="+ghPath)
	if out, err := step.CombinedOutput(); err != nil {
		t.Fatalf("the install step: %v\n%s", err, out)
	}
	added, err := os.ReadFile(ghPath)
	if err != nil {
		t.Fatal(err)
	}
	dir := strings.TrimSpace(string(added))
	for _, f := range []string{testenv.PluginFront, testenv.PluginEngine} {
		if st, err := os.Stat(filepath.Join(dir, f)); err != nil || st.Mode()&0o111 == 0 {
			t.Errorf("%s is not installed in the folder added to PATH (%s): %v", f, dir, err)
		}
	}
	crontab, err := filepath.Abs(filepath.Join("..", "..", "testdata", "crds", "crontab.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	run := exec.Command(filepath.Join(dir, testenv.PluginFront), "versions", "-f", crontab, "-o", "json")
	run.Env = append(os.Environ(), "PATH="+t.TempDir()) // the engine must be found beside it
	out, err := run.CombinedOutput()
	if err != nil || !strings.Contains(string(out), `"storageVersion": "v1"`) {
		t.Errorf("installed kubectl-crdver versions -f crontab.yaml: %v\n%s", err, out)
	}
}
