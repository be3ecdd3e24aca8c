package clusterengine_test

// BenchmarkSafeMigrateResume: the part of a checked `kubectl crdver migrate --to V --yes` that
// a run resumed after Ctrl-C does (issue 21: "the resumed part alone keeps the ratio"), against
// the 16-worker ceiling in the same run. Each iteration, on the "checked" fixture of
// BenchmarkSafeMigrate (every safety check on): the command is started, interrupted (SIGINT)
// once etcd holds about CRDVER_BENCH_RESUME_AT (default 0.5) of the objects at the new
// version, then run again with the same checkpoint, timed; its rate is the objects it had left
// (read from etcd at the interruption) over its whole wall time (start-up, plan, the
// preflight it resumes, the rest of the rewrite, the trim). etcd is then read: every object at
// the new version.
//
//	CRDVER_BENCH_SAFE_OBJECTS  objects (default 2000, so that the first run is still rewriting
//	                           when it is interrupted; recorded: 3000)

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	crdinfo "github.com/crdver/kubectl-crdver/crd"
)

func BenchmarkSafeMigrateResume(b *testing.B) {
	bin := buildCommand(b)
	n := envInt("CRDVER_BENCH_SAFE_OBJECTS", 2000)
	at := 0.5
	if v, err := strconv.ParseFloat(os.Getenv("CRDVER_BENCH_RESUME_AT"), 64); err == nil && v > 0 && v < 1 {
		at = v
	}
	_, proven, checked := safeFixtures(b, "r", "", n)
	cache := b.TempDir()

	var tCeil, tResumed time.Duration
	var left int
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		to := proven.flip(b)
		start := time.Now()
		putAll(b, proven.c, proven.fresh(b), 16)
		tCeil += time.Since(start)
		proven.check(b, to)

		to = "v1"
		if crdinfo.StorageVersion(checked.fresh(b)) == "v1" {
			to = "v1beta1"
		}
		cp := filepath.Join(b.TempDir(), "cp.json")
		args := []string{"migrate", checked.crd.Name, "--to", to, "--yes", "--quiet", "--kubeconfig", env.Kubeconfig, "--checkpoint", cp, "-o", "json"}
		first := exec.Command(bin, args...)
		first.Env = append(os.Environ(), "XDG_CACHE_HOME="+cache, "HOME="+cache)
		if err := first.Start(); err != nil {
			b.Fatal(err)
		}
		done := 0
		for deadline := time.Now().Add(10 * time.Minute); ; {
			time.Sleep(100 * time.Millisecond)
			done = storedOn(b, env, checked.group, "items")[checked.group+"/"+to]
			if done >= int(at*float64(n)) || time.Now().After(deadline) {
				break
			}
		}
		_ = first.Process.Signal(os.Interrupt)
		if err := first.Wait(); err == nil {
			b.Fatalf("the first run ended before it was interrupted (%d of %d rewritten): raise CRDVER_BENCH_SAFE_OBJECTS", done, n)
		}
		done = storedOn(b, env, checked.group, "items")[checked.group+"/"+to]
		left += n - done

		resumed := exec.Command(bin, args...)
		resumed.Env = first.Env
		b.StartTimer()
		start = time.Now()
		out, err := resumed.Output()
		tResumed += time.Since(start)
		b.StopTimer()
		if err != nil {
			b.Fatalf("resumed migrate: %v\n%s", err, out)
		}
		checked.check(b, to)
		b.StartTimer()
	}
	b.StopTimer()
	ceil := float64(n*b.N) / tCeil.Seconds()
	res := float64(left) / tResumed.Seconds()
	b.ReportMetric(ceil, "ceiling16-obj/s")
	b.ReportMetric(res, "resumed-obj/s")
	b.ReportMetric(float64(left)/float64(n*b.N), "left-share")
	b.ReportMetric(res/ceil, "resumed/ceiling")
}
