package fleet

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	"github.com/crdver/kubectl-crdver/fleet"
	"github.com/crdver/kubectl-crdver/internal/docblock"
	"github.com/crdver/kubectl-crdver/internal/testcrd"
	"github.com/crdver/kubectl-crdver/internal/testenv"
	"github.com/crdver/kubectl-crdver/internal/testwebhook"
	"github.com/crdver/kubectl-crdver/plan"
)

// crontabRelease is a CronTab release of group fleet.example.com from
// testdata/crds/crontab-webhook.yaml holding versions (the last the storage version): v1beta1
// spec.hostPort, v1 and v2 (v1's schema) spec.host and spec.port; conversion by webhook url
// (None when ""), and spec.image at most maxImage characters in v1 and v2 when maxImage > 0.
func crontabRelease(t testing.TB, url string, caBundle []byte, maxImage int64, versions ...string) *apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	crd := testcrd.With(testenv.ForServer(testenv.LoadCRD(t, "crontab-webhook.yaml")), testcrd.Group("fleet.example.com"),
		testcrd.CopyVersion("v1", "v2"), testcrd.Keep(versions...))
	for i := range crd.Spec.Versions {
		if v := &crd.Spec.Versions[i]; maxImage > 0 && v.Name != "v1beta1" {
			spec := v.Schema.OpenAPIV3Schema.Properties["spec"]
			img := spec.Properties["image"]
			img.MaxLength = &maxImage
			spec.Properties["image"] = img
			v.Schema.OpenAPIV3Schema.Properties["spec"] = spec
		}
	}
	if url != "" { // ForServer left conversion None
		return testcrd.With(crd, testcrd.Webhook(url, caBundle))
	}
	return crd
}

func crontab(version, name string, spec map[string]any) map[string]any {
	spec["cronSpec"] = "*/5 * * * *"
	return map[string]any{"apiVersion": "fleet.example.com/" + version, "kind": "CronTab",
		"metadata": map[string]any{"name": name, "namespace": "default"}, "spec": spec}
}

// TestFleetPlanAgreesWithSingleRuns: five clusters, two Kubernetes minors: one ready for the
// release (v0.3.0), one that needs the release between (v0.2.0: its objects are stored at
// v1beta1, which only v0.2.0's webhook converts), one with objects the release's schema rejects
// on re-create, one whose conversion webhook is down, one that does not answer. The fleet
// report (--kubeconfigs and --contexts alike) has a row per cluster equal to its single run —
// verdict, path, exit code, Kubernetes version — the exit code is the worst, and the waves hold
// the ready cluster only (with its Argo CD RollingSync step). The report for people and as a
// pull request comment are docs/commands/fleet.md's transcripts, run in a folder laid out as
// the page's (releases/, kubeconfigs/).
func TestFleetPlanAgreesWithSingleRuns(t *testing.T) {
	pages := docblock.OpenTranscripts(t, "docs/commands/fleet.md")
	wh2 := testwebhook.StartForTest(t, testwebhook.Options{}) // v0.2.0's
	wh3 := testwebhook.StartForTest(t, testwebhook.Options{}) // v0.3.0's
	down := "https://" + closedPort(t) + "/convert"
	work := t.TempDir()
	v010 := crontabRelease(t, "", nil, 0, "v1beta1")
	v020 := crontabRelease(t, wh2.URL, wh2.CABundle, 0, "v1beta1", "v1")
	writeRelease(t, filepath.Join(work, "releases"), "v0.2.0", v020)
	writeRelease(t, filepath.Join(work, "releases"), "v0.3.0", crontabRelease(t, wh3.URL, wh3.CABundle, 20, "v1", "v2"))
	t.Cleanup(func() {
		for _, e := range servers {
			_ = e.DeleteCRD(context.Background(), v010.Name) // before the webhooks stop
		}
	})

	// ready (1.37): at v0.2.0, objects stored at v1 with short images.
	install(t, servers["new-a"], v020)
	create(t, servers["new-a"], "crontabs", crontab("v1", "db", map[string]any{"image": "db:1", "host": "db", "port": "5432"}))
	// path (1.34): at v0.1.0, objects stored at v1beta1.
	install(t, servers["old-a"], v010)
	create(t, servers["old-a"], "crontabs", crontab("v1beta1", "db", map[string]any{"image": "db:1", "hostPort": "db:5432"}))
	// fix (1.37): at v0.2.0, an image longer than v0.3.0 allows.
	install(t, servers["new-b"], v020)
	create(t, servers["new-b"], "crontabs",
		crontab("v1", "db", map[string]any{"image": "db:1", "host": "db", "port": "5432"}),
		crontab("v1", "cache", map[string]any{"image": "registry.example.com/team/cache:1.2.3", "host": "cache", "port": "6379"}))
	// hook (1.34): v0.1.0's objects, then v0.2.0 with its webhook down.
	install(t, servers["old-b"], v010)
	create(t, servers["old-b"], "crontabs", crontab("v1beta1", "db", map[string]any{"image": "db:1", "hostPort": "db:5432"}))
	hookDown := crontabRelease(t, down, wh2.CABundle, 0, "v1beta1", "v1")
	install(t, servers["old-b"], hookDown)

	names := map[string]*testenv.Env{"ready": servers["new-a"], "path": servers["old-a"], "fix": servers["new-b"], "hook": servers["old-b"]}
	dir, merged := kubeconfigs(t, names, map[string]string{"gone": closedPort(t)})
	if err := os.Symlink(dir, filepath.Join(work, "kubeconfigs")); err != nil {
		t.Fatal(err)
	}
	r := newRunner(t)
	r.Dir = work
	args := []string{"plan", "-f", "releases/v0.3.0", "--via", "releases/v0.2.0"}

	// Each cluster alone.
	type single struct {
		code    int
		verdict string
		path    []string
	}
	singles := map[string]single{}
	for _, name := range []string{"ready", "path", "fix", "hook", "gone"} {
		res := r.Run(append(args, "--kubeconfig", filepath.Join(dir, name+".kubeconfig"), "-o", "json")...)
		s := single{code: res.Code}
		if res.Code <= 1 {
			var p plan.PathReport
			if err := json.Unmarshal([]byte(res.Stdout), &p); err != nil {
				t.Fatalf("%s: plan -o json (exit %d): %v\n%s\n%s", name, res.Code, err, res.Stdout, res.Stderr)
			}
			row := fleet.Row{}
			if err := fleet.Summarize(&row, fleet.KindPlanPath, res.Code, []byte(res.Stdout)); err != nil {
				t.Fatal(err)
			}
			s.verdict, s.path = row.Verdict, row.Path
		}
		singles[name] = s
		t.Logf("%s alone: exit %d, verdict %s, path %v; %s", name, res.Code, s.verdict, s.path, lastLine(res.Stderr))
	}
	// What the clusters are, as their single runs say.
	switch {
	case singles["ready"].code != 0 || len(singles["ready"].path) != 0:
		t.Errorf("ready alone: %+v", singles["ready"])
	case !slices.Equal(singles["path"].path, []string{"v0.2.0", "v0.3.0"}):
		t.Errorf("path alone: %+v", singles["path"])
	case singles["fix"].code != 1 || singles["fix"].verdict != plan.VerdictInvalidOnRecreate:
		t.Errorf("fix alone: %+v", singles["fix"])
	case singles["hook"].code != 3:
		t.Errorf("hook alone: %+v", singles["hook"])
	case singles["gone"].code != 3:
		t.Errorf("gone alone: %+v", singles["gone"])
	}

	for _, how := range [][]string{{"--kubeconfigs", dir}, {"--kubeconfig", merged, "--contexts", "ready,path,fix,hook,gone"}} {
		t.Run(how[len(how)-2], func(t *testing.T) {
			res := r.Run(append(append(args, how...), "-o", "json", "--parallel", "5")...)
			rep := report(t, res)
			if res.Code != 3 || rep.ExitCode != 3 {
				t.Errorf("fleet exit %d, report's %d: want the worst, 3\n%s", res.Code, rep.ExitCode, res.Stderr)
			}
			if len(rep.Rows) != 5 {
				t.Fatalf("rows: %+v", rep.Rows)
			}
			for name, s := range singles {
				row := rep.Row(name)
				if row == nil {
					t.Errorf("no row for %s", name)
					continue
				}
				if row.ExitCode != s.code || row.Verdict != s.verdict || !slices.Equal(row.Path, s.path) {
					t.Errorf("%s: fleet row exit %d, verdict %q, path %v; alone exit %d, verdict %q, path %v (%s)",
						name, row.ExitCode, row.Verdict, row.Path, s.code, s.verdict, s.path, row.Error)
				}
			}
			for name, minor := range map[string]string{"ready": "v1.37", "path": "v" + olderMinor, "fix": "v1.37", "hook": "v" + olderMinor} {
				if row := rep.Row(name); row == nil || row.KubernetesVersion != minor && !strings.HasPrefix(row.KubernetesVersion, minor+".") {
					t.Errorf("%s: Kubernetes version %q, want %s", name, row.KubernetesVersion, minor)
				}
			}
			if g := rep.Row("gone"); g.State != fleet.StateUnreachable || g.Need != fleet.NeedReachable {
				t.Errorf("gone: %+v", g)
			}
			if !slices.Equal(rep.Row("path").Path, []string{"v0.2.0", "v0.3.0"}) || !strings.HasPrefix(rep.Row("path").Need, fleet.NeedPath([]string{"v0.2.0"})) {
				t.Errorf("path: %+v", rep.Row("path"))
			}
			// hook's row says why it could not be planned: its conversion webhook, at the
			// address that does not answer.
			if _, blocker := rep.Row("hook").Shown(); !strings.Contains(blocker, "conversion webhook for fleet.example.com/v1beta1, Kind=CronTab failed") ||
				!strings.Contains(blocker, strings.TrimSuffix(down, "/convert")) {
				t.Errorf("hook: the row does not name its conversion webhook (%s): %+v", down, rep.Row("hook"))
			}
			if f := rep.Row("fix"); f.Objects != 1 || !strings.Contains(f.Blocker, "crontabs.fleet.example.com") {
				t.Errorf("fix: objects %d, blocker %q", f.Objects, f.Blocker)
			}
			if len(rep.Waves) != 1 || !slices.Equal(rep.Waves[0], []string{"ready"}) || len(rep.HeldBack) != 4 {
				t.Errorf("waves %v, held back %v", rep.Waves, rep.HeldBack)
			}
			if rep.ArgoCD == nil || len(rep.ArgoCD.RollingSync.Steps) != 1 || !slices.Equal(rep.ArgoCD.RollingSync.Steps[0].MatchExpressions[0].Values, []string{"ready"}) {
				t.Errorf("argo CD strategy: %+v", rep.ArgoCD)
			}
			for _, row := range rep.Rows {
				if row.InPlace == nil && row.State != fleet.StateUnreachable || row.InPlace != nil && *row.InPlace {
					t.Errorf("%s: in place %v (nothing is)", row.Name, row.InPlace)
				}
			}
			t.Logf("groups: %+v", rep.Groups)
		})
	}

	// For people and for a pull request: one row per cluster, the groups, the waves; as the
	// page shows them.
	humanArgs := append(slices.Clip(args), "--kubeconfigs", "kubeconfigs/")
	human := r.RunCombined(humanArgs...)
	t.Logf("plan --kubeconfigs:\n%s", human.Stdout)
	for _, want := range []string{"CLUSTER", "KUBERNETES", "v0.2.0 → v0.3.0", "unreachable", "wave 1: ready", "What the clusters need:", "\nerror: 4 of 5 clusters need something"} {
		if !strings.Contains(human.Stdout, want) {
			t.Errorf("the table lacks %q:\n%s", want, human.Stdout)
		}
	}
	if human.Code != 3 {
		t.Errorf("exit %d:\n%s", human.Code, human.Stdout)
	}
	pages.Check(humanArgs, human.Stdout, human.Code)
	mdArgs := append(slices.Clip(humanArgs), "-o", "markdown")
	md := r.Run(mdArgs...)
	t.Logf("plan --kubeconfigs -o markdown:\n%s", md.Stdout)
	for _, want := range []string{"**4 of 5 need something**", "type: RollingSync", "- key: crdver.io/cluster", "| `gone` |"} {
		if !strings.Contains(md.Stdout, want) {
			t.Errorf("the markdown lacks %q:\n%s", want, md.Stdout)
		}
	}
	pages.Check(mdArgs, md.Stdout, md.Code)
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}
