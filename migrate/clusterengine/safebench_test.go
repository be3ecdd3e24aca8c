package clusterengine_test

// BenchmarkSafeMigrate: `kubectl crdver migrate --to V --yes` (the built binary: plan,
// preflight, storage switch, rewrite, trim) against the machine's ceiling and the naive
// runbook IN THE SAME RUN, interleaved per iteration, so that the ratios hold while the load
// of a shared machine changes. Each iteration, on the same objects:
//
//	ceiling   16 workers doing nothing but PUT the listed objects (putAll), after a storage
//	          switch that is not timed
//	runbook   kubectl get items.<group> -A -o json | kubectl replace -f -, after a storage
//	          switch that is not timed
//	checked   the command, its safety checks on: the fixture's v1 has a field v1beta1 lacks (the
//	          loss comparison runs) and an unbound ValidatingAdmissionPolicy (it costs the
//	          server nothing) matches its updates, so every object's write is sent as a dry run:
//	          the full preflight; its own storage switch is timed
//	proven    the command on a CRD whose versions have identical schemas and which no admission
//	          webhook or policy matches (the preflight says why its passes are not needed)
//
// and every run ends with etcd read directly: every object must be at the new version.
//
//	CRDVER_BENCH_SAFE_OBJECTS  objects per CRD (default 500; recorded: 3000 and 30000)
//	CRDVER_BENCH_SAFE_METHODS  comma-separated subset of ceiling,runbook,checked,proven
//	CRDVER_BENCH_BIN           the kubectl-crdver binary to time (default: built from this tree)
//	CRDVER_BENCH_SERVER_PROFILE  a folder: the API server's CPU profile (its /debug/pprof) is
//	                             taken during the first iteration's checked and proven runs
//	                             and the ceiling, for CRDVER_BENCH_SERVER_PROFILE_SECONDS each
//	                             (default 8), into <folder>/<method>.pprof

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	crdinfo "github.com/crdver/kubectl-crdver/crd"
	"github.com/crdver/kubectl-crdver/internal/testenv"
)

func BenchmarkSafeMigrate(b *testing.B) {
	bin := buildCommand(b)
	kubectl, kubectlErr := exec.LookPath("kubectl")
	n := envInt("CRDVER_BENCH_SAFE_OBJECTS", 500)
	methods, proven, checked := safeFixtures(b, "", "ceiling,runbook,checked,proven", n)
	cache := b.TempDir()

	// other is the version f's objects are not stored at.
	other := func(f *benchFixture) string {
		if crdinfo.StorageVersion(f.fresh(b)) == "v1" {
			return "v1beta1"
		}
		return "v1"
	}
	profDir := os.Getenv("CRDVER_BENCH_SERVER_PROFILE")
	profSecs := envInt("CRDVER_BENCH_SERVER_PROFILE_SECONDS", 8)
	// profile takes the API server's CPU profile while fn runs (first iteration only).
	profile := func(i int, name string, fn func() time.Duration) time.Duration {
		if profDir == "" || i > 0 {
			return fn()
		}
		done := make(chan error, 1)
		go func() {
			raw, err := proven.c.Kube.CoreV1().RESTClient().Get().AbsPath("/debug/pprof/profile").
				Param("seconds", fmt.Sprint(profSecs)).Timeout(time.Duration(profSecs+30) * time.Second).DoRaw(context.Background())
			if err == nil {
				err = os.WriteFile(filepath.Join(profDir, name+".pprof"), raw, 0o644)
			}
			done <- err
		}()
		d := fn()
		if err := <-done; err != nil {
			b.Logf("server profile of %s: %v", name, err)
		}
		return d
	}
	cpu := map[*benchFixture]time.Duration{}
	command := func(f *benchFixture) time.Duration {
		to := other(f)
		d, c := runMigrate(b, bin, env.Kubeconfig, cache, f, to)
		cpu[f] += c
		f.check(b, to)
		return d
	}
	timed := func(f *benchFixture, method func()) time.Duration {
		to := f.flip(b)
		start := time.Now()
		method()
		d := time.Since(start)
		f.check(b, to)
		return d
	}

	var tCeil, tRunbook, tChecked, tProven time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if methods["ceiling"] {
			tCeil += profile(i, "ceiling", func() time.Duration {
				return timed(proven, func() { putAll(b, proven.c, proven.fresh(b), 16) })
			})
		}
		if methods["runbook"] {
			if kubectlErr != nil {
				b.Fatal("kubectl is not on PATH")
			}
			tRunbook += timed(proven, func() {
				script := fmt.Sprintf("set -o pipefail; %[1]s --kubeconfig %[2]s get items.%[3]s -A -o json | %[1]s --kubeconfig %[2]s replace -f - >/dev/null", kubectl, env.Kubeconfig, proven.group)
				if out, err := exec.Command("bash", "-c", script).CombinedOutput(); err != nil {
					b.Fatalf("%v: %s", err, out)
				}
			})
		}
		if methods["checked"] {
			tChecked += profile(i, "checked", func() time.Duration { return command(checked) })
		}
		if methods["proven"] {
			tProven += profile(i, "proven", func() time.Duration { return command(proven) })
		}
	}
	b.StopTimer()
	reportRates(b, n, map[string]time.Duration{"ceiling16": tCeil, "runbook": tRunbook, "checked": tChecked, "proven": tProven},
		map[string]time.Duration{"checked": cpu[checked], "proven": cpu[proven]})
}

// safeFixtures is what the safety benchmarks share: the methods asked for
// (CRDVER_BENCH_SAFE_METHODS, else all of def) and two fixtures of n objects, their groups
// prefixed: proven (identical schemas, no admission) and checked (the schemas differ and an
// unbound ValidatingAdmissionPolicy matches: every check runs).
func safeFixtures(b *testing.B, prefix, def string, n int) (methods map[string]bool, proven, checked *benchFixture) {
	methods = map[string]bool{}
	for _, m := range strings.Split(envString("CRDVER_BENCH_SAFE_METHODS", def), ",") {
		methods[strings.TrimSpace(m)] = true
	}
	proven = newBenchFixture(b, prefix+"proven", n)
	checked = newBenchFixture(b, prefix+"checked", n)
	checked.differ(b)
	checked.guard(b)
	return methods, proven, checked
}

// reportRates reports the objects/s of each method timed (wall: its total over n×b.N objects),
// the commands' own CPU (cpu, by method) per 1,000 objects and as a share of their wall time,
// and the ratios of checked and proven to the ceiling and the runbook.
func reportRates(b *testing.B, n int, wall, cpu map[string]time.Duration) {
	rate := func(m string) float64 { return float64(n*b.N) / wall[m].Seconds() }
	for m, d := range wall {
		if d > 0 {
			b.ReportMetric(rate(m), m+"-obj/s")
		}
	}
	for m, c := range cpu {
		if wall[m] > 0 {
			b.ReportMetric(c.Seconds()*1000/float64(n*b.N), m+"-cpu-s/1k")
			b.ReportMetric(c.Seconds()/wall[m].Seconds(), m+"-cpu/wall")
		}
	}
	for _, m := range []string{"checked", "proven"} {
		for base, name := range map[string]string{"ceiling16": "ceiling", "runbook": "runbook"} {
			if wall[m] > 0 && wall[base] > 0 {
				b.ReportMetric(rate(m)/rate(base), m+"/"+name)
			}
		}
	}
}

func envString(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

// buildCommand builds kubectl-crdver (and crdver-engine beside it) into a temporary folder, or returns CRDVER_BENCH_BIN (a
// binary built elsewhere, e.g. from an older commit for a before/after comparison).
func buildCommand(b *testing.B) string {
	b.Helper()
	if bin := os.Getenv("CRDVER_BENCH_BIN"); bin != "" {
		return bin
	}
	bin := testenv.MustBuildPlugin(b, b.TempDir(), testenv.BuildOptions{}) // and crdver-engine beside it
	return bin
}

// differ gives the fixture's v1 an optional field v1beta1 lacks: the versions' schemas
// differ, so nothing proves the preflight's checks needless and the command runs them all.
func (f *benchFixture) differ(b *testing.B) {
	b.Helper()
	cur := f.fresh(b)
	for i := range cur.Spec.Versions {
		if cur.Spec.Versions[i].Name == "v1" {
			cur.Spec.Versions[i].Schema.OpenAPIV3Schema.Properties["spec"].Properties["note"] = apiextensionsv1.JSONSchemaProps{Type: "string"}
		}
	}
	if _, err := f.c.CRDs.ApiextensionsV1().CustomResourceDefinitions().Update(context.Background(), cur, metav1.UpdateOptions{}); err != nil {
		b.Fatal(err)
	}
}

// runMigrate runs `kubectl-crdver migrate CRD --to to --yes` (safety checks as the command
// decides) against kubeconfig (runCommand).
func runMigrate(b *testing.B, bin, kubeconfig, cache string, f *benchFixture, to string) (wall, cpu time.Duration) {
	b.Helper()
	return runCommand(b, bin, cache, "migrate", f.crd.Name, "--to", to, "--yes", "--quiet", "--kubeconfig", kubeconfig,
		"--checkpoint", filepath.Join(b.TempDir(), "cp.json"), "-o", "json")
}

// runCommand runs the built command with args (its cache and HOME in cache) and returns how
// long it took and its CPU time (user + system: on a machine where the command and the API
// server share the cores, what the command spends is taken from the server); it fails the
// benchmark, with the command's output, if the command fails.
func runCommand(b *testing.B, bin, cache string, args ...string) (wall, cpu time.Duration) {
	b.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), "XDG_CACHE_HOME="+cache, "HOME="+cache)
	start := time.Now()
	out, err := cmd.Output()
	wall = time.Since(start)
	if err != nil {
		stderr := ""
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = string(ee.Stderr)
		}
		b.Fatalf("%s: %v\n%s\n%s", strings.Join(args[:2], " "), err, stderr, out)
	}
	return wall, cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
}

// guard installs a ValidatingAdmissionPolicy without a binding (it refuses nothing and costs the
// API server nothing) that matches updates of the fixture's objects: the preflight cannot
// prove its dry runs needless and sends one per object.
func (f *benchFixture) guard(b *testing.B) {
	b.Helper()
	vap := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
		"metadata": map[string]any{"name": f.crd.Name},
		"spec": map[string]any{
			"matchConstraints": map[string]any{"resourceRules": []any{map[string]any{
				"apiGroups": []any{f.group}, "apiVersions": []any{"*"}, "resources": []any{"items"}, "operations": []any{"UPDATE"},
			}}},
			"validations": []any{map[string]any{"expression": "true"}},
		},
	}}
	res := f.c.Dynamic.Resource(schema.GroupVersionResource{Group: "admissionregistration.k8s.io", Version: "v1", Resource: "validatingadmissionpolicies"})
	if _, err := res.Create(context.Background(), vap, metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = res.Delete(context.Background(), f.crd.Name, metav1.DeleteOptions{}) })
}
