package survive

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestKillAnywhereThenRunAgain is the crash matrix on the release: the upgrade is
// killed with SIGKILL as each step ends (the line that reports it) and at moments inside the
// steps (the backup being written, the rewrite, the apply), then the very same command is run
// again. Each time it must end applied and verified, with nothing lost but the consented
// field, every manager kept, every object stored at the new storage version, storedVersions
// trimmed, and the backup holding every object's consented field.
func TestKillAnywhereThenRunAgain(t *testing.T) {
	type point struct {
		name string
		kill func(line string, since time.Duration) bool
	}
	var points []point
	for n := 1; n <= 5; n++ {
		marker := fmt.Sprintf("step %d/", n)
		points = append(points, point{"after " + marker, func(line string, _ time.Duration) bool { return strings.Contains(line, marker) }})
	}
	// Inside the steps: the lines the retire step prints between its writes, and the apply's.
	for _, marker := range []string{"is now v1", "rewrote the objects", "status.storedVersions [", "is no longer served", "release applied"} {
		points = append(points, point{"after " + marker, func(line string, _ time.Duration) bool { return strings.Contains(line, marker) }})
	}
	// At moments, whatever is running then (the plan, the preflight, the backup being written).
	for _, d := range []time.Duration{150 * time.Millisecond, 400 * time.Millisecond, 650 * time.Millisecond} {
		points = append(points, point{"at " + d.String(), func(_ string, since time.Duration) bool { return since >= d }})
	}
	for i, p := range points {
		t.Run(p.name, func(t *testing.T) {
			group := fmt.Sprintf("kill%d.example.com", i)
			c := setup(t, envB, group, "k", 60)
			next := newRelease(t, group)
			user := newRunner(t)
			backup := filepath.Join(t.TempDir(), "backup.yaml")
			args := []string{"upgrade", "-f", next, "--yes", "--allow-data-loss", "--backup", backup, "--kubeconfig", envB.Kubeconfig, "-o", "json"}
			start := time.Now()
			statusNext := ""
			first := user.runKilled(func(line string, _ *os.Process) bool { return p.kill(line, time.Since(start)) }, args...)
			if !first.killed {
				t.Logf("the run ended (exit %d) before the kill point", first.code)
			} else {
				// The person who comes back: status says what is left and the command that continues.
				st := user.run("upgrade", "status", "-f", next, "--kubeconfig", envB.Kubeconfig, "-o", "json")
				var got struct {
					Next    string `json:"next"`
					Command string `json:"command"`
				}
				if err := json.Unmarshal([]byte(st.stdout), &got); err != nil {
					t.Fatalf("upgrade status -o json (exit %d): %v\n%s", st.code, err, st.stderr)
				}
				statusNext = got.Next
				switch {
				case got.Next == "nothing" && st.code != 0, got.Next != "nothing" && st.code != 1:
					t.Errorf("upgrade status after the kill: exit %d with next %q", st.code, got.Next)
				case got.Next != "nothing" && got.Next != "continue" && got.Next != "start":
					t.Errorf("upgrade status after the kill: next %q, want nothing, continue or start", got.Next)
				}
				if got.Next == "continue" && (!strings.Contains(got.Command, "--backup "+backup) || !strings.Contains(got.Command, "--allow-data-loss")) && strings.Contains(first.stderr, "backup: done") {
					t.Errorf("upgrade status: the command that continues does not keep the backup and the consent: %s", got.Command)
				}
			}
			res := user.run(args...)
			if res.code != 0 {
				t.Fatalf("run again after SIGKILL %s: exit %d\n%s", p.name, res.code, res.stderr)
			}
			rep := parseReport(t, res)
			// status and the run that follows it judge "in place" by the same rule.
			if statusNext != "" && (statusNext == "nothing") != (rep.AlreadyInPlace != "") {
				t.Errorf("upgrade status said %q, but the run again found the release in place: %q", statusNext, rep.AlreadyInPlace)
			}
			if first.killed && rep.Backup != nil && rep.Backup.File != backup {
				t.Errorf("backup in %s, want %s", rep.Backup.File, backup)
			}
			c.checkUpgraded(t)
			c.checkBackup(t, backup)
			if _, err := os.Stat(backup + ".partial"); err == nil {
				t.Errorf("a partial backup was left beside the backup")
			}
			if st := user.run("upgrade", "status", "-f", next, "--kubeconfig", envB.Kubeconfig); st.code != 0 || !strings.Contains(st.stdout, "next: nothing") {
				t.Errorf("upgrade status after the upgrade: exit %d\n%s%s", st.code, st.stdout, st.stderr)
			}
		})
	}
}

// TestKillMigrateAndRetire: migrate and retire killed with SIGKILL in the middle of their
// rewrite (after the storage switch), then the same command run again: it resumes, ends with
// every object stored at v1, storedVersions [v1], both managers kept; retire then also removes
// v1alpha1 and its managedFields entries.
func TestKillMigrateAndRetire(t *testing.T) {
	for _, tc := range []struct {
		name string
		args func(crd string) []string
		done func(t *testing.T, c *cluster)
	}{
		{"migrate", func(crd string) []string {
			return []string{"migrate", crd, "--to", "v1", "--yes", "--concurrency", "2"}
		},
			func(t *testing.T, c *cluster) { c.storedAt(t, "v1") }},
		{"retire", func(crd string) []string {
			return []string{"retire", crd, "v1alpha1", "--remove", "--yes", "--concurrency", "2", "--allow-data-loss"}
		}, func(t *testing.T, c *cluster) { c.storedAt(t, "v1") }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			group := "killed" + tc.name + ".example.com"
			c := setup(t, envB, group, "k", 0)
			c.createMany(t, "k", 1500)
			crd := "gadgets." + group
			user := newRunner(t)
			args := append(tc.args(crd), "--kubeconfig", envB.Kubeconfig)
			start := time.Now()
			first := user.runKilled(func(line string, _ *os.Process) bool {
				return time.Since(start) > 1500*time.Millisecond
			}, args...)
			if !first.killed {
				t.Logf("%s ended (exit %d) before it was killed", tc.name, first.code)
			}
			res := user.run(args...)
			if res.code != 0 {
				t.Fatalf("%s again after SIGKILL: exit %d\n%s", tc.name, res.code, res.stderr)
			}
			tc.done(t, c)
			live, err := c.crds.ApiextensionsV1().CustomResourceDefinitions().Get(t.Context(), crd, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(live.Status.StoredVersions, []string{"v1"}) {
				t.Errorf("storedVersions %v, want [v1]", live.Status.StoredVersions)
			}
		})
	}
}
