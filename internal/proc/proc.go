// Package proc reads what kubectl-crdver and its tests need of a Linux process from
// /proc/PID/stat: its state (a zombie is killed, not yet reaped), its start time (tells a
// process from another that got the same PID since), its parent and the CPU time it used. The
// one reader of that file. Standard library only.
package proc

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
)

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
