package survive

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/crdver/kubectl-crdver/internal/testenv"
)

// TestAnotherClusterAtTheSameAddress is the scenario: an upgrade of cluster A is
// killed (SIGKILL) right after its backup is written; cluster B, reached through the same
// address by the same user, must not reuse A's checkpoint or backup: it takes its own. A then
// resumes from its own state and backup.
func TestAnotherClusterAtTheSameAddress(t *testing.T) {
	const group = "same.address.example.com"
	a := setup(t, envA, group, "a", 120)
	b := setup(t, envB, group, "b", 120)
	proxy, kcA := proxyTo(t, envA)
	dir := t.TempDir()
	kcB, err := proxy.Kubeconfig(envB, dir)
	if err != nil {
		t.Fatal(err)
	}
	next := newRelease(t, group)
	user := newRunner(t)
	backupA, backupB := filepath.Join(dir, "a.yaml"), filepath.Join(dir, "b.yaml")

	res := user.RunKilled(func(string, *os.Process) bool { _, err := os.Stat(backupA); return err == nil },
		"upgrade", "-f", next, "--yes", "--allow-data-loss", "--backup", backupA, "--kubeconfig", kcA, "-o", "json")
	if !res.Killed {
		t.Fatalf("the first run on A ended before its backup was written (exit %d):\n%s", res.Code, res.Stderr)
	}
	aBytes, err := os.ReadFile(backupA)
	if err != nil {
		t.Fatal(err)
	}

	proxy.Switch(envB)
	res = user.Run("upgrade", "-f", next, "--yes", "--allow-data-loss", "--backup", backupB, "--kubeconfig", kcB, "-o", "json")
	rep := parseReport(t, res)
	if res.Code != 0 {
		t.Fatalf("upgrade of B: exit %d\n%s", res.Code, res.Stderr)
	}
	if rep.Resumed || rep.Backup == nil || rep.Backup.Reused || rep.Backup.File != backupB {
		t.Errorf("B reused A's state: resumed %v backup %+v\n%s", rep.Resumed, rep.Backup, res.Stderr)
	}
	b.checkBackup(t, backupB)
	b.checkUpgraded(t)
	if again, _ := os.ReadFile(backupA); string(again) != string(aBytes) {
		t.Errorf("the run on B changed A's backup")
	}
	// A's backup is never restored into B by mistake: refused before any write.
	before := b.snapshot(t)
	res = user.Run("restore", "-f", backupA, "--yes", "--kubeconfig", kcB)
	if res.Code != 1 || !strings.Contains(res.Stderr, "taken on another cluster") || !strings.Contains(res.Stderr, "--from-another-cluster") {
		t.Errorf("restore of A's backup into B: exit %d, want 1 refusing it\n%s", res.Code, res.Stderr)
	}
	if after := b.snapshot(t); !mapsEqual(before, after) {
		t.Errorf("the refused restore wrote to B")
	}

	proxy.Switch(envA)
	res = user.Run("upgrade", "-f", next, "--yes", "--allow-data-loss", "--backup", backupA, "--kubeconfig", kcA, "-o", "json")
	rep = parseReport(t, res)
	if res.Code != 0 {
		t.Fatalf("resumed upgrade of A: exit %d\n%s", res.Code, res.Stderr)
	}
	if !rep.Resumed || rep.Backup == nil || !rep.Backup.Reused {
		t.Errorf("A did not resume from its own checkpoint and backup: resumed %v backup %+v\n%s", rep.Resumed, rep.Backup, res.Stderr)
	}
	a.checkBackup(t, backupA)
	a.checkUpgraded(t)
}

// TestFinishedUpgradeRunAgain: the very same command run again after it finished (a CI job
// retried) says the release is in place, writes nothing, needs no new backup file and exits
// as the first run did: 1, as on the OpenTelemetry operator release of the issue, with an
// object that the new schema rejects on re-create left to the user.
func TestFinishedUpgradeRunAgain(t *testing.T) {
	const group = "again.example.com"
	c := setup(t, envA, group, "g", 20)
	big := &unstructured.Unstructured{Object: map[string]any{"apiVersion": group + "/v1alpha1", "kind": "Gadget",
		"metadata": map[string]any{"name": "g-big", "namespace": "default"}, "spec": map[string]any{"size": int64(5000), "legacy": "legacy-g-big"}}}
	if _, err := c.dyn.Resource(schema.GroupVersionResource{Group: group, Version: "v1alpha1", Resource: "gadgets"}).Namespace("default").
		Create(context.Background(), big, metav1.CreateOptions{FieldManager: "kubectl-create"}); err != nil {
		t.Fatal(err)
	}
	c.objects = append(c.objects, "g-big")
	next := newReleaseMax(t, group, 1000)
	user := newRunner(t)
	backup := filepath.Join(t.TempDir(), "backup.yaml")
	args := []string{"upgrade", "-f", next, "--yes", "--allow-data-loss", "--backup", backup, "--kubeconfig", envA.Kubeconfig, "-o", "json"}
	first := user.Run(args...)
	if first.Code != 1 || !strings.Contains(first.Stderr+first.Stdout, "g-big") {
		t.Fatalf("first run: exit %d, want 1 naming g-big (invalid on re-create)\n%s", first.Code, first.Stderr)
	}
	before := c.snapshot(t)
	saved, _ := os.ReadFile(backup)

	for _, who := range []*testenv.User{user, newRunner(t)} { // the same user, and another machine with no checkpoint
		again := who.Run(args...)
		rep := parseReport(t, again)
		if again.Code != first.Code || rep.Outcome.ExitCode != first.Code {
			t.Errorf("run again: exit %d (report %d), want %d as the first\n%s", again.Code, rep.Outcome.ExitCode, first.Code, again.Stderr)
		}
		if rep.AlreadyInPlace == "" {
			t.Errorf("run again did not say the release is in place:\n%s", again.Stderr)
		}
		for _, s := range rep.Steps {
			if s.State == "done" && s.Action != "verify" {
				t.Errorf("run again did step %s", s.Action)
			}
		}
		if after := c.snapshot(t); !mapsEqual(before, after) {
			t.Errorf("run again wrote to the cluster: before %v after %v", before, after)
		}
		if b, _ := os.ReadFile(backup); string(b) != string(saved) {
			t.Errorf("run again changed the backup file")
		}
	}
	// As a person reads it: the steps (apply already done, verify), and the decision table's
	// last line, as after the first run.
	human := user.Run(args[:len(args)-2]...)
	paras := strings.Split(strings.TrimSpace(human.Stdout), "\n\n")
	if last := paras[len(paras)-1]; human.Code != 1 || !strings.Contains(human.Stdout, "verify") ||
		!strings.HasPrefix(last, "Release applied and verified. Left for you") || !strings.Contains(last, "g-big") {
		t.Errorf("run again, human output: exit %d, last paragraph %q; want 1 and the steps, ending with what is left (g-big)\n%s", human.Code, last, human.Stdout)
	}
}

// TestSecondRunIsRefused: a second upgrade of the same CRDs while the first runs is refused
// before it writes, naming the first; once the first is killed, a later run takes over (the
// holder's process is gone) and finishes. The first is stopped (SIGSTOP: a hung run, its
// process alive) once its backup is done, so that it still holds the CRDs whatever the speed
// of the machine, then killed.
func TestSecondRunIsRefused(t *testing.T) {
	const group = "twice.example.com"
	c := setup(t, envA, group, "t", 150)
	next := newRelease(t, group)
	user := newRunner(t)
	dir := t.TempDir()
	backup := filepath.Join(dir, "backup.yaml")
	args := func(b string) []string {
		return []string{"upgrade", "-f", next, "--yes", "--allow-data-loss", "--backup", b, "--kubeconfig", envA.Kubeconfig, "-o", "json"}
	}
	var (
		mu      sync.Mutex
		second  result
		started bool
	)
	other := newRunner(t)
	first := user.RunKilled(func(line string, p *os.Process) bool {
		mu.Lock()
		defer mu.Unlock()
		if !started && strings.Contains(line, "step") && strings.Contains(line, "backup: done") {
			started = true
			_ = p.Signal(syscall.SIGSTOP)
			second = other.Run(args(filepath.Join(dir, "second.yaml"))...)
			return true
		}
		return false
	}, args(backup)...)
	mu.Lock()
	defer mu.Unlock()
	if !started {
		t.Fatalf("the first run ended before its backup step was reported (exit %d):\n%s", first.Code, first.Stderr)
	}
	if second.Code != 3 || !strings.Contains(second.Stderr, "being changed by another run") {
		t.Errorf("second run while the first held the CRDs: exit %d, want 3 naming the first\n%s", second.Code, second.Stderr)
	}
	if _, err := os.Stat(filepath.Join(dir, "second.yaml")); err == nil {
		t.Errorf("the refused second run wrote a backup")
	}
	// The first was killed: its lease names a process that is gone, so the next run takes
	// over at once (no waiting for the lease to go stale).
	res := user.Run(args(backup)...)
	if res.Code != 0 {
		t.Fatalf("run after the first was killed: exit %d\n%s", res.Code, res.Stderr)
	}
	c.checkUpgraded(t)
	c.checkBackup(t, backup)
}

func mapsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}
