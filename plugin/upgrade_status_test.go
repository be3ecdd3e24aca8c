package plugin

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestUpgradeStatusSaysWhatIsLeft: before any run, upgrade status says that nothing has run
// yet and how to start (not "not in place: start"); after a run, every step it lists reads
// as words, without a trailing blank ("done: apply").
func TestUpgradeStatusSaysWhatIsLeft(t *testing.T) {
	isolateCache(t)
	r := setupRelease(t, "status.upgrade.example.com", false)
	before := runCluster(t, "upgrade", "status", "-f", r.dir)
	if before.code != 1 {
		t.Fatalf("upgrade status before any run: exit %d, want 1\n%s\n%s", before.code, before.stdout, before.stderr)
	}
	want := "error: the release " + r.dir + " is not in place and nothing has run yet: no upgrade of it is recorded on this cluster; start with kubectl crdver upgrade -f " + r.dir + " --dry-run\n"
	if before.stderr != want {
		t.Errorf("upgrade status before any run says\n%s\nwant\n%s", before.stderr, want)
	}
	if res := runCluster(t, "upgrade", "-f", r.dir, "--yes", "--backup", filepath.Join(t.TempDir(), "backup.yaml")); res.code != 0 {
		t.Fatalf("upgrade: exit %d\n%s\n%s", res.code, res.stdout, res.stderr)
	}
	after := runCluster(t, "upgrade", "status", "-f", r.dir)
	if after.code != 0 || after.stderr != "" {
		t.Fatalf("upgrade status after the run: exit %d\n%s\n%s", after.code, after.stdout, after.stderr)
	}
	mustContain(t, "upgrade status", after.stdout, "\n  done: apply\n", "\n  done: backup gadgets.status.upgrade.example.com,widgets.status.upgrade.example.com\n", "next: nothing: the release is in place")
	for i, l := range strings.Split(after.stdout, "\n") {
		if strings.TrimRight(l, " ") != l {
			t.Errorf("line %d ends with a blank: %q", i+1, l)
		}
	}
}
