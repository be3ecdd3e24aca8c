package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	"github.com/crdver/kubectl-crdver/internal/testenv"
)

// The tests below run the built binary against a real API server, for what only a real
// process shows: a progress bar on a terminal, and a real SIGINT.
var (
	envOnce sync.Once
	env     *testenv.Env
	envErr  error
)

func clusterEnv(t *testing.T) *testenv.Env {
	t.Helper()
	envOnce.Do(func() { env, envErr = testenv.Start(testenv.Options{}) })
	if envErr != nil {
		t.Fatal(envErr)
	}
	return env
}

// migrationFixture creates things.<group> (v1beta1 storage, v1 served) and n objects stored at
// v1beta1.
func migrationFixture(t *testing.T, e *testenv.Env, group string, n int) string {
	t.Helper()
	ctx := context.Background()
	crd := testenv.TwoVersionCRD(group, "things", "Thing", apiextensionsv1.JSONSchemaProps{Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{"size": {Type: "integer"}}})
	if _, err := e.CreateCRD(ctx, crd); err != nil {
		t.Fatal(err)
	}
	if err := e.CreateObjects(ctx, crd, []string{"default"}, n); err != nil {
		t.Fatal(err)
	}
	return crd.Name
}

func storedAt(t *testing.T, e *testenv.Env, group string) map[string]int {
	t.Helper()
	got, _, err := e.StoredAPIVersions(context.Background(), group, "things")
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// TestMigrateProgressBarOnTerminal: with stderr on a terminal, migrate draws a progress bar with
// the count, the rate and the ETA (plain lines are for pipes; the plugin tests cover those).
func TestMigrateProgressBarOnTerminal(t *testing.T) {
	e := clusterEnv(t)
	const n = 300
	group := "bar.cmd.example.com"
	name := migrationFixture(t, e, group, n)
	cmd := exec.Command(filepath.Join(binDir, "kubectl-crdver"), "migrate", name, "--to", "v1", "--yes",
		"--qps", "150", "--concurrency", "2", "--chunk-size", "50",
		"--checkpoint", filepath.Join(t.TempDir(), "cp"), "--kubeconfig", e.Kubeconfig)
	var stdout bytes.Buffer
	cmd.Stdout = &stdout
	out, err := runOnTerminal(t, cmd, func(tty *os.File) { cmd.Stderr = tty }, 2*time.Minute)
	if err != nil {
		t.Fatalf("migrate: %v\nstderr (terminal):\n%s\nstdout:\n%s", err, out, stdout.String())
	}
	// The bar reads "rewriting  40% |████      | (120/300, 148 objects/s) [1s:1s]" (elapsed and
	// ETA in brackets); it is redrawn in place with carriage returns once the rewrite has run for
	// a second, and cleared when it ends.
	bar := regexp.MustCompile(`rewriting\s+\d+% \|[^|]*\| \((\d+)/` + fmt.Sprint(n) + `, \d+ objects/s\)( \[\d+s:\d+s\])?`)
	frames := bar.FindAllStringSubmatch(out, -1)
	withETA := 0
	for _, f := range frames {
		if f[2] != "" {
			withETA++
		}
	}
	if withETA < 2 {
		t.Fatalf("want a bar redrawn with count, rate and ETA on the terminal; stderr was:\n%q", out)
	}
	if !strings.HasSuffix(out, "\x1b[K\r\x1b[K") {
		t.Errorf("the bar is not cleared at the end; end of stderr:\n%q", out[max(0, len(out)-1500):])
	}
	if strings.ContainsAny(stdout.String(), "\r|") {
		t.Errorf("progress in stdout:\n%q", stdout.String())
	}
	if !strings.Contains(out, "\r") {
		t.Error("the bar is not redrawn in place (no carriage return)")
	}
	if strings.Contains(out, "migrate: ") && strings.Contains(out, "objects (rewritten") {
		t.Error("plain progress lines were printed on a terminal")
	}
	if got := storedAt(t, e, group); got[group+"/v1"] != n || len(got) != 1 {
		t.Errorf("etcd after migrate: %v, want all %d at v1", got, n)
	}
}

// TestMigrateSIGINTThenResume: a real SIGINT lets the writes in flight finish, saves the
// checkpoint and exits 3 with the command that resumes; that command, run through kubectl,
// finishes the job and trims storedVersions.
func TestMigrateSIGINTThenResume(t *testing.T) {
	e := clusterEnv(t)
	const n = 600
	group := "sigint.cmd.example.com"
	name := migrationFixture(t, e, group, n)
	checkpoint := filepath.Join(t.TempDir(), "checkpoint.json")
	cmd := exec.Command(filepath.Join(binDir, "kubectl-crdver"), "migrate", name, "--to", "v1", "--yes",
		"--qps", "60", "--concurrency", "2", "--chunk-size", "20", "--progress-interval", "200ms",
		"--checkpoint", checkpoint, "--kubeconfig", e.Kubeconfig)
	var stdout bytes.Buffer
	stderr := &syncBuffer{}
	cmd.Stdout, cmd.Stderr = &stdout, stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// Interrupt once the rewrite has made progress: a plain line with some objects done
	// (bounded wait).
	progressed := regexp.MustCompile(`migrate: [1-9]\d*/`)
	deadline := time.Now().Add(time.Minute)
	for !progressed.MatchString(stderr.String()) && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	err := cmd.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 3 {
		t.Fatalf("after SIGINT: %v, want exit 3\nstderr:\n%s", err, stderr.String())
	}
	mid := storedAt(t, e, group)
	if mid[group+"/v1"] == 0 || mid[group+"/v1beta1"] == 0 {
		t.Fatalf("interrupt came too late or too early to test resuming: etcd %v", mid)
	}
	re := regexp.MustCompile(`resume with: (kubectl crdver migrate .*)`)
	m := re.FindStringSubmatch(stderr.String())
	if m == nil {
		t.Fatalf("no resume command in:\n%s", stderr.String())
	}
	if _, err := os.Stat(checkpoint); err != nil {
		t.Fatalf("checkpoint not saved: %v", err)
	}
	// Run the printed command as a user would: through the shell and the real kubectl.
	k := kubectl(t)
	resume := exec.Command("sh", "-c", m[1])
	resume.Env = append(os.Environ(), "PATH="+binDir+string(os.PathListSeparator)+filepath.Dir(k))
	out, err := resume.CombinedOutput()
	if err != nil {
		t.Fatalf("resume command %q: %v\n%s", m[1], err, out)
	}
	if !strings.Contains(string(out), "resum") {
		t.Errorf("the resumed run does not say it resumed:\n%s", out)
	}
	if got := storedAt(t, e, group); got[group+"/v1"] != n || len(got) != 1 {
		t.Errorf("etcd after resuming: %v, want all %d at v1", got, n)
	}
	crd, err := e.WaitEstablished(context.Background(), name)
	if err != nil {
		t.Fatal(err)
	}
	if len(crd.Status.StoredVersions) != 1 || crd.Status.StoredVersions[0] != "v1" {
		t.Errorf("storedVersions = %v, want [v1]", crd.Status.StoredVersions)
	}
}

// syncBuffer is a bytes.Buffer safe for a writer process and a polling reader.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
