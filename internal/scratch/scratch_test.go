package scratch

import (
	"io"
	"path/filepath"
	"testing"
)

// A scratch file has no name in the temporary folder from the moment it is made, is read
// back as written, and Close frees it.
func TestNewLeavesNothingBehind(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("TMPDIR", dir)
	f, err := New("crdver-test-*")
	if err != nil {
		t.Fatal(err)
	}
	if left, _ := filepath.Glob(filepath.Join(dir, "*")); len(left) != 0 && f.leftover == "" {
		t.Errorf("the folder holds %v while the file is open, want nothing", left)
	}
	if _, err := f.WriteString("kept while open"); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(f)
	if err != nil || string(got) != "kept while open" {
		t.Errorf("read back %q, %v", got, err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if left, _ := filepath.Glob(filepath.Join(dir, "*")); len(left) != 0 {
		t.Errorf("the folder holds %v after Close, want nothing", left)
	}
	if _, err := f.Write([]byte("x")); err == nil {
		t.Error("a write after Close succeeded")
	}
}
