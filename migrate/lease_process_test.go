package migrate

import (
	"os"
	"os/exec"
	"runtime"
	"syscall"
	"testing"
	"time"

	"github.com/crdver/kubectl-crdver/internal/proc"
)

// TestProcessAlive: the holder of a lease is alive while its process runs, and not once it is
// gone, a zombie (SIGKILLed and not reaped, as in a container whose first process reaps no
// orphans: here, the test holds off reaping it), or another process has its PID since.
func TestProcessAlive(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("reads /proc")
	}
	cmd := exec.Command("sleep", "60")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	st, err := proc.ReadStat(pid)
	if err != nil {
		t.Fatal(err)
	}
	start := st.Start
	if !processAlive(pid, start) {
		t.Errorf("a running process (pid %d) is not alive", pid)
	}
	if !processAlive(pid, "") {
		t.Errorf("a running process (pid %d) with no start time recorded is not alive", pid)
	}
	if processAlive(pid, start+"1") {
		t.Errorf("pid %d with another start time (its PID reused) is alive", pid)
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	// Not reaped yet: wait until the kernel marks it a zombie.
	for deadline := time.Now().Add(5 * time.Second); ; {
		if st, err := proc.ReadStat(pid); err == nil && st.State == "Z" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("pid %d never became a zombie", pid)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if p, _ := os.FindProcess(pid); p.Signal(syscall.Signal(0)) != nil {
		t.Fatalf("signal 0 does not reach the zombie: the case this test is for does not arise")
	}
	if processAlive(pid, start) {
		t.Errorf("a SIGKILLed, unreaped process (zombie, pid %d) is alive", pid)
	}
	_ = cmd.Wait()
	if processAlive(pid, start) {
		t.Errorf("a reaped process (pid %d) is alive", pid)
	}
	if !processAlive(os.Getpid(), selfStart()) {
		t.Errorf("this process is not alive by its own start time %q", selfStart())
	}
}
