package upgrade

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// Checkpoints as the single state struct of earlier versions wrote them (every field of both
// kinds in one object; a path's with "done": []), which the one state must resume as they are.
const (
	oldPathCheckpoint = `{"release":"pathkey","cluster":"uid-kube-system","server":"https://127.0.0.1:6443",` +
		`"crds":{"widgets.example.com":"uid-w"},"backupFile":"/tmp/b.yaml",` +
		`"backup":{"file":"/tmp/b.yaml","cluster":"uid-kube-system","release":"relkey","digest":"abc","resources":[{"resource":"widgets.v1.example.com","objects":2}],"reused":false},` +
		`"done":[],"dataLossFound":false,"dataLossAccepted":false,"hops":["v0.2.0","v0.3.0"],"hop":1,` +
		`"instruction":"before hop 2 (v0.3.0): deploy its webhook; then run the same command again"}`
	oldReleaseCheckpoint = `{"release":"relkey","cluster":"uid-kube-system","server":"https://127.0.0.1:6443",` +
		`"crds":{"widgets.example.com":"uid-w"},"backupFile":"/tmp/b.yaml","done":["backup|widgets.example.com||"],` +
		`"started":"retire|widgets.example.com|v1|v2","serving":[{"crd":"widgets.example.com","version":"v1","state":"planned"}],` +
		`"dataLossFound":true,"dataLossAccepted":true,"fixValues":true,"complete":true,"completedAt":"2026-01-02T03:04:05Z"}`
)

// TestCheckpointsOfEarlierVersionsAreResumed: both kinds of checkpoint, in the format of the one
// state struct before, are read whole, belong to what they were written for (and not to
// another release or CRD object), and are written back as read, in this build's layout.
func TestCheckpointsOfEarlierVersionsAreResumed(t *testing.T) {
	dir := t.TempDir()
	live := map[string]string{"widgets.example.com": "uid-w"}
	open := func(name, body, key string, s *state) string {
		t.Helper()
		file := filepath.Join(dir, name)
		if err := os.WriteFile(file, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		found, why, err := openCheckpoint(file, s, key, "uid-kube-system", live)
		if err != nil || !found || why != "" {
			t.Fatalf("%s: found %v, not used because %q, %v", name, found, why, err)
		}
		return file
	}

	var p state
	file := open("path.json", oldPathCheckpoint, "pathkey", &p)
	check := func(p state) {
		t.Helper()
		if !slices.Equal(p.Hops, []string{"v0.2.0", "v0.3.0"}) || p.Hop != 1 || p.Instruction == "" || p.Complete {
			t.Errorf("path: hops %v at %d, instruction %q, complete %v; want [v0.2.0 v0.3.0] at 1, waiting", p.Hops, p.Hop, p.Instruction, p.Complete)
		}
		if p.BackupFile != "/tmp/b.yaml" || p.Backup == nil || p.Backup.Digest != "abc" || len(p.Backup.Resources) != 1 {
			t.Errorf("path: backup %q %+v, want the first hop's", p.BackupFile, p.Backup)
		}
	}
	check(p)
	if err := writeCheckpoint(file, "the path's checkpoint", &p); err != nil {
		t.Fatal(err)
	}
	var again state
	if found, why, err := openCheckpoint(file, &again, "pathkey", "uid-kube-system", live); err != nil || !found || why != "" {
		t.Fatalf("the path's checkpoint written again: found %v, not used because %q, %v", found, why, err)
	}
	check(again)
	if again.Layout != layoutOneFile {
		t.Errorf("written again in layout %d, want %d", again.Layout, layoutOneFile)
	}

	var s state
	open("release.json", oldReleaseCheckpoint, "relkey", &s)
	if !slices.Equal(s.Done, []string{"backup|widgets.example.com||"}) || s.Started != "retire|widgets.example.com|v1|v2" ||
		len(s.Serving) != 1 || !s.DataLossFound || !s.DataLossAccepted || !s.FixValues || !s.Complete || s.CompletedAt == nil {
		t.Errorf("release: %+v, want every field of the file", s)
	}

	// What it was written for: another release, another object of the same name.
	for _, c := range []struct {
		key  string
		live map[string]string
	}{{"otherkey", live}, {"relkey", map[string]string{"widgets.example.com": "uid-other"}}} {
		if _, why, err := openCheckpoint(filepath.Join(dir, "release.json"), &state{}, c.key, "uid-kube-system", c.live); err != nil || why == "" {
			t.Errorf("release checkpoint opened for %s %v: used (%v), want why not", c.key, c.live, err)
		}
	}
}
