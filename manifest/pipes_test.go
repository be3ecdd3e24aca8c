package manifest

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestSizeAndRereadable: the size of files is known without opening them, and unknown (-1)
// as soon as one of them is stdin, a URL or a pipe; only regular files can be read twice.
func TestSizeAndRereadable(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a.yaml"), filepath.Join(dir, "b.yaml")
	for _, f := range []string{a, b} {
		if err := os.WriteFile(f, []byte("kind: A\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	fifo := filepath.Join(dir, "fifo.yaml")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skipf("no FIFO: %v", err)
	}
	for _, tc := range []struct {
		files []string
		size  int64
	}{
		{[]string{a, b}, 16},
		{[]string{a, "-"}, -1},
		{[]string{a, "https://example.com/x.yaml"}, -1},
		{[]string{a, fifo}, -1},
		{[]string{"/dev/stdin"}, -1},
	} {
		if got := Size(tc.files); got != tc.size {
			t.Errorf("Size(%v) = %d, want %d", tc.files, got, tc.size)
		}
	}
	for f, want := range map[string]bool{a: true, fifo: false, "-": false, "https://example.com/x.yaml": false, filepath.Join(dir, "none"): false} {
		if got := Rereadable(f); got != want {
			t.Errorf("Rereadable(%s) = %v, want %v", f, got, want)
		}
	}
}

// TestDocumentsPulled: Open reads on demand (Next), a FIFO once; Close ends the reading, and
// Next then says io.EOF; a cancelled context ends a Next blocked on a read.
func TestDocumentsPulled(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "fifo.yaml")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skipf("no FIFO: %v", err)
	}
	go func() {
		w, err := os.OpenFile(fifo, os.O_WRONLY, 0)
		if err != nil {
			return
		}
		defer w.Close()
		_, _ = io.WriteString(w, strings.Repeat("---\napiVersion: v1\nkind: ConfigMap\n", 3))
	}()
	docs := Open(context.Background(), []string{fifo}, Options{})
	for i := 1; i <= 3; i++ {
		d, err := docs.Next()
		if err != nil || d.Index != i || d.Kind != "ConfigMap" {
			t.Fatalf("document %d: %+v, %v", i, d, err)
		}
	}
	if _, err := docs.Next(); !errors.Is(err, io.EOF) {
		t.Errorf("after the last document: %v, want io.EOF", err)
	}

	pr, pw := io.Pipe()
	defer pw.Close()
	ctx, cancel := context.WithCancel(context.Background())
	docs = Open(ctx, []string{"-"}, Options{Stdin: pr})
	go func() { _, _ = io.WriteString(pw, "apiVersion: v1\nkind: ConfigMap\n---\n") }()
	if d, err := docs.Next(); err != nil || d.Kind != "ConfigMap" {
		t.Fatalf("first document: %+v, %v", d, err)
	}
	cancel() // the next read is blocked on the pipe
	var ie *InterruptedError
	if _, err := docs.Next(); !errors.As(err, &ie) {
		t.Errorf("Next after cancel: %v, want *InterruptedError", err)
	}
	docs.Close()
	if _, err := docs.Next(); !errors.As(err, &ie) {
		t.Errorf("Next after Close: %v, want the error it gave before", err)
	}
}
