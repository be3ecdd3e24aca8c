package survive

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
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
			first := user.runKilled(func(line string, _ *os.Process) bool { return p.kill(line, time.Since(start)) }, args...)
			if !first.killed {
				t.Logf("the run ended (exit %d) before the kill point", first.code)
			}
			res := user.run(args...)
			if res.code != 0 {
				t.Fatalf("run again after SIGKILL %s: exit %d\n%s", p.name, res.code, res.stderr)
			}
			rep := parseReport(t, res)
			if first.killed && rep.Backup != nil && rep.Backup.File != backup {
				t.Errorf("backup in %s, want %s", rep.Backup.File, backup)
			}
			c.checkUpgraded(t)
			c.checkBackup(t, backup)
			if _, err := os.Stat(backup + ".partial"); err == nil {
				t.Errorf("a partial backup was left beside the backup")
			}
		})
	}
}
