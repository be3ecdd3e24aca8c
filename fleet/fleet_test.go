package fleet

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/spf13/pflag"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/yaml"

	"github.com/crdver/kubectl-crdver/doctor"
	"github.com/crdver/kubectl-crdver/explain"
	"github.com/crdver/kubectl-crdver/migrate"
	"github.com/crdver/kubectl-crdver/outcome"
	"github.com/crdver/kubectl-crdver/plan"
	"github.com/crdver/kubectl-crdver/upgrade"
)

// childEnv makes the test binary a child process for TestExec (what it does: childMain).
const childEnv = "FLEET_TEST_CHILD"

func TestMain(m *testing.M) {
	if mode := os.Getenv(childEnv); mode != "" {
		childMain(mode)
		return
	}
	os.Exit(m.Run())
}

// childMain is a child process of TestExec: it prints a report and an error line and exits 1
// ("report"), or stops on the first interrupt with exit 3 ("stops"), or ignores interrupts
// ("stubborn").
func childMain(mode string) {
	switch mode {
	case "report":
		fmt.Println(`{"items": []}`)
		fmt.Fprintln(os.Stderr, "note: judged as Kubernetes 1.37\nerror: something is wrong")
		os.Exit(1)
	case "kubeconfig":
		// The cluster a run's flags (--context, --kubeconfig) reach, as kubectl loads it.
		cf := genericclioptions.NewConfigFlags(true)
		fs := pflag.NewFlagSet("child", pflag.ContinueOnError)
		cf.AddFlags(fs)
		if err := fs.Parse(os.Args[1:]); err != nil {
			fmt.Fprintln(os.Stderr, "error:", err)
			os.Exit(2)
		}
		cfg, err := cf.ToRESTConfig()
		if err != nil {
			fmt.Fprintln(os.Stderr, "error:", err)
			os.Exit(2)
		}
		fmt.Println(cfg.Host)
		os.Exit(0)
	case "stops", "stubborn":
		sig := make(chan os.Signal, 1)
		signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
		fmt.Println("ready")
		for {
			<-sig
			if mode == "stops" {
				fmt.Fprintln(os.Stderr, "error: interrupted: nothing was written")
				os.Exit(3)
			}
		}
	}
	os.Exit(2)
}

func TestExec(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	run := func(ctx context.Context, mode string) ExecResult {
		return Exec(ctx, Command{Path: exe, Env: append(os.Environ(), childEnv+"="+mode), Grace: 200 * time.Millisecond})
	}
	t.Run("report", func(t *testing.T) {
		res := run(context.Background(), "report")
		if res.ExitCode != 1 || res.Err != nil || strings.TrimSpace(string(res.Stdout)) != `{"items": []}` || res.ErrorLine != "something is wrong" {
			t.Errorf("%+v", res)
		}
	})
	// Interrupted (Ctrl-C, a timeout): the child is sent an interrupt; one that ignores it is
	// killed after the grace period.
	for _, mode := range []string{"stops", "stubborn"} {
		t.Run(mode, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan ExecResult)
			go func() { done <- run(ctx, mode) }()
			time.Sleep(300 * time.Millisecond) // the child's signal handler is in place
			cancel()
			res := <-done
			switch mode {
			case "stops":
				if res.ExitCode != 3 || res.ErrorLine != "interrupted: nothing was written" || res.Err != nil {
					t.Errorf("%+v", res)
				}
			case "stubborn":
				if res.ExitCode != 3 || res.Err == nil {
					t.Errorf("%+v", res)
				}
			}
		})
	}
	t.Run("no executable", func(t *testing.T) {
		res := Exec(context.Background(), Command{Path: filepath.Join(t.TempDir(), "missing")})
		if res.ExitCode != 3 || res.Err == nil {
			t.Errorf("%+v", res)
		}
	})
}

func TestTailBuffer(t *testing.T) {
	b := &tailBuffer{max: 8}
	for _, s := range []string{"0123", "4567", "89ab"} {
		_, _ = b.Write([]byte(s))
	}
	if b.String() != "456789ab" {
		t.Errorf("%q", b.String())
	}
}

func TestParseWaves(t *testing.T) {
	for spec, want := range map[string]Waves{
		"1,3,rest": {Sizes: []int{1, 3}, Rest: true},
		"2":        {Sizes: []int{2}},
		" 1 , 2 ":  {Sizes: []int{1, 2}},
	} {
		got, err := ParseWaves(spec)
		if err != nil || !cmp.Equal(got, want) {
			t.Errorf("%q: %+v, %v", spec, got, err)
		}
	}
	if w, _ := ParseWaves("1,3,rest"); w.String() != "1,3,rest" {
		t.Errorf("String: %q", w.String())
	}
	for _, spec := range []string{"rest", "1,rest,2", "0", "-1", "a", "", "1,,2"} {
		if _, err := ParseWaves(spec); err == nil {
			t.Errorf("%q: no error", spec)
		}
	}
}

func TestSplit(t *testing.T) {
	for _, c := range []struct {
		w    Waves
		n    int
		want [][]int
	}{
		{Waves{Sizes: []int{1, 3}, Rest: true}, 6, [][]int{{0}, {1, 2, 3}, {4, 5}}},
		{Waves{Sizes: []int{2}}, 5, [][]int{{0, 1}, {2, 3}, {4}}},
		{Waves{Sizes: []int{1, 2}}, 6, [][]int{{0}, {1, 2}, {3, 4}, {5}}},
		{Waves{Sizes: []int{5}, Rest: true}, 3, [][]int{{0, 1, 2}}},
		{DefaultWaves, 1, [][]int{{0}}},
		{DefaultWaves, 0, nil},
		{Canary(2), 4, [][]int{{0, 1}, {2, 3}}},
	} {
		if got := c.w.Split(c.n); !cmp.Equal(got, c.want) {
			t.Errorf("%s of %d: %v, want %v", c.w, c.n, got, c.want)
		}
	}
}

func clustersNamed(names ...string) []Cluster {
	var cs []Cluster
	for _, n := range names {
		cs = append(cs, Cluster{Name: n, Context: n})
	}
	return cs
}

// TestRunBoundsAndOrders: at most Parallel runs at once, every cluster once, rows in the order
// given whatever order they end in.
func TestRunBoundsAndOrders(t *testing.T) {
	var inFlight, most atomic.Int32
	names := []string{"a", "b", "c", "d", "e", "f", "g"}
	rows, stopped := Run(context.Background(), clustersNamed(names...), Options{Parallel: 3, Run: func(ctx context.Context, c Cluster) Row {
		n := inFlight.Add(1)
		for {
			m := most.Load()
			if n <= m || most.CompareAndSwap(m, n) {
				break
			}
		}
		time.Sleep(time.Duration(len(names)-int(c.Name[0]-'a')) * time.Millisecond)
		inFlight.Add(-1)
		return Row{Verdict: "v-" + c.Name}
	}})
	if stopped || most.Load() > 3 {
		t.Errorf("stopped %v, at most %d at once", stopped, most.Load())
	}
	for i, r := range rows {
		if r.Name != names[i] || r.Verdict != "v-"+names[i] || r.State != StateDone || r.Need != NeedNothing {
			t.Errorf("row %d: %+v", i, r)
		}
	}
}

// TestRunTimeout: a cluster whose run outlives the timeout is a row that says so, exit 3.
func TestRunTimeout(t *testing.T) {
	rows, _ := Run(context.Background(), clustersNamed("slow", "fast"), Options{Parallel: 2, Timeout: 50 * time.Millisecond, Run: func(ctx context.Context, c Cluster) Row {
		if c.Name == "fast" {
			return Row{Verdict: "safe"}
		}
		<-ctx.Done()
		return Row{State: StateFailed, ExitCode: 3, Error: "killed"}
	}})
	if s := rows[0]; s.State != StateTimedOut || s.ExitCode != 3 || s.Error != "timed out after 50ms (stopped)" || s.Need != NeedRunAgain {
		t.Errorf("slow: %+v", s)
	}
	if f := rows[1]; f.State != StateDone || f.ExitCode != 0 {
		t.Errorf("fast: %+v", f)
	}
}

// TestRunInterrupted: once ctx ends no cluster starts, the one in flight is interrupted, and
// the report says which finished; its exit code is 3.
func TestRunInterrupted(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var once sync.Once
	rows, _ := Run(ctx, clustersNamed("a", "b", "c", "d"), Options{Parallel: 2, Run: func(ctx context.Context, c Cluster) Row {
		if c.Name == "a" {
			return Row{Verdict: "safe"}
		}
		once.Do(cancel) // Ctrl-C while b is in flight
		<-ctx.Done()
		return Row{State: StateFailed, ExitCode: 3}
	}})
	rep := NewReport("plan", rows, ctx.Err() != nil)
	if rep.ExitCode != 3 || !rep.Interrupted || !slices.Equal(rep.Finished, []string{"a"}) {
		t.Errorf("report: exit %d, interrupted %v, finished %v", rep.ExitCode, rep.Interrupted, rep.Finished)
	}
	if b := rep.Row("b"); b.State != StateInterrupted || b.ExitCode != 3 {
		t.Errorf("b: %+v", b)
	}
	if d := rep.Row("d"); d.State != StateNotStarted {
		t.Errorf("d: %+v", d)
	}
	if s := rep.Summary(); s != "interrupted: 1 of 4 clusters finished (a); the others did not" {
		t.Errorf("summary: %q", s)
	}
}

// TestRunStop: Stop ends the run at the first row it says so for; no cluster starts after it.
func TestRunStop(t *testing.T) {
	var started []string
	var mu sync.Mutex
	rows, stopped := Run(context.Background(), clustersNamed("a", "b", "c"), Options{Parallel: 1,
		Run: func(ctx context.Context, c Cluster) Row {
			mu.Lock()
			started = append(started, c.Name)
			mu.Unlock()
			return Row{ExitCode: map[string]int{"b": 1}[c.Name]}
		},
		Stop: func(r Row) bool { return r.ExitCode != 0 },
	})
	if !stopped || !slices.Equal(started, []string{"a", "b"}) || rows[2].State != StateNotStarted {
		t.Errorf("stopped %v, started %v, c %+v", stopped, started, rows[2])
	}
}

// TestRollout: waves of the unique clusters (b is a's cluster under another name: it follows
// a), the rollout stops at the first cluster not upgraded, or goes on with KeepGoing.
func TestRollout(t *testing.T) {
	ids := map[string]string{"a": "uid-1", "b": "uid-1", "c": "uid-2", "d": "uid-3", "e": "uid-4"}
	probe := func(ctx context.Context, c Cluster) Row {
		return Row{ClusterID: ids[c.Name], KubernetesVersion: "v1.37.1"}
	}
	for _, keepGoing := range []bool{false, true} {
		t.Run(fmt.Sprint("keepGoing=", keepGoing), func(t *testing.T) {
			var ran []string
			var mu sync.Mutex
			o := RolloutOptions{Options: Options{Parallel: 1}, Waves: DefaultWaves, KeepGoing: keepGoing, Probe: probe}
			ro := PlanRollout(context.Background(), clustersNamed("a", "b", "c", "d", "e"), o)
			if got := ro.Preview("upgrade").Waves; !cmp.Equal(got, [][]string{{"a"}, {"c", "d", "e"}}) {
				t.Fatalf("waves: %v", got)
			}
			o.Run = func(ctx context.Context, c Cluster) Row {
				mu.Lock()
				ran = append(ran, c.Name)
				mu.Unlock()
				if c.Name == "c" {
					return Row{Verdict: upgrade.ResultRefused, ExitCode: 1}
				}
				return Row{Verdict: upgrade.ResultComplete, Upgraded: true}
			}
			rep := ro.Run(context.Background(), o)
			if b := rep.Row("b"); b.SameAs != "a" || b.State != StateSkipped || !b.Upgraded || b.KubernetesVersion != "v1.37.1" {
				t.Errorf("b: %+v", b)
			}
			if keepGoing {
				if !slices.Equal(ran, []string{"a", "c", "d", "e"}) || rep.Stopped != "" || rep.ExitCode != 1 {
					t.Errorf("ran %v, stopped %q, exit %d", ran, rep.Stopped, rep.ExitCode)
				}
				return
			}
			if !slices.Equal(ran, []string{"a", "c"}) || !strings.Contains(rep.Stopped, "wave 2 of 2 at c") || rep.ExitCode != 1 {
				t.Errorf("ran %v, stopped %q, exit %d", ran, rep.Stopped, rep.ExitCode)
			}
			for _, n := range []string{"d", "e"} {
				if r := rep.Row(n); r.State != StateNotStarted || r.Wave != 2 || !strings.Contains(r.Error, "stopped before") {
					t.Errorf("%s: %+v", n, r)
				}
			}
		})
	}
}

// TestPlanWaves: the clusters ready for the release (exit 0, no release before the target)
// make the waves, the others are held back; the Argo CD strategy selects the waves' clusters
// step by step, and its YAML is that strategy.
func TestPlanWaves(t *testing.T) {
	rows := []Row{
		{Cluster: Cluster{Name: "a"}, State: StateDone},
		{Cluster: Cluster{Name: "b"}, State: StateDone, ExitCode: 1},
		{Cluster: Cluster{Name: "c"}, State: StateDone, Path: []string{"v1", "v2"}},
		{Cluster: Cluster{Name: "d"}, State: StateDone, ClusterID: "x"},
		{Cluster: Cluster{Name: "e"}, State: StateUnreachable, ExitCode: 3},
		{Cluster: Cluster{Name: "f"}, State: StateDone, ClusterID: "x"},
		{Cluster: Cluster{Name: "g"}, State: StateDone},
	}
	rep := NewReport("plan -f r/", rows, false)
	rep.PlanWaves(Waves{Sizes: []int{1}, Rest: true}, "")
	if !cmp.Equal(rep.Waves, [][]string{{"a"}, {"d", "g"}}) || !slices.Equal(rep.HeldBack, []string{"b", "c", "e"}) {
		t.Errorf("waves %v, held back %v", rep.Waves, rep.HeldBack)
	}
	if rep.Row("f").SameAs != "d" || rep.Row("g").Wave != 2 || rep.ExitCode != 3 {
		t.Errorf("f %+v, g %+v, exit %d", rep.Row("f"), rep.Row("g"), rep.ExitCode)
	}
	var parsed map[string]*ArgoCDStrategy
	if err := yaml.UnmarshalStrict([]byte(rep.ArgoCD.YAML()), &parsed); err != nil {
		t.Fatalf("%v\n%s", err, rep.ArgoCD.YAML())
	}
	if d := cmp.Diff(rep.ArgoCD, parsed["strategy"]); d != "" {
		t.Errorf("the YAML is not the strategy (-want +got):\n%s\n%s", d, rep.ArgoCD.YAML())
	}
	step := rep.ArgoCD.RollingSync.Steps[1].MatchExpressions[0]
	if rep.ArgoCD.Type != "RollingSync" || step.Key != DefaultWaveLabel || step.Operator != "In" || !slices.Equal(step.Values, []string{"d", "g"}) {
		t.Errorf("%+v", rep.ArgoCD)
	}
	odd := RollingSyncOf([][]string{{"true", "1.2", "prod-eu"}}, "team.example.com/cluster")
	if err := yaml.UnmarshalStrict([]byte(odd.YAML()), &parsed); err != nil || !cmp.Equal(parsed["strategy"], odd) {
		t.Errorf("values that YAML would read as other types: %v\n%s", err, odd.YAML())
	}
	if bad := BadLabelValues([][]string{{"ok", "arn:aws:eks:eu-west-1:1:cluster/prod"}}); !slices.Equal(bad, []string{"arn:aws:eks:eu-west-1:1:cluster/prod"}) {
		t.Errorf("bad label values: %v", bad)
	}
}

func TestContexts(t *testing.T) {
	cfg := clientcmdapi.NewConfig()
	for _, n := range []string{"prod-eu", "prod-us", "staging", "dev"} {
		cfg.Contexts[n] = &clientcmdapi.Context{Cluster: n}
	}
	got, err := Contexts(cfg, []string{"staging", "prod-*", "prod-eu"}, "/k")
	want := []Cluster{{Name: "staging", Context: "staging", Kubeconfig: "/k"}, {Name: "prod-eu", Context: "prod-eu", Kubeconfig: "/k"}, {Name: "prod-us", Context: "prod-us", Kubeconfig: "/k"}}
	if err != nil || !cmp.Equal(got, want) {
		t.Errorf("%+v, %v", got, err)
	}
	for _, names := range [][]string{{"nope"}, {"qa-*"}, {""}, {"[x"}} {
		var se *SelectionError
		if _, err := Contexts(cfg, names, ""); !errors.As(err, &se) {
			t.Errorf("%v: %v", names, err)
		}
	}
	if _, err := Contexts(cfg, []string{"nope"}, ""); err == nil || !strings.Contains(err.Error(), "it has dev, prod-eu, prod-us, staging") {
		t.Errorf("the error names the contexts there are: %v", err)
	}
	all, err := AllContexts(cfg, "")
	var names []string
	for _, c := range all {
		names = append(names, c.Name)
	}
	if err != nil || !slices.Equal(names, []string{"dev", "prod-eu", "prod-us", "staging"}) {
		t.Errorf("%v, %v", names, err)
	}
}

// TestKubeconfigDir: one cluster per kubeconfig file, named by the file; files that are not
// kubeconfigs, or name no context to use, are left out with a note; hidden files are skipped.
func TestKubeconfigDir(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, contexts []string, current string) {
		cfg := clientcmdapi.NewConfig()
		for _, c := range contexts {
			cfg.Clusters[c] = &clientcmdapi.Cluster{Server: "https://" + c}
			cfg.Contexts[c] = &clientcmdapi.Context{Cluster: c}
		}
		cfg.CurrentContext = current
		if err := clientcmd.WriteToFile(*cfg, filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	write("prod-1.kubeconfig", []string{"prod-1-admin@prod-1"}, "prod-1-admin@prod-1")
	write("prod-2-kubeconfig", []string{"only"}, "")
	write("two.yaml", []string{"x", "y"}, "")
	write(".hidden", []string{"h"}, "h")
	write("dup.yaml", []string{"d"}, "d")
	write("dup.conf", []string{"d"}, "d")
	if err := os.WriteFile(filepath.Join(dir, "README.md"), []byte("# the fleet's kubeconfigs\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	got, notes, err := KubeconfigDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	want := []Cluster{
		{Name: "dup.conf", Kubeconfig: filepath.Join(dir, "dup.conf")},
		{Name: "dup.yaml", Kubeconfig: filepath.Join(dir, "dup.yaml")},
		{Name: "prod-1", Kubeconfig: filepath.Join(dir, "prod-1.kubeconfig")},
		{Name: "prod-2", Context: "only", Kubeconfig: filepath.Join(dir, "prod-2-kubeconfig")},
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("clusters (-want +got):\n%s", d)
	}
	if len(notes) != 2 || !strings.Contains(notes[0], "README.md: not a kubeconfig") || !strings.Contains(notes[1], "two.yaml: 2 contexts and no current-context") {
		t.Errorf("notes: %q", notes)
	}
	var se *SelectionError
	if _, _, err := KubeconfigDir(t.TempDir()); !errors.As(err, &se) {
		t.Errorf("an empty folder: %v", err)
	}
	if _, _, err := KubeconfigDir(filepath.Join(dir, "missing")); !errors.As(err, &se) {
		t.Errorf("a missing folder: %v", err)
	}
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestSummarize: each report a row is read from gives the row's verdict, blocker, objects and
// need as the report says them.
func TestSummarize(t *testing.T) {
	yes, no := true, false
	planReport := &plan.Report{Items: []plan.Item{
		{CRD: "a.example.com", Verdict: plan.VerdictStricter, Stricter: []plan.SchemaChange{{Version: "v1", Path: "spec.x", Change: "maximum none → 3"}}},
		{CRD: "b.example.com", Verdict: plan.VerdictInvalidOnRecreate, InvalidOnRecreateReasons: []string{"2 objects violate the new schema"},
			Objects: plan.Objects{Findings: []plan.Finding{{Name: "o1", Kinds: []plan.Kind{plan.KindInvalidOnRecreate}}, {Name: "o2", Kinds: []plan.Kind{plan.KindInvalidOnRecreate}}, {Name: "o3"}}}},
	}}
	for _, c := range []struct {
		name   string
		kind   Kind
		exit   int
		report any
		in     *bool
		want   Row
	}{
		{"plan", KindPlan, 1, planReport, nil, Row{Verdict: plan.VerdictInvalidOnRecreate, Blocker: "b.example.com: 2 objects violate the new schema", Objects: 2, Need: NeedFixObjects, ExitCode: 1}},
		{"plan in place", KindPlan, 0, &plan.Report{Items: []plan.Item{{CRD: "a", Verdict: plan.VerdictSafe}}}, &yes, Row{Verdict: plan.VerdictSafe, Need: NeedInPlace, InPlace: &yes}},
		{"plan stricter", KindPlan, 0, &plan.Report{Items: planReport.Items[:1]}, &no, Row{Verdict: plan.VerdictStricter, Blocker: "a.example.com: v1 spec.x: maximum none → 3", Need: NeedUpgrade, InPlace: &no}},
		{"path", KindPlanPath, 0, &plan.PathReport{Reachable: true, Hops: []plan.Hop{{Index: 1, Release: "v2", Plan: &plan.Report{}}, {Index: 2, Release: "v3", Plan: &plan.Report{}}}}, nil,
			Row{Verdict: plan.VerdictSafe, Path: []string{"v2", "v3"}, Need: NeedPath([]string{"v2"})}},
		{"path direct", KindPlanPath, 1, &plan.PathReport{Reachable: true, Direct: true, Hops: []plan.Hop{{Index: 1, Release: "v3", Plan: planReport}}}, nil,
			Row{Verdict: plan.VerdictInvalidOnRecreate, Blocker: "b.example.com: 2 objects violate the new schema", Objects: 2, Need: NeedFixObjects, ExitCode: 1}},
		{"no path", KindPlanPath, 1, &plan.PathReport{Verdict: "v1beta1 needs a release not given"}, nil,
			Row{Verdict: plan.VerdictBreaking, Blocker: "v1beta1 needs a release not given", Need: NeedNoPath, ExitCode: 1}},
		{"doctor", KindDoctor, 1, &doctor.Report{Items: []doctor.Item{{CRD: "a", Findings: []doctor.Finding{{Severity: doctor.SeverityWarning, Message: "w"}, {Severity: doctor.SeverityError, Message: "e"}}}}, Summary: doctor.Summary{Errors: 1, Warnings: 1}}, nil,
			Row{Verdict: doctor.SeverityError, Blocker: "a: e", Need: "fixes (1 errors)", ExitCode: 1}},
		{"versions", KindVersionsAll, 0, map[string]any{"items": []explain.Summary{{Name: "a", MigrationPending: &yes}, {Name: "b", MigrationPending: &no}}}, nil,
			Row{Verdict: "migration pending", Blocker: "1 of 2 CRDs: a", Need: "storage migrations"}},
		{"upgrade refused", KindUpgrade, 1, &upgrade.Report{Preflight: upgrade.Preflight{Refused: true, DataLoss: []upgrade.ObjectFinding{{CRD: "g.example.com", Namespace: "ns", Name: "o", Fields: []string{"spec.legacy"}}}},
			Outcome: upgrade.Outcome{Result: upgrade.ResultRefused, Outcome: outcome.Outcome{Message: "refused: 1 object would lose fields", ExitCode: 1}}}, nil,
			Row{Verdict: upgrade.ResultRefused, Blocker: "refused: 1 object would lose fields; first: g.example.com ns/o loses spec.legacy", Need: "what the upgrade refused for", ExitCode: 1}},
		{"upgrade complete", KindUpgrade, 0, &upgrade.Report{Outcome: upgrade.Outcome{Result: upgrade.ResultComplete, Applied: true, Verified: true}}, nil,
			Row{Verdict: upgrade.ResultComplete, Upgraded: true, Need: NeedNothing}},
		{"upgrade status", KindUpgradeStatus, 0, &upgrade.Status{Next: upgrade.NextNothing}, nil, Row{Verdict: upgrade.NextNothing, InPlace: &yes, Need: NeedNothing}},
		{"upgrade status held", KindUpgradeStatus, 1, &upgrade.Status{Next: upgrade.NextWait, HeldBy: "kubectl-crdver@host"}, nil,
			Row{Verdict: upgrade.NextWait, InPlace: &no, Blocker: "held by kubectl-crdver@host", Need: "the run in progress to end", ExitCode: 1}},
		{"migrate status", KindMigrateStatus, 1, &migrate.Status{Pending: true, Reason: "no run recorded"}, nil,
			Row{Verdict: "migration pending", Blocker: "no run recorded", Need: "a storage migration", ExitCode: 1}},
	} {
		t.Run(c.name, func(t *testing.T) {
			row := Row{InPlace: c.in}
			if err := Summarize(&row, c.kind, c.exit, mustJSON(t, c.report)); err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(c.want, row); d != "" {
				t.Errorf("(-want +got):\n%s", d)
			}
		})
	}
	row := Row{Error: "cannot reach the API server"}
	if err := Summarize(&row, KindPlan, 3, nil); err != nil || row.State != StateFailed || row.ExitCode != 3 || row.Error != "cannot reach the API server" {
		t.Errorf("no report: %+v, %v", row, err)
	}
	if err := Summarize(&Row{}, KindPlan, 0, []byte("not json")); err == nil {
		t.Error("a report that is not JSON: no error")
	}
	if err := Summarize(&Row{}, Kind("other"), 0, []byte("{}")); err == nil {
		t.Error("an unknown kind: no error")
	}
}

// TestContextsOfMergedKubeconfig: KUBECONFIG naming two files, contexts split across them (a
// context of one file using a cluster the other defines), is loaded as kubectl merges it
// (plugin's fleetFlags.clusters: ConfigFlags' loader): --all-contexts and --contexts select every
// context of both files, each cluster with no kubeconfig file of its own, so its run (a child
// process given --context alone, with the fleet's environment, as plugin's clusterArgs and
// fleet.Exec pass them) reaches the server the merged config names. A --kubeconfig given
// explicitly is kept for every child (kubectl's rule: that file alone, KUBECONFIG ignored).
func TestContextsOfMergedKubeconfig(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, clusters map[string]string, contexts map[string]string, current string) string {
		cfg := clientcmdapi.NewConfig()
		for n, server := range clusters {
			cfg.Clusters[n] = &clientcmdapi.Cluster{Server: server}
			cfg.AuthInfos[n] = &clientcmdapi.AuthInfo{Token: "t-" + n}
		}
		for ctx, cluster := range contexts {
			cfg.Contexts[ctx] = &clientcmdapi.Context{Cluster: cluster, AuthInfo: cluster}
		}
		cfg.CurrentContext = current
		file := filepath.Join(dir, name)
		if err := clientcmd.WriteToFile(*cfg, file); err != nil {
			t.Fatal(err)
		}
		return file
	}
	a := write("a.yaml", map[string]string{"east": "https://127.0.0.1:6441"}, map[string]string{"a-east": "east", "a-east-admin": "east"}, "a-east")
	// b's second context uses a's cluster and user: it is whole only in the merged config.
	b := write("b.yaml", map[string]string{"west": "https://127.0.0.1:6442"}, map[string]string{"b-west": "west", "b-east": "east"}, "")
	server := map[string]string{"a-east": "https://127.0.0.1:6441", "a-east-admin": "https://127.0.0.1:6441", "b-west": "https://127.0.0.1:6442", "b-east": "https://127.0.0.1:6441"}
	t.Setenv("KUBECONFIG", a+string(filepath.ListSeparator)+b)
	t.Setenv(childEnv, "kubeconfig") // the children are this binary, reading their flags as kubectl does

	load := func(args ...string) (clientcmdapi.Config, string) {
		cf := genericclioptions.NewConfigFlags(true)
		fs := pflag.NewFlagSet("fleet", pflag.ContinueOnError)
		cf.AddFlags(fs)
		if err := fs.Parse(args); err != nil {
			t.Fatal(err)
		}
		cfg, err := cf.ToRawKubeConfigLoader().RawConfig()
		if err != nil {
			t.Fatal(err)
		}
		return cfg, *cf.KubeConfig
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	// reach is the server each cluster's run reaches (its flags as plugin's clusterArgs).
	reach := func(t *testing.T, cs []Cluster) map[string]string {
		got := map[string]string{}
		for _, c := range cs {
			var args []string
			if c.Kubeconfig != "" {
				args = append(args, "--kubeconfig="+c.Kubeconfig)
			}
			if c.Context != "" {
				args = append(args, "--context="+c.Context)
			}
			res := Exec(context.Background(), Command{Path: exe, Args: args})
			if res.ExitCode != 0 {
				t.Fatalf("%s: the child's run exited %d: %s", c.Name, res.ExitCode, res.ErrorLine)
			}
			got[c.Name] = strings.TrimSpace(string(res.Stdout))
		}
		return got
	}

	cfg, _ := load()
	t.Run("all-contexts", func(t *testing.T) {
		cs, err := AllContexts(&cfg, "")
		if err != nil {
			t.Fatal(err)
		}
		want := []Cluster{{Name: "a-east", Context: "a-east"}, {Name: "a-east-admin", Context: "a-east-admin"}, {Name: "b-east", Context: "b-east"}, {Name: "b-west", Context: "b-west"}}
		if diff := cmp.Diff(want, cs); diff != "" {
			t.Fatalf("clusters (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff(server, reach(t, cs)); diff != "" {
			t.Errorf("servers the runs reach (-want +got):\n%s", diff)
		}
	})
	t.Run("contexts", func(t *testing.T) {
		cs, err := Contexts(&cfg, []string{"b-*", "a-east"}, "")
		if err != nil {
			t.Fatal(err)
		}
		want := []Cluster{{Name: "b-east", Context: "b-east"}, {Name: "b-west", Context: "b-west"}, {Name: "a-east", Context: "a-east"}}
		if diff := cmp.Diff(want, cs); diff != "" {
			t.Fatalf("clusters (-want +got):\n%s", diff)
		}
		got := reach(t, cs)
		for _, c := range cs {
			if got[c.Name] != server[c.Name] {
				t.Errorf("%s: the run reaches %q, want %q", c.Name, got[c.Name], server[c.Name])
			}
		}
	})
	// --kubeconfig b.yaml: that file alone; b-east's cluster is not in it, so its run does not
	// reach a.yaml's server (client-go falls back to its default).
	t.Run("kubeconfig given", func(t *testing.T) {
		cfg, file := load("--kubeconfig", b)
		cs, err := AllContexts(&cfg, file)
		if err != nil {
			t.Fatal(err)
		}
		want := []Cluster{{Name: "b-east", Context: "b-east", Kubeconfig: b}, {Name: "b-west", Context: "b-west", Kubeconfig: b}}
		if diff := cmp.Diff(want, cs); diff != "" {
			t.Fatalf("clusters (-want +got):\n%s", diff)
		}
		if got := reach(t, cs[1:]); got["b-west"] != server["b-west"] {
			t.Errorf("b-west: the run reaches %q, want %q", got["b-west"], server["b-west"])
		}
		if got := reach(t, cs[:1]); got["b-east"] == server["b-east"] {
			t.Errorf("b-east through %s alone reached %s, a server only a.yaml names: the explicit file was merged with KUBECONFIG", b, got["b-east"])
		}
	})
}
