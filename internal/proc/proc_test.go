package proc

import (
	"errors"
	"io/fs"
	"os"
	"runtime"
	"testing"
)

func TestParseStat(t *testing.T) {
	for _, c := range []struct {
		name, stat string
		want       Stat
	}{
		{"plain", "1234 (kube-apiserver) S 1 1234 1234 0 -1 4194560 100 0 0 0 5 6 0 0 20 0 12 0 987654 1000 200\n", Stat{State: "S", PPID: 1, CPUTicks: 11, Start: "987654"}},
		{"zombie", "77 (sleep) Z 1 77 77 0 -1 4227084 0 0 0 0 0 0 0 0 20 0 1 0 4242 0 0\n", Stat{State: "Z", PPID: 1, Start: "4242"}},
		// A command name may hold spaces and parentheses: fields count from the last ')'.
		{"name with ) and spaces", "9 (a) b (c) R 2 9 9 0 -1 0 0 0 0 0 3 4 0 0 20 0 1 0 31337 0 0\n", Stat{State: "R", PPID: 2, CPUTicks: 7, Start: "31337"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := ParseStat([]byte(c.stat))
			if err != nil || got != c.want {
				t.Errorf("ParseStat = %+v, %v; want %+v", got, err, c.want)
			}
		})
	}
	for _, bad := range []string{"", "1234 kube-apiserver S 1", "1234 (x) S 1 2 3",
		"1 (x) S p 1 1 0 -1 0 0 0 0 0 5 6 0 0 20 0 1 0 42 0 0\n", "1 (x) S 1 1 1 0 -1 0 0 0 0 0 five 6 0 0 20 0 1 0 42 0 0\n"} {
		if got, err := ParseStat([]byte(bad)); err == nil {
			t.Errorf("ParseStat(%q) = %+v; want an error", bad, got)
		}
	}
}

func TestReadStat(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("/proc is Linux's")
	}
	st, err := ReadStat(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if st.State != "R" && st.State != "S" {
		t.Errorf("this process's state %q; want R or S", st.State)
	}
	if again, _ := ReadStat(os.Getpid()); again.Start != st.Start || st.Start == "" {
		t.Errorf("start time %q then %q; want the same, not empty", st.Start, again.Start)
	}
	if st.PPID != os.Getppid() {
		t.Errorf("parent %d; want %d", st.PPID, os.Getppid())
	}
	if _, err := ReadStat(1 << 30); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("ReadStat(no such process): %v; want fs.ErrNotExist", err)
	}
}

// This process's memory: a peak and a current resident set, the peak never below the current;
// a process that does not exist is an error, not zeros.
func TestReadMemory(t *testing.T) {
	if _, err := os.Stat("/proc/self/status"); err != nil {
		t.Skip("no /proc")
	}
	for _, pid := range []int{0, os.Getpid()} {
		m, err := ReadMemory(pid)
		if err != nil {
			t.Fatal(err)
		}
		if m.HWM <= 0 || m.RSS <= 0 || m.HWM < m.RSS {
			t.Errorf("pid %d: %+v, want 0 < RSS <= HWM", pid, m)
		}
	}
	if m, err := ReadMemory(1 << 30); err == nil {
		t.Errorf("a process that does not exist: %+v, no error", m)
	}
}
