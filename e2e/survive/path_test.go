package survive

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/crdver/kubectl-crdver/internal/testcrd"
)

// TestKillAlongAPathThenRunAgain is the crash matrix of an upgrade along a release path: the
// cluster stores gadgets at v1alpha1 (with spec.legacy) and has no v1; release mid adds v1 (with
// legacy) as the storage version; the target (newRelease) keeps v1 alone, without legacy. The
// direct jump would relabel v1alpha1 objects as v1, so the path goes through mid: two hops,
// each the release's own upgrade. The run is killed with SIGKILL where the path and a hop meet
// in their one checkpoint — as a hop starts, inside hop 1, after a hop's apply before the path
// records it, inside hop 2 — then the very same command is run again: it must end applied and
// verified (every object at v1, storedVersions [v1], both managers kept, the backup — hop 1's,
// for the path — holding every object's consented field), and upgrade status must say so. The
// run keeps one checkpoint, for the path and its hops alike: the cache folder holds that one
// file after the run again (and none or that one after the kill: a run killed as hop 1 starts
// may not have written it yet).
func TestKillAlongAPathThenRunAgain(t *testing.T) {
	// nth is a kill point: the n-th stderr line that contains marker.
	nth := func(marker string, n int) func(string) bool {
		seen := 0
		return func(line string) bool {
			if strings.Contains(line, marker) {
				seen++
			}
			return seen >= n
		}
	}
	points := []struct {
		name string
		kill func() func(string) bool
	}{
		{"as hop 1 starts", func() func(string) bool { return nth("hop 1/2", 1) }},
		{"after hop 1's backup", func() func(string) bool { return nth("backup: done", 1) }},
		{"after hop 1's apply", func() func(string) bool { return nth("release applied", 1) }},
		{"as hop 2 starts", func() func(string) bool { return nth("hop 2/2", 1) }},
		{"after hop 2's apply", func() func(string) bool { return nth("release applied", 2) }},
	}
	for i, p := range points {
		t.Run(p.name, func(t *testing.T) {
			t.Parallel()
			group := fmt.Sprintf("pathkill%d.example.com", i)
			c := setup(t, envB, group, "p", 20)
			c.dropV1(t)
			mid, next := midRelease(t, group), newRelease(t, group)
			user := newRunner(t)
			backup := filepath.Join(t.TempDir(), "backup.yaml")
			args := []string{"upgrade", "--via", mid, "-f", next, "--yes", "--allow-data-loss", "--backup", backup, "--kubeconfig", envB.Kubeconfig}
			kill := p.kill()
			first := user.RunKilled(func(line string, _ *os.Process) bool { return line != "" && kill(line) }, append(args, "-o", "json")...)
			if !first.Killed {
				t.Fatalf("the run ended (exit %d) before the kill point:\n%s", first.Code, first.Stderr)
			}
			oneCheckpoint(t, user.Home, true)
			st := user.Run("upgrade", "status", "--via", mid, "-f", next, "--kubeconfig", envB.Kubeconfig, "-o", "json")
			var got struct {
				Next string `json:"next"`
				Path *struct {
					Hops []string `json:"hops"`
				} `json:"path"`
			}
			if err := json.Unmarshal([]byte(st.Stdout), &got); err != nil {
				t.Fatalf("upgrade status -o json (exit %d): %v\n%s", st.Code, err, st.Stderr)
			}
			if got.Path != nil && len(got.Path.Hops) > 0 && (got.Next != "continue" || st.Code != 1) {
				t.Errorf("upgrade status after the kill: exit %d, next %q, want continue: the path is recorded, not complete", st.Code, got.Next)
			}

			res := user.Run(append(args, "-o", "json")...)
			if res.Code != 0 {
				t.Fatalf("run again after SIGKILL %s: exit %d\n%s", p.name, res.Code, res.Stderr)
			}
			var rep struct {
				Resumed bool `json:"resumed"`
				Outcome struct {
					Applied  bool `json:"applied"`
					Verified bool `json:"verified"`
				} `json:"outcome"`
			}
			if err := json.Unmarshal([]byte(res.Stdout), &rep); err != nil {
				t.Fatalf("upgrade --via -o json: %v\n%s", err, res.Stdout)
			}
			if !rep.Outcome.Applied || !rep.Outcome.Verified {
				t.Errorf("run again: outcome %+v; want applied and verified", rep.Outcome)
			}
			if recorded := got.Path != nil && len(got.Path.Hops) > 0; rep.Resumed != recorded {
				t.Errorf("run again: resumed %v, but upgrade status found the path recorded: %v", rep.Resumed, recorded)
			}
			c.checkUpgraded(t)
			c.checkBackup(t, backup)
			oneCheckpoint(t, user.Home, false)
			if st := user.Run("upgrade", "status", "--via", mid, "-f", next, "--kubeconfig", envB.Kubeconfig); st.Code != 0 || !strings.Contains(st.Stdout, "every hop applied") {
				t.Errorf("upgrade status after the path: exit %d\n%s%s", st.Code, st.Stdout, st.Stderr)
			}
		})
	}
}

// oneCheckpoint checks that the upgrade's cache folder under home holds one checkpoint, the
// path's (path-….json), and no file per hop; orNone: or none yet.
func oneCheckpoint(t *testing.T, home string, orNone bool) {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(home, "kubectl-crdver", "upgrade", "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	if orNone && len(files) == 0 {
		return
	}
	if len(files) != 1 || !strings.HasPrefix(filepath.Base(files[0]), "path-") {
		t.Errorf("the upgrade's checkpoints: %v, want the path's one file", files)
	}
}

// dropV1 removes v1, served and empty, from the old release: the cluster has v1alpha1 alone.
func (c *cluster) dropV1(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	crds := c.crds.ApiextensionsV1().CustomResourceDefinitions()
	crd, err := crds.Get(ctx, "gadgets."+c.group, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	crd.Spec.Versions = crd.Spec.Versions[:1]
	if _, err := crds.Update(ctx, crd, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// midRelease writes release mid: v1alpha1 served, v1 the storage version, both with legacy.
func midRelease(t *testing.T, group string) string {
	t.Helper()
	mid := testcrd.New(group, "Gadget", testcrd.Versions("v1alpha1", "v1"), testcrd.Storage("v1"), testcrd.Spec(gadgetSpec(true)))
	return writeRelease(t, "mid.yaml", mid)
}
