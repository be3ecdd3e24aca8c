package initgc

import (
	"fmt"
	"math"
	"os"
	"os/exec"
	"runtime/debug"
	"runtime/metrics"
	"strings"
	"testing"
	"time"
)

// gcPercent reads the collector's percentage (SetGCPercent is the only way to read it).
func gcPercent() int {
	p := debug.SetGCPercent(-1)
	debug.SetGCPercent(p)
	return p
}

func gcCycles() uint64 {
	s := []metrics.Sample{{Name: "/gc/cycles/total:gc-cycles"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// The collector is off from this package's initialisation until Resume; after Resume it stays
// off until the memory grows by the headroom, and the first cycle puts GOGC and GOMEMLIMIT back.
func TestResumeRestoresGOGCAtTheFirstCycle(t *testing.T) {
	if os.Getenv("GOGC") != "" || os.Getenv("GOMEMLIMIT") != "" {
		t.Skip("the test expects GOGC and GOMEMLIMIT unset (GOGC=100, no limit)")
	}
	if Percent() != 100 {
		t.Fatalf("Percent() = %d, want 100 (GOGC unset)", Percent())
	}
	if got := gcPercent(); got != -1 {
		t.Fatalf("before Resume the collector's percentage is %d, want -1 (off)", got)
	}
	before := gcCycles()
	Resume(8 << 20)
	if got := gcPercent(); got != -1 {
		t.Fatalf("right after Resume the collector's percentage is %d, want -1 until the first cycle", got)
	}
	if got := debug.SetMemoryLimit(-1); got <= 0 || got > 1<<40 {
		t.Fatalf("after Resume the memory limit is %d, want the first cycle's limit", got)
	}
	var keep [][]byte
	deadline := time.Now().Add(time.Minute)
	for gcPercent() != 100 {
		if time.Now().After(deadline) {
			t.Fatalf("GOGC not back after a minute of allocating (cycles %d → %d)", before, gcCycles())
		}
		keep = append(keep, make([]byte, 1<<20))
		if len(keep) > 4 {
			keep = keep[1:] // garbage, but a small live heap
		}
		time.Sleep(time.Millisecond) // let the cleanup goroutine run
	}
	if gcCycles() == before {
		t.Errorf("GOGC is back but no cycle ran")
	}
	if got := debug.SetMemoryLimit(-1); got < 1<<62 {
		t.Errorf("after the first cycle the memory limit is %d, want none (math.MaxInt64)", got)
	}
	Resume(8 << 20) // only the first call does anything
	if got := gcPercent(); got != 100 {
		t.Errorf("a second Resume changed the percentage to %d", got)
	}
}

// TestDefaultChild is the test run in a child process by TestDefault (Resume works once per
// process): it calls Default(200, 256 MiB) and Resume, allocates until the first cycle has
// put the settings back, and prints them.
func TestDefaultChild(t *testing.T) {
	if os.Getenv("INITGC_CHILD") != "1" {
		t.Skip("run by TestDefault in a child process")
	}
	Default(200, 256<<20)
	Resume(8 << 20)
	var keep [][]byte
	deadline := time.Now().Add(time.Minute)
	for gcPercent() == -1 {
		if time.Now().After(deadline) {
			t.Fatal("the collector still off after a minute of allocating")
		}
		keep = append(keep, make([]byte, 1<<20))
		if len(keep) > 4 {
			keep = keep[1:]
		}
		time.Sleep(time.Millisecond)
	}
	fmt.Printf("settings: GOGC=%d limit=%d\n", gcPercent(), debug.SetMemoryLimit(-1))
}

// Default gives the collector its percentage and soft limit when the user set neither GOGC nor
// GOMEMLIMIT, and leaves the user's settings alone when either is set.
func TestDefault(t *testing.T) {
	for _, c := range []struct {
		env  []string
		want string
	}{
		{nil, fmt.Sprintf("settings: GOGC=200 limit=%d", 256<<20)},
		{[]string{"GOGC=50"}, fmt.Sprintf("settings: GOGC=50 limit=%d", int64(math.MaxInt64))},
		{[]string{"GOMEMLIMIT=1GiB"}, fmt.Sprintf("settings: GOGC=100 limit=%d", 1<<30)},
	} {
		cmd := exec.Command(os.Args[0], "-test.run", "^TestDefaultChild$", "-test.v")
		env := []string{"INITGC_CHILD=1"}
		for _, kv := range os.Environ() {
			if !strings.HasPrefix(kv, "GOGC=") && !strings.HasPrefix(kv, "GOMEMLIMIT=") {
				env = append(env, kv)
			}
		}
		cmd.Env = append(env, c.env...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("child with %v: %v\n%s", c.env, err, out)
		}
		if !strings.Contains(string(out), c.want+"\n") {
			t.Errorf("child with %v printed\n%s\nwant the line %q", c.env, out, c.want)
		}
	}
}
