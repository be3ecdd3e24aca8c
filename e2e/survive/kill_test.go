package survive

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/crdver/kubectl-crdver/internal/atomicfile"
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
	// The points run two at a time: each has a group and a user cache folder of its own, and
	// most of a run's time is spent waiting on the API server.
	for i, p := range points {
		t.Run(p.name, func(t *testing.T) {
			t.Parallel()
			group := fmt.Sprintf("kill%d.example.com", i)
			c := setup(t, envB, group, "k", 60)
			next := newRelease(t, group)
			user := newRunner(t)
			backup := filepath.Join(t.TempDir(), "backup.yaml")
			args := []string{"upgrade", "-f", next, "--yes", "--allow-data-loss", "--backup", backup, "--kubeconfig", envB.Kubeconfig, "-o", "json"}
			start := time.Now()
			statusNext := ""
			first := user.RunKilled(func(line string, _ *os.Process) bool { return p.kill(line, time.Since(start)) }, args...)
			if !first.Killed {
				t.Logf("the run ended (exit %d) before the kill point", first.Code)
			} else {
				// The person who comes back: status says what is left and the command that continues.
				st := user.Run("upgrade", "status", "-f", next, "--kubeconfig", envB.Kubeconfig, "-o", "json")
				var got struct {
					Next    string `json:"next"`
					Command string `json:"command"`
				}
				if err := json.Unmarshal([]byte(st.Stdout), &got); err != nil {
					t.Fatalf("upgrade status -o json (exit %d): %v\n%s", st.Code, err, st.Stderr)
				}
				statusNext = got.Next
				switch {
				case got.Next == "nothing" && st.Code != 0, got.Next != "nothing" && st.Code != 1:
					t.Errorf("upgrade status after the kill: exit %d with next %q", st.Code, got.Next)
				case got.Next != "nothing" && got.Next != "continue" && got.Next != "start":
					t.Errorf("upgrade status after the kill: next %q, want nothing, continue or start", got.Next)
				}
				if got.Next == "continue" && (!strings.Contains(got.Command, "--backup "+backup) || !strings.Contains(got.Command, "--allow-data-loss")) && strings.Contains(first.Stderr, "backup: done") {
					t.Errorf("upgrade status: the command that continues does not keep the backup and the consent: %s", got.Command)
				}
			}
			res := user.Run(args...)
			if res.Code != 0 {
				t.Fatalf("run again after SIGKILL %s: exit %d\n%s", p.name, res.Code, res.Stderr)
			}
			rep := parseReport(t, res)
			// status and the run that follows it judge "in place" by the same rule.
			if statusNext != "" && (statusNext == "nothing") != (rep.AlreadyInPlace != "") {
				t.Errorf("upgrade status said %q, but the run again found the release in place: %q", statusNext, rep.AlreadyInPlace)
			}
			if first.Killed && rep.Backup != nil && rep.Backup.File != backup {
				t.Errorf("backup in %s, want %s", rep.Backup.File, backup)
			}
			c.checkUpgraded(t)
			c.checkBackup(t, backup)
			if left, err := atomicfile.Temporaries(backup); err != nil || len(left) > 0 {
				t.Errorf("a partial backup was left beside the backup: %v %v", left, err)
			}
			if st := user.Run("upgrade", "status", "-f", next, "--kubeconfig", envB.Kubeconfig); st.Code != 0 || !strings.Contains(st.Stdout, "next: nothing") {
				t.Errorf("upgrade status after the upgrade: exit %d\n%s%s", st.Code, st.Stdout, st.Stderr)
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
			first := user.RunKilled(func(line string, _ *os.Process) bool {
				return time.Since(start) > 1500*time.Millisecond
			}, args...)
			if !first.Killed {
				t.Logf("%s ended (exit %d) before it was killed", tc.name, first.Code)
			}
			res := user.Run(args...)
			if res.Code != 0 {
				t.Fatalf("%s again after SIGKILL: exit %d\n%s", tc.name, res.Code, res.Stderr)
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

// TestKillRestore: restore, killed with SIGKILL in the middle of its writes (twice), then
// run again with the same command, ends with every consented field back, every other field
// and both managers kept. Between the kills each object holds either its field back or not:
// nothing else changed.
func TestKillRestore(t *testing.T) {
	const group = "restorekill.example.com"
	c := setup(t, envB, group, "r", 200)
	user := newRunner(t)
	backup := filepath.Join(t.TempDir(), "backup.yaml")
	if res := user.Run("upgrade", "-f", newRelease(t, group), "--yes", "--allow-data-loss", "--backup", backup, "--kubeconfig", envB.Kubeconfig); res.Code != 0 {
		t.Fatalf("upgrade: exit %d\n%s", res.Code, res.Stderr)
	}
	// Back to the old release, whose v1alpha1 holds spec.legacy again.
	oldFile := writeRelease(t, "old.yaml", oldGadgets(group))
	if res := user.Run("upgrade", "-f", oldFile, "--yes", "--backup", filepath.Join(t.TempDir(), "back.yaml"), "--kubeconfig", envB.Kubeconfig); res.Code != 0 {
		t.Fatalf("upgrade back: exit %d\n%s", res.Code, res.Stderr)
	}
	args := []string{"restore", "-f", backup, "--yes", "--kubeconfig", envB.Kubeconfig}
	// Killed once it has restored about a sixth, a half and five sixths of the objects (the
	// count is polled from the cluster while it runs): in the middle of its writes.
	kills := 0
	for _, part := range []int{6, 2} {
		target := len(c.objects) * (part - 1) / part
		if part == 6 {
			target = len(c.objects) / 6
		}
		var last time.Time
		res := user.RunKilled(func(line string, _ *os.Process) bool {
			if line != "" || time.Since(last) < 50*time.Millisecond {
				return false
			}
			last = time.Now()
			return len(c.legacyCount(t)) >= target
		}, args...)
		if !res.Killed {
			t.Logf("restore ended (exit %d) before %d objects were restored", res.Code, target)
			continue
		}
		kills++
		restored := c.legacyAt(t)
		t.Logf("restore killed: %d of %d objects have spec.legacy back (aimed at %d)", len(restored), len(c.objects), target)
		for n, l := range restored {
			if l != "legacy-"+n {
				t.Errorf("%s: spec.legacy %q after the kill, want %q", n, l, "legacy-"+n)
			}
		}
	}
	if kills == 0 {
		t.Errorf("restore was never killed in its writes: the test proves nothing")
	}
	res := user.Run(args...)
	if res.Code != 0 {
		t.Fatalf("restore again after %d kills: exit %d\n%s%s", kills, res.Code, res.Stdout, res.Stderr)
	}
	got := c.legacyAt(t)
	for _, n := range c.objects {
		if got[n] != "legacy-"+n {
			t.Errorf("%s: spec.legacy %q after the restore, want %q", n, got[n], "legacy-"+n)
		}
	}
}

// legacyCount is the spec.legacy of the objects that have it (no checks: polled during a run).
func (c *cluster) legacyCount(t *testing.T) map[string]string {
	list, err := c.dyn.Resource(schema.GroupVersionResource{Group: c.group, Version: "v1alpha1", Resource: "gadgets"}).Namespace("default").List(context.Background(), metav1.ListOptions{})
	if err != nil {
		return nil
	}
	out := map[string]string{}
	for _, u := range list.Items {
		if l, ok, _ := unstructured.NestedString(u.Object, "spec", "legacy"); ok {
			out[u.GetName()] = l
		}
	}
	return out
}

// legacyAt reads every object at v1alpha1: the spec.legacy of those that have it, by name. It
// fails the test on an object that lost spec.size or a manager (kubectl-create, gitops).
func (c *cluster) legacyAt(t *testing.T) map[string]string {
	t.Helper()
	list, err := c.dyn.Resource(schema.GroupVersionResource{Group: c.group, Version: "v1alpha1", Resource: "gadgets"}).Namespace("default").List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, u := range list.Items {
		if l, ok, _ := unstructured.NestedString(u.Object, "spec", "legacy"); ok {
			out[u.GetName()] = l
		}
		if _, ok, _ := unstructured.NestedInt64(u.Object, "spec", "size"); !ok {
			t.Errorf("%s: lost spec.size", u.GetName())
		}
		var managers []string
		for _, e := range u.GetManagedFields() {
			managers = append(managers, e.Manager)
		}
		if !slices.Contains(managers, "kubectl-create") || !slices.Contains(managers, "gitops") {
			t.Errorf("%s: managers %v, want kubectl-create and gitops kept", u.GetName(), managers)
		}
	}
	if len(list.Items) != len(c.objects) {
		t.Errorf("%d objects, want %d", len(list.Items), len(c.objects))
	}
	return out
}
