package main

// streams_write_test.go: convert --write streams too — a folder of many files and one file of
// many documents — and an interrupted --write leaves every file whole: as it was, or rewritten.

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

// cleanCronTab is the i-th CronTab of a generated manifest (~170 bytes, v1beta1, with a
// comment): it converts to v1 with no finding, and only its apiVersion line changes.
func cleanCronTab(i int) string {
	return fmt.Sprintf("---\n# backup %d\napiVersion: stable.example.com/v1beta1\nkind: CronTab\nmetadata:\n  name: ct-%07d\n  namespace: default\nspec:\n  cronSpec: \"* * * * */5\"\n  image: my-cron-image\n", i, i)
}

// interruptAt runs the plugin with args, reads its peak RSS so far (VmHWM) each time done()
// (how much of its input it has done, in bytes, polled) passes a size of at, and interrupts
// it with sig once it passed the last.
func interruptAt(t *testing.T, args []string, done func(stdout string) int64, at []int64, sig syscall.Signal) streamResult {
	t.Helper()
	cmd := exec.Command(filepath.Join(binDir, "kubectl-crdver"), args...)
	var stdout, stderr syncBuffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	waitErr := make(chan error, 1)
	go func() { waitErr <- cmd.Wait() }()
	var res streamResult
	deadline := time.Now().Add(3 * time.Minute)
	for next := 0; next < len(at); {
		select {
		case err := <-waitErr:
			t.Fatalf("%v: exited (%v) after %d bytes, before it was interrupted\nstdout:\n%s\nstderr:\n%s", args, err, done(stdout.String()), tail(stdout.String()), stderr.String())
		case <-time.After(20 * time.Millisecond):
		}
		if n := done(stdout.String()); n >= at[next] {
			res.hwm = append(res.hwm, peakRSSSoFar(cmd.Process.Pid))
			res.written = n
			next++
		}
		if time.Now().After(deadline) {
			_ = cmd.Process.Kill()
			t.Fatalf("%v: %d bytes done in 3 minutes", args, done(stdout.String()))
		}
	}
	interrupt(t, cmd, waitErr, sig, &res)
	res.stdout, res.stderr = stdout.String(), stderr.String()
	return res
}

// noTemporaries fails when a temporary file of a rewrite is left in dir.
func noTemporaries(t *testing.T, dir string) {
	t.Helper()
	left, err := filepath.Glob(filepath.Join(dir, ".*.partial-*"))
	if err != nil || len(left) > 0 {
		t.Errorf("temporary files left behind (%v): %v", err, left)
	}
}

// TestConvertWriteStreamsFolder: --write on a folder of many files prints each file as it is
// written, does not grow with the files done, and stops on SIGINT with exit 3 and the files
// written so far; every file is whole: as it was, or rewritten (never half of one).
func TestConvertWriteStreamsFolder(t *testing.T) {
	const files, perFile = 300, 20
	dir := t.TempDir()
	old := make([]string, files)
	var size int64
	for f := range old {
		var b strings.Builder
		for i := 0; i < perFile; i++ {
			b.WriteString(cleanCronTab(f*perFile + i))
		}
		old[f] = b.String()
		size = int64(len(old[f]))
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("team-%04d.yaml", f)), []byte(old[f]), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	row := regexp.MustCompile(`(?m)^\S+/team-\d{4}\.yaml\s+\d+\s+CronTab\s.*\swritten$`)
	done := func(stdout string) int64 { return int64(len(row.FindAllStringIndex(stdout, -1))/perFile) * size }
	res := interruptAt(t, []string{"convert", "--crd-file", cronTabCRD, "--to", "v1", "-f", dir, "--write", "--kube-version", "1.34"},
		done, []int64{mib / 8, mib / 2}, syscall.SIGINT)
	// Interrupted between files, or while a file's result was printed: that file was done and
	// the error line names it as such (its rows may be cut short).
	checkStream(t, res, regexp.MustCompile(`error: interrupted: (\S+/team-\d{4}\.yaml was left as it was|while the result of \S+/team-\d{4}\.yaml was printed \(that file was done\)); [1-9]\d* files? rewritten \(listed above\), each whole; every other file is as it was`), streamMaxMiB, streamGrowMiB)
	if !strings.Contains(res.stdout, "object(s) in the files, 0 already at v1,") {
		t.Errorf("no counts of what was done at the end:\n%s", tail(res.stdout))
	}
	listed := map[string]bool{}
	for _, m := range row.FindAllString(res.stdout, -1) {
		listed[filepath.Base(strings.Fields(m)[0])] = true
	}
	if m := regexp.MustCompile(`while the result of (\S+) was printed \(that file was done\)`).FindStringSubmatch(res.stderr); m != nil {
		listed[filepath.Base(m[1])] = true
	}
	rewritten := 0
	for f, text := range old {
		name := fmt.Sprintf("team-%04d.yaml", f)
		got, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		switch string(got) {
		case text:
			if listed[name] {
				t.Errorf("%s: listed as written, but as it was", name)
			}
		case strings.ReplaceAll(text, "stable.example.com/v1beta1", "stable.example.com/v1"):
			rewritten++
			if !listed[name] {
				t.Errorf("%s: rewritten, but not listed as written", name)
			}
		default:
			t.Fatalf("%s is neither as it was nor rewritten whole:\n%s", name, got)
		}
	}
	if rewritten == 0 || rewritten == files {
		t.Errorf("%d of %d files rewritten: want the run interrupted part way", rewritten, files)
	}
	noTemporaries(t, dir)
}

// TestConvertWriteStreamsOneFile: --write on one file of many documents writes the new file as
// it goes (its temporary file grows), does not grow with the documents done beyond the file's
// results, and on SIGINT exits 3 leaving the file as it was.
func TestConvertWriteStreamsOneFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "crontabs.yaml")
	var b strings.Builder
	for i := 0; b.Len() < 2*mib; i++ {
		b.WriteString(cleanCronTab(i))
	}
	text := b.String()
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	// How far it is: the size of the new file it writes beside the old.
	done := func(string) int64 {
		tmp, _ := filepath.Glob(filepath.Join(dir, ".crontabs.yaml.partial-*"))
		var n int64
		for _, p := range tmp {
			if st, err := os.Stat(p); err == nil {
				n = max(n, st.Size())
			}
		}
		return n
	}
	res := interruptAt(t, []string{"convert", "--crd-file", cronTabCRD, "--to", "v1", "-f", path, "--write", "--kube-version", "1.34"},
		done, []int64{mib / 4, mib}, syscall.SIGINT)
	checkStream(t, res, regexp.MustCompile(`(?m)error: interrupted: \S+/crontabs\.yaml was left as it was; nothing was written$`), streamMaxMiB, streamGrowMiB)
	if got, err := os.ReadFile(path); err != nil || string(got) != text {
		t.Errorf("the file changed (%v): an interrupted file must be left as it was", err)
	}
	noTemporaries(t, dir)
}
