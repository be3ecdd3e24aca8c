package fleet

import (
	"context"
	"maps"
	"testing"

	"github.com/crdver/kubectl-crdver/fleet"
)

// TestFleetDoctorAndDryRunAgreeWithSingleRuns: doctor of the release's CRD (--all-contexts) and
// upgrade --dry-run (--contexts) on three clusters of two Kubernetes minors, one of whose
// objects lose a field at the release's version (doctor finds it, its dry run would refuse):
// each fleet row has the exit code and verdict of the single run of its cluster, the fleet
// exits with the worst, and neither run writes anything (every resourceVersion of the CRD and
// its objects unchanged on every cluster).
func TestFleetDoctorAndDryRunAgreeWithSingleRuns(t *testing.T) {
	const group = "cmds.fleet.example.com"
	release, kubeconfig, byName := gadgetFleet(t, t.TempDir(), group, 3, "b")
	t.Cleanup(func() {
		for _, e := range byName {
			_ = e.DeleteCRD(context.Background(), "gadgets."+group)
		}
	})
	before := map[string]string{}
	for name, e := range byName {
		before[name] = liveState(t, e, group)
	}
	r := newRunner(t)
	for _, c := range []struct {
		name  string
		kind  fleet.Kind
		args  []string
		fleet []string
	}{
		{"doctor", fleet.KindDoctor, []string{"doctor", "gadgets." + group}, []string{"--all-contexts"}},
		{"upgrade --dry-run", fleet.KindUpgrade, []string{"upgrade", "-f", release, "--dry-run"}, []string{"--contexts", "a,b,c"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			type single struct {
				code    int
				verdict string
			}
			singles := map[string]single{}
			worst := 0
			for name := range byName {
				res := r.Run(append(append([]string{}, c.args...), "--kubeconfig", kubeconfig, "--context", name, "-o", "json")...)
				row := fleet.Row{}
				if err := fleet.Summarize(&row, c.kind, res.Code, []byte(res.Stdout)); err != nil {
					t.Fatalf("%s alone (exit %d): %v\n%s", name, res.Code, err, res.Stderr)
				}
				singles[name] = single{res.Code, row.Verdict}
				worst = max(worst, res.Code)
				t.Logf("%s alone: exit %d, verdict %q, %q; %s", name, res.Code, row.Verdict, row.Blocker, lastLine(res.Stderr))
			}
			// b's objects lose spec.legacy at v1: doctor finds it, the dry run would refuse.
			if singles["b"].code != 1 || singles["a"].code != 0 || singles["c"].code != 0 {
				t.Errorf("the single runs: %+v (want b exit 1; a and c exit 0)", singles)
			}
			res := r.Run(append(append(append([]string{}, c.args...), "--kubeconfig", kubeconfig, "-o", "json"), c.fleet...)...)
			rep := report(t, res)
			if res.Code != worst || rep.ExitCode != worst {
				t.Errorf("fleet exit %d, report's %d: want the worst single run's, %d\n%s", res.Code, rep.ExitCode, worst, res.Stderr)
			}
			rows := map[string]single{}
			for _, row := range rep.Rows {
				rows[row.Name] = single{row.ExitCode, row.Verdict}
			}
			if !maps.Equal(rows, singles) {
				t.Errorf("the fleet's rows (exit, verdict) %+v, the single runs' %+v\n%s", rows, singles, res.Stderr)
			}
			for name, e := range byName {
				if got := liveState(t, e, group); got != before[name] {
					t.Errorf("%s: written (resourceVersions %s, before %s)", name, got, before[name])
				}
			}
		})
	}
}
