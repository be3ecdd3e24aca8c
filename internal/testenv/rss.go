package testenv

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"time"
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
	path := "/proc/self/status"
	if pid != 0 {
		path = fmt.Sprintf("/proc/%d/status", pid)
	}
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmHWM:"); ok {
			return strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
		}
	}
	return 0, fmt.Errorf("no VmHWM in %s", path)
}
