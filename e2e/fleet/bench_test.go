package fleet

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/crdver/kubectl-crdver/internal/proc"
	"github.com/crdver/kubectl-crdver/internal/testenv"
)

// benchClusters is how many kubeconfigs BenchmarkFleetPlan's fleet has
// (CRDVER_BENCH_FLEET_CLUSTERS): most name one of the four servers under another name, every
// tenth a closed port.
func benchClusters() int {
	if n, err := strconv.Atoi(os.Getenv("CRDVER_BENCH_FLEET_CLUSTERS")); err == nil && n > 0 {
		return n
	}
	return 50
}

// BenchmarkFleetPlan: plan of a release on a fleet of 50 kubeconfigs (45 names of the four test
// servers, 5 closed ports), each server holding the release's CRD and
// CRDVER_BENCH_FLEET_OBJECTS objects (default 200): the sum of the 50 single runs, one after
// the other, against the fleet run at --parallel 1, 2, 4 and 8 (wall time; the peak resident
// memory of one cluster's run, of the fleet process, and of all of them together, sampled from
// /proc every 20 ms), and how long the fleet run takes to stop after SIGINT.
//
//	go test ./e2e/fleet/ -run '^$' -bench BenchmarkFleetPlan -benchtime 1x
func BenchmarkFleetPlan(b *testing.B) {
	objects := 200
	if n, err := strconv.Atoi(os.Getenv("CRDVER_BENCH_FLEET_OBJECTS")); err == nil && n > 0 {
		objects = n
	}
	old := crontabRelease(b, "", nil, 0, "v1")
	old.Name, old.Spec.Group = "crontabs.bench.example.com", "bench.example.com"
	target := crontabRelease(b, "", nil, 20, "v1", "v2")
	target.Name, target.Spec.Group = old.Name, old.Spec.Group
	release := writeRelease(b, b.TempDir(), "v2.0.0", target)
	names := []string{"new-a", "new-b", "old-a", "old-b"}
	for _, n := range names {
		install(b, servers[n], old)
		var objs []map[string]any
		for i := range objects {
			o := crontab("v1", fmt.Sprintf("c%04d", i), map[string]any{"image": "db:1", "host": "db", "port": "5432"})
			o["apiVersion"] = "bench.example.com/v1"
			objs = append(objs, o)
		}
		create(b, servers[n], "crontabs", objs...)
	}
	b.Cleanup(func() {
		for _, n := range names {
			_ = servers[n].DeleteCRD(context.Background(), old.Name)
		}
	})
	fleetSize := benchClusters()
	byName, elsewhere := map[string]*testenv.Env{}, map[string]string{}
	for i := range fleetSize {
		name := fmt.Sprintf("cluster-%02d", i)
		if i%10 == 9 {
			elsewhere[name] = closedPort(b)
			continue
		}
		byName[name] = servers[names[i%len(names)]]
	}
	dir, _ := kubeconfigs(b, byName, elsewhere)
	r := newRunner(b)

	b.Run("single-runs", func(b *testing.B) {
		for range b.N {
			var peak int64
			var cpu time.Duration
			start := time.Now()
			for i := range fleetSize {
				cmd := r.Command(context.Background(), "plan", "-f", release, "--kubeconfig", filepath.Join(dir, fmt.Sprintf("cluster-%02d.kubeconfig", i)), "-o", "json")
				m := runMeasured(b, cmd)
				peak, cpu = max(peak, m.child), cpu+m.cpu
			}
			b.ReportMetric(time.Since(start).Seconds(), "s/fleet")
			b.ReportMetric(cpu.Seconds(), "cpu-s/fleet")
			b.ReportMetric(float64(peak)/(1<<20), "peak-run-MB")
		}
	})
	for _, p := range []int{1, 2, 4, 8} {
		b.Run(fmt.Sprintf("parallel=%d", p), func(b *testing.B) {
			for range b.N {
				start := time.Now()
				cmd := r.Command(context.Background(), "plan", "-f", release, "--kubeconfigs", dir, "--parallel", strconv.Itoa(p), "-o", "json", "-q")
				m := runMeasured(b, cmd)
				b.ReportMetric(time.Since(start).Seconds(), "s/fleet")
				b.ReportMetric(m.cpu.Seconds(), "cpu-s/fleet")
				b.ReportMetric(float64(m.child)/(1<<20), "peak-run-MB")
				b.ReportMetric(float64(m.parent)/(1<<20), "fleet-MB")
				b.ReportMetric(float64(m.total)/(1<<20), "peak-total-MB")
				if m.code != 3 { // the closed ports
					b.Fatalf("exit %d\n%s", m.code, m.stderr)
				}
			}
		})
	}
	b.Run("ctrl-c", func(b *testing.B) {
		for range b.N {
			cmd := r.Command(context.Background(), "plan", "-f", release, "--kubeconfigs", dir, "--parallel", "4", "-o", "json")
			var out bytes.Buffer
			cmd.Stdout = &out
			stderr, err := cmd.StderrPipe()
			if err != nil {
				b.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				b.Fatal(err)
			}
			var sent time.Time
			var lines []string
			sc := bufio.NewScanner(stderr)
			for sc.Scan() {
				lines = append(lines, sc.Text())
				if sent.IsZero() && strings.Contains(sc.Text(), fmt.Sprintf("; %d of %d)", fleetSize/5, fleetSize)) {
					sent = time.Now()
					_ = cmd.Process.Signal(syscall.SIGINT)
				}
			}
			err = cmd.Wait()
			stop := time.Since(sent)
			if sent.IsZero() || cmd.ProcessState.ExitCode() != 3 || !strings.Contains(lines[len(lines)-1], "error: interrupted:") {
				b.Fatalf("exit %v, sent %v:\n%s", err, !sent.IsZero(), strings.Join(lines, "\n"))
			}
			b.ReportMetric(float64(stop.Milliseconds()), "stop-ms")
			b.Logf("%s (after SIGINT: %v)", lines[len(lines)-1], stop.Round(time.Millisecond))
		}
	})
}

// measured is a run of the plugin and the peak resident memory of its process tree.
type measured struct {
	code   int
	stderr string
	// child is the largest of its children's (or its own, when it has none) peak; parent its
	// own; total the largest sum of the tree's resident memory at one sample.
	child, parent, total int64
	// cpu is the CPU time of the process and every child it waited for (wait4's rusage).
	cpu time.Duration
}

// runMeasured runs cmd to its end, sampling its process tree's memory from /proc every 20 ms.
func runMeasured(b *testing.B, cmd *exec.Cmd) measured {
	b.Helper()
	var errb bytes.Buffer
	cmd.Stderr = &errb
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	var m measured
	var mu sync.Mutex
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			parent, children, total := treeMemory(cmd.Process.Pid)
			mu.Lock()
			m.parent, m.total = max(m.parent, parent), max(m.total, total)
			for _, c := range children {
				m.child = max(m.child, c)
			}
			mu.Unlock()
		}
	}()
	err := cmd.Wait()
	close(stop)
	<-sampled
	if ee, ok := err.(*exec.ExitError); ok {
		m.code = ee.ExitCode()
	} else if err != nil {
		b.Fatal(err)
	}
	m.cpu = cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
	if m.child == 0 {
		m.child = m.parent // a single run: the engine itself (kubectl-crdver executes it in place)
	}
	m.stderr = errb.String()
	return m
}

// treeMemory is pid's peak resident memory (VmHWM), its children's, and the sum of the
// tree's resident memory now (VmRSS), in bytes.
func treeMemory(pid int) (parent int64, children []int64, total int64) {
	hwm, rss := procMemory(pid)
	parent, total = hwm, rss
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		child, err := strconv.Atoi(e.Name())
		if err != nil || child == pid {
			continue
		}
		if st, err := proc.ReadStat(child); err != nil || st.PPID != pid {
			continue
		}
		h, r := procMemory(child)
		children = append(children, h)
		total += r
	}
	return parent, children, total
}

// procMemory reads a process's VmHWM and VmRSS, in bytes (0 when it is gone).
func procMemory(pid int) (hwm, rss int64) {
	m, err := proc.ReadMemory(pid)
	if err != nil {
		return 0, 0
	}
	return m.HWM << 10, m.RSS << 10
}
