package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/crdver/kubectl-crdver/internal/testenv"
)

// gcCycles runs the built binary named bin (exit 0 or 1) with GODEBUG=gctrace=1 and counts the
// garbage collector's cycles it reports (kubectl-crdver's and, when it executes crdver-engine,
// the engine's: the environment passes on).
func gcCycles(t *testing.T, bin string, args ...string) int {
	t.Helper()
	cmd := exec.Command(filepath.Join(binDir, bin), args...)
	cmd.Dir = filepath.Join("..", "..")
	cmd.Env = append(os.Environ(), "GODEBUG=gctrace=1", "GOGC=", "GOMEMLIMIT=", "KUBECONFIG="+filepath.Join(binDir, "no-kubeconfig"))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	// exit 1 is an answer (--can-remove of a version that is not safe to remove)
	if err := cmd.Run(); err != nil && cmd.ProcessState.ExitCode() != 1 {
		t.Fatalf("%s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	n := 0
	for _, l := range strings.Split(stderr.String(), "\n") {
		if strings.HasPrefix(l, "gc ") {
			n++
		}
	}
	return n
}

// The engine's packages' initialisation (about 6 MB, more than the collector's first 4 MB goal)
// runs without a garbage collection (internal/initgc), and so do the short commands scripts run
// in loops, whether kubectl-crdver answers them (versions --sort, version) or executes the
// engine; a command that reads more collects as usual.
func TestNoCollectionDuringStartup(t *testing.T) {
	for _, c := range []struct {
		bin  string
		args []string
	}{
		{testenv.PluginFront, []string{"versions", "--sort", "v1", "v2beta1", "foo"}},
		{testenv.PluginFront, []string{"versions", "-f", "testdata/crds/crontab.yaml", "--can-remove", "v1"}},
		{testenv.PluginFront, []string{"version"}},
		{testenv.PluginEngine, []string{"versions", "--sort", "v1", "v2beta1", "foo"}},
		{testenv.PluginEngine, []string{"version"}},
	} {
		if n := gcCycles(t, c.bin, c.args...); n != 0 {
			t.Errorf("%s %s: %d garbage collections, want none", c.bin, strings.Join(c.args, " "), n)
		}
	}
	// Strimzi 0.51's four CRDs (1.3 MB of YAML) decode into far more than the 16 MB headroom.
	if n := gcCycles(t, testenv.PluginFront, "versions", "--all", "-f", "testdata/releases/strimzi/0.51.0"); n < 2 {
		t.Errorf("versions --all of Strimzi 0.51's CRDs: %d garbage collections, want the collector running (at least 2)", n)
	}
}

// startupRun is one run of a command: wall time and CPU time (user+system) of the process.
type startupRun struct{ wall, cpu time.Duration }

func runTimed(b *testing.B, name string, args ...string) startupRun {
	b.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = filepath.Join("..", "..") // testdata/… paths
	start := time.Now()
	out, err := cmd.Output()
	wall := time.Since(start)
	if err != nil || len(out) == 0 {
		b.Fatalf("%s %s: %v", name, strings.Join(args, " "), err)
	}
	ru := cmd.ProcessState.SysUsage().(*syscall.Rusage)
	cpu := time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	return startupRun{wall: wall, cpu: cpu}
}

func median(d []time.Duration) time.Duration {
	s := append([]time.Duration{}, d...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[len(s)/2]
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// BenchmarkVersionsSortProcess measures `kubectl-crdver versions --sort ...` from process start
// to exit, built as releases and `make install` build it (CGO_ENABLED=0, -trimpath, -s -w), and,
// side by side (one run of each in turn), `kubectl version --client` when kubectl is on PATH:
// the figures and the ratio of medians in docs/benchmarks.md (target: ratio ≤ 0.3).
// kubectl-crdver answers `versions --sort` itself; engine-median-ms is the same command run by
// crdver-engine directly (what every command cost before the split). CRDVER_BENCH_BASE, when
// set, is another kubectl-crdver (e.g. built from an older commit) run in turn as well:
// base-median-ms and ratio-base.
func BenchmarkVersionsSortProcess(b *testing.B) {
	bin := testenv.MustBuildPlugin(b, b.TempDir(), testenv.BuildOptions{})
	engine := filepath.Join(filepath.Dir(bin), testenv.PluginEngine)
	args := append([]string{"versions", "--sort"}, strings.Fields("v10 v2 v1 v11beta2 v10beta3 v3beta1 v12alpha1 v11alpha2 foo1 foo10")...)
	kubectl, _ := exec.LookPath("kubectl")
	base := os.Getenv("CRDVER_BENCH_BASE")
	var wall, cpu, kWall, kCPU, eWall, bWall, bCPU []time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		r := runTimed(b, bin, args...)
		wall, cpu = append(wall, r.wall), append(cpu, r.cpu)
		b.StopTimer()
		eWall = append(eWall, runTimed(b, engine, args...).wall)
		if kubectl != "" {
			k := runTimed(b, kubectl, "version", "--client")
			kWall, kCPU = append(kWall, k.wall), append(kCPU, k.cpu)
		}
		if base != "" {
			r := runTimed(b, base, args...)
			bWall, bCPU = append(bWall, r.wall), append(bCPU, r.cpu)
		}
		b.StartTimer()
	}
	b.StopTimer()
	sorted := append([]time.Duration{}, wall...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i] < sorted[j] })
	b.ReportMetric(ms(median(wall)), "median-ms")
	b.ReportMetric(ms(sorted[len(sorted)*9/10]), "p90-ms")
	b.ReportMetric(ms(median(cpu)), "cpu-median-ms")
	b.ReportMetric(ms(median(eWall)), "engine-median-ms")
	if kubectl != "" {
		b.ReportMetric(ms(median(kWall)), "kubectl-median-ms")
		b.ReportMetric(float64(median(wall))/float64(median(kWall)), "ratio-wall")
		b.ReportMetric(float64(median(cpu))/float64(median(kCPU)), "ratio-cpu")
	}
	if base != "" {
		b.ReportMetric(ms(median(bWall)), "base-median-ms")
		b.ReportMetric(float64(median(wall))/float64(median(bWall)), "ratio-base")
		if kubectl != "" {
			b.ReportMetric(float64(median(bWall))/float64(median(kWall)), "base-ratio-wall")
			b.ReportMetric(float64(median(bCPU))/float64(median(kCPU)), "base-ratio-cpu")
		}
	}
	if st, err := os.Stat(bin); err == nil {
		b.ReportMetric(float64(st.Size())/1e6, "binary-MB")
	}
}

// BenchmarkEngineThroughFront measures what kubectl-crdver adds to a command it hands to
// crdver-engine (its own start-up, finding the engine, the exec): `versions -f
// testdata/crds/crontab.yaml` through kubectl-crdver and run by crdver-engine directly, in turn.
func BenchmarkEngineThroughFront(b *testing.B) {
	bin := testenv.MustBuildPlugin(b, b.TempDir(), testenv.BuildOptions{})
	engine := filepath.Join(filepath.Dir(bin), testenv.PluginEngine)
	args := []string{"versions", "-f", "testdata/crds/crontab.yaml"}
	var front, direct, frontCPU, directCPU []time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		r := runTimed(b, bin, args...)
		front, frontCPU = append(front, r.wall), append(frontCPU, r.cpu)
		b.StopTimer()
		r = runTimed(b, engine, args...)
		direct, directCPU = append(direct, r.wall), append(directCPU, r.cpu)
		b.StartTimer()
	}
	b.StopTimer()
	b.ReportMetric(ms(median(front)), "front-median-ms")
	b.ReportMetric(ms(median(direct)), "engine-median-ms")
	b.ReportMetric(ms(median(front))-ms(median(direct)), "added-ms")
	b.ReportMetric(ms(median(frontCPU))-ms(median(directCPU)), "added-cpu-ms")
}
