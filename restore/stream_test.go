package restore

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/crdver/kubectl-crdver/manifest"
)

// TestConsentLogInStep: the dry run's consents are read back in backup order, a document at a
// time: the managers of document i and key, asked for again; nothing for another
// key, a document without an entry, or a log never rewound.
func TestConsentLogInStep(t *testing.T) {
	c := &consentLog{}
	defer c.close()
	consented := func(i int, key string) []string {
		if e := c.entry(i, key); e != nil {
			return e.Managers
		}
		return nil
	}
	if got := consented(1, "a"); got != nil {
		t.Errorf("empty log: %v", got)
	}
	for _, e := range []consentEntry{{Index: 2, Key: "widget default/a", Managers: []string{"m1"}}, {Index: 5, Key: "widget default/b", Managers: []string{"m2", "m3"}}, {Index: 9, Key: "widget default/c", Managers: []string{"m4"}}} {
		if err := c.record(e.Index, e.Key, e.Managers, nil); err != nil {
			t.Fatal(err)
		}
	}
	if got := consented(2, "widget default/a"); got != nil {
		t.Errorf("before rewind: %v", got)
	}
	if err := c.rewind(); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		i    int
		key  string
		want string
	}{
		{1, "widget default/x", ""},
		{2, "widget default/a", "m1"},
		{2, "widget default/a", "m1"}, // asked again
		{3, "widget default/x", ""},
		{5, "widget default/other", ""}, // not the same object: no consent
		{9, "widget default/c", "m4"},
		{10, "widget default/d", ""},
	} {
		if got := strings.Join(consented(tc.i, tc.key), ","); got != tc.want {
			t.Errorf("consented(%d, %s) = %q, want %q", tc.i, tc.key, got, tc.want)
		}
	}
}

// TestSpoolReadsPipesOnce: stdin and a FIFO are copied to temporary files (removed by close)
// that both passes read; regular files are read where they are; a cancelled context ends a
// copy blocked on its input.
func TestSpoolReadsPipesOnce(t *testing.T) {
	t.Setenv("TMPDIR", t.TempDir())
	dir := t.TempDir()
	file := filepath.Join(dir, "backup.yaml")
	if err := os.WriteFile(file, []byte("kind: A\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	fifo := filepath.Join(dir, "fifo.yaml")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skipf("no FIFO: %v", err)
	}
	go func() {
		if w, err := os.OpenFile(fifo, os.O_WRONLY, 0); err == nil {
			_, _ = io.WriteString(w, "kind: FromFIFO\n")
			w.Close()
		}
	}()
	s, err := spool(context.Background(), []string{file, "-", fifo}, strings.NewReader("kind: FromStdin\n"))
	if err != nil {
		t.Fatal(err)
	}
	if s.files[0] != file || len(s.files) != 3 || strings.Join(s.copied, ",") != "stdin,"+fifo {
		t.Fatalf("spooled %+v", s)
	}
	if s.name(s.files[1]) != "stdin" || s.name(s.files[2]) != fifo || s.name(file) != file {
		t.Errorf("names of the copies: %s, %s, %s", s.name(s.files[1]), s.name(s.files[2]), s.name(file))
	}
	for i, want := range []string{"kind: FromStdin\n", "kind: FromFIFO\n"} {
		for pass := 0; pass < 2; pass++ {
			if b, err := os.ReadFile(s.files[i+1]); err != nil || string(b) != want {
				t.Errorf("copy %d, read %d: %q, %v", i, pass, b, err)
			}
		}
	}
	s.close()
	for _, f := range s.files[1:] {
		if _, err := os.Stat(f); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s left behind: %v", f, err)
		}
	}

	pr, pw := io.Pipe()
	defer pw.Close()
	ctx, cancel := context.WithCancel(context.Background())
	go func() { _, _ = io.WriteString(pw, "kind: A\n"); cancel() }()
	s, err = spool(ctx, []string{"-"}, pr)
	defer s.close()
	var ie *manifest.InterruptedError
	if !errors.As(err, &ie) {
		t.Errorf("spool of a pipe that never ends, interrupted: %v", err)
	}
}

// TestBackupDocuments: the documents the closing lines of the backup files name, summed; -1
// when a file has none (cut short, not an upgrade's backup) or is not a regular file.
func TestBackupDocuments(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	a := write("a.yaml", BackupHeader("uid", "https://x", "r")+"apiVersion: v1\nkind: A\n---\napiVersion: v1\nkind: A\n"+BackupTrailer(2))
	b := write("b.yaml", "apiVersion: v1\nkind: B\n"+BackupTrailer(1)+"\n\n")
	cut := write("cut.yaml", BackupHeader("uid", "https://x", "r")+"apiVersion: v1\nkind: A\n")
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		files []string
		want  int64
	}{
		{[]string{a}, 2},
		{[]string{a, b}, 3},
		{[]string{a, cut}, -1},
		{[]string{fifo}, -1},
		{[]string{filepath.Join(dir, "none.yaml")}, -1},
	} {
		if got := backupDocuments(tc.files); got != tc.want {
			t.Errorf("%v: %d, want %d", tc.files, got, tc.want)
		}
	}
}
