// Package proc reads what kubectl-crdver and its tests need of a Linux process from
// /proc/PID/stat: its state (a zombie is killed, not yet reaped), its start time (tells a
// process from another that got the same PID since), its parent and the CPU time it used; and
// from /proc/PID/status its resident memory, peak and current. The one reader of those files.
// Standard library only.
package proc

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
)

// Memory is a process's resident memory as /proc/PID/status says it, in KiB.
type Memory struct {
	// HWM is VmHWM, the peak resident set so far (it restarts at each exec).
	HWM int64
	// RSS is VmRSS, the resident set now.
	RSS int64
}

// ReadMemory reads VmHWM and VmRSS of /proc/PID/status (pid 0: this process); an error when
// the process is gone, there is no /proc, or the file has no VmHWM (a kernel thread).
func ReadMemory(pid int) (Memory, error) {
	path := "/proc/self/status"
	if pid != 0 {
		path = fmt.Sprintf("/proc/%d/status", pid)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return Memory{}, err
	}
	var m Memory
	found := false
	for _, l := range bytes.Split(b, []byte("\n")) {
		f := bytes.Fields(l)
		if len(f) < 2 {
			continue
		}
		var target *int64
		switch string(f[0]) {
		case "VmHWM:":
			target, found = &m.HWM, true
		case "VmRSS:":
			target = &m.RSS
		default:
			continue
		}
		if *target, err = strconv.ParseInt(string(f[1]), 10, 64); err != nil {
			return Memory{}, fmt.Errorf("%s: %s: %w", path, l, err)
		}
	}
	if !found {
		return Memory{}, fmt.Errorf("no VmHWM in %s", path)
	}
	return m, nil
}

// Stat is what /proc/PID/stat says of a process.
type Stat struct {
	// State is field 3: "R", "S", "D", "Z" (zombie), "X" (dead), …
	State string
	// PPID is field 4, the parent's PID.
	PPID int
	// CPUTicks is fields 14 and 15, the user and system time used, in clock ticks.
	CPUTicks uint64
	// Start is field 22, the start time in clock ticks after boot, as written.
	Start string
}

// ReadStat reads /proc/PID/stat (an error wrapping fs.ErrNotExist when there is no such
// process, or no /proc).
func ReadStat(pid int) (Stat, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return Stat{}, err
	}
	st, err := ParseStat(b)
	if err != nil {
		return Stat{}, fmt.Errorf("/proc/%d/stat: %w", pid, err)
	}
	return st, nil
}

// ParseStat reads the content of a /proc/PID/stat file. The command name (field 2) may hold
// spaces and parentheses, so the fields are counted from the last ')'.
func ParseStat(b []byte) (Stat, error) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return Stat{}, fmt.Errorf("unexpected format: no command name in parentheses")
	}
	f := bytes.Fields(b[i+1:])
	if len(f) < 20 {
		return Stat{}, fmt.Errorf("unexpected format: %d fields after the command name, want at least 20", len(f))
	}
	ppid, err := strconv.Atoi(string(f[1]))
	if err != nil {
		return Stat{}, fmt.Errorf("unexpected format: parent PID %q", f[1])
	}
	utime, err1 := strconv.ParseUint(string(f[11]), 10, 64)
	stime, err2 := strconv.ParseUint(string(f[12]), 10, 64)
	if err1 != nil || err2 != nil {
		return Stat{}, fmt.Errorf("unexpected format: CPU times %q %q", f[11], f[12])
	}
	return Stat{State: string(f[0]), PPID: ppid, CPUTicks: utime + stime, Start: string(f[19])}, nil
}
