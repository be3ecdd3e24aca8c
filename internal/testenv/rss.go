package testenv

import (
	"os/exec"
	"sync"
	"time"

	"github.com/crdver/kubectl-crdver/internal/proc"
)

// PeakRSS follows the peak resident set (VmHWM) of a started process until it exits: call it
// right after cmd.Start, and the returned function after cmd.Wait for the peak in KiB (0 where
// /proc cannot tell, e.g. not Linux).
//
// The child's rusage (ProcessState.SysUsage's Maxrss) cannot be used: Go starts children with
// clone(CLONE_VM|CLONE_VFORK), so the child runs in the parent's address space until its
// exec, and Linux records that address space's high-water mark as the child's maxrss — a
// plugin started by a test process of 120 MB reports at least 120 MB, whatever it used.
// VmHWM is the exec'd program's own (it restarts with each exec, kubectl-crdver's of
// crdver-engine included). It is read every 20 ms, so a peak in the last 20 ms of a run may
// be missed: VmHWM only grows, so nothing before is.
func PeakRSS(cmd *exec.Cmd) func() int64 {
	var mu sync.Mutex
	var peak int64
	done := make(chan struct{})
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		t := time.NewTicker(20 * time.Millisecond)
		defer t.Stop()
		for {
			if kib, err := HWM(cmd.Process.Pid); err == nil {
				mu.Lock()
				peak = max(peak, kib)
				mu.Unlock()
			}
			select {
			case <-done:
				return
			case <-t.C:
			}
		}
	}()
	return func() int64 {
		close(done)
		<-stopped
		mu.Lock()
		defer mu.Unlock()
		return peak
	}
}

// HWM is the peak resident set (VmHWM of /proc/PID/status) of process pid in KiB; pid 0 is
// this process.
func HWM(pid int) (int64, error) {
	m, err := proc.ReadMemory(pid)
	return m.HWM, err
}
