package main

// streams_test.go: every command that reads an input streams it (memory bounded whatever the
// input's size) and stops on Ctrl-C while reading, with exit 3 and what was done. The input is
// generated on the fly into the command's stdin (or a FIFO) and never ends: the command is
// interrupted once it has read a few MB, and its peak RSS is read from /proc while it reads
// (VmHWM, at two sizes) and from its rusage after it exits.

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/crdver/kubectl-crdver/internal/testenv"
)

var cronTabCRD = filepath.Join("..", "..", "testdata", "crds", "crontab.yaml")

// cronTab is the i-th CronTab of a generated stream (~190 bytes, at v1beta1: its
// spec.hostPort is pruned at v1, so every object has a finding when converted).
func cronTab(i int) string {
	return fmt.Sprintf("---\napiVersion: stable.example.com/v1beta1\nkind: CronTab\nmetadata:\n  name: ct-%07d\n  namespace: default\nspec:\n  cronSpec: \"* * * * */5\"\n  image: my-cron-image\n  hostPort: \"host:%d\"\n", i, i%65000)
}

// streamRun is one run of the plugin on a generated input that never ends.
type streamRun struct {
	args []string
	// fifo: the input is a FIFO named by the {input} argument, not stdin.
	fifo bool
	// doc is the i-th document of the input.
	doc func(i int) string
	// at are the input sizes (bytes written) at which the process's peak RSS so far is read
	// from /proc; the process is interrupted (sig) once the last is written.
	at  []int64
	sig syscall.Signal
	env []string
}

// streamResult is what a streamRun saw.
type streamResult struct {
	code           int
	stdout, stderr string
	// hwm are the peak RSS so far (KiB) at each size of at; maxRSS the process's (rusage).
	hwm    []int64
	maxRSS int64
	// written is the input written; stop the time from the signal to the exit.
	written int64
	stop    time.Duration
}

func (r streamRun) run(t *testing.T) streamResult {
	t.Helper()
	args := append([]string(nil), r.args...)
	fifo := ""
	if r.fifo {
		fifo = filepath.Join(t.TempDir(), "input.yaml")
		if err := syscall.Mkfifo(fifo, 0o600); err != nil {
			t.Skipf("no FIFO: %v", err)
		}
		for i, a := range args {
			args[i] = strings.ReplaceAll(a, "{input}", fifo)
		}
	}
	cmd := exec.Command(filepath.Join(binDir, "kubectl-crdver"), args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.Env = append(os.Environ(), r.env...)
	var in io.WriteCloser
	if !r.fifo {
		var err error
		if in, err = cmd.StdinPipe(); err != nil {
			t.Fatal(err)
		}
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	waitErr := make(chan error, 1)
	go func() { waitErr <- cmd.Wait() }()
	if r.fifo {
		// Opening the FIFO for writing waits for the command to open it for reading.
		opened := make(chan *os.File, 1)
		go func() {
			if f, err := os.OpenFile(fifo, os.O_WRONLY, 0); err == nil {
				opened <- f
			}
		}()
		select {
		case f := <-opened:
			in = f
		case err := <-waitErr:
			t.Fatalf("%v: exited (%v) before it opened its input\nstderr:\n%s", r.args, err, stderr.String())
		case <-time.After(time.Minute):
			_ = cmd.Process.Kill()
			t.Fatalf("%v: did not open its input within a minute", r.args)
		}
	}
	defer in.Close()

	var res streamResult
	var written atomic.Int64
	sizes := make(chan int64, len(r.at))
	go func() {
		w := bufio.NewWriterSize(in, 64<<10)
		next := 0
		for i := 0; ; i++ {
			n, err := w.WriteString(r.doc(i))
			if err != nil {
				return // the command exited
			}
			if written.Add(int64(n)); next < len(r.at) && written.Load() >= r.at[next] {
				if err := w.Flush(); err != nil {
					return
				}
				sizes <- r.at[next]
				next++
			}
		}
	}()
	for range r.at {
		select {
		case <-sizes:
			res.hwm = append(res.hwm, peakRSSSoFar(cmd.Process.Pid))
		case err := <-waitErr:
			t.Fatalf("%v: exited (%v) after %d bytes, before it was interrupted\nstdout:\n%s\nstderr:\n%s", r.args, err, written.Load(), tail(stdout.String()), stderr.String())
		case <-time.After(3 * time.Minute):
			_ = cmd.Process.Kill()
			t.Fatalf("%v: %d bytes read in 3 minutes", r.args, written.Load())
		}
	}
	interrupt(t, cmd, waitErr, r.sig, &res)
	res.stdout, res.stderr, res.written = stdout.String(), stderr.String(), written.Load()
	return res
}

// interrupt sends sig to the command, waits for it (30 s at the most) and sets res's exit
// code, the time from the signal to the exit, and the peak RSS of its rusage.
func interrupt(t *testing.T, cmd *exec.Cmd, waitErr <-chan error, sig syscall.Signal, res *streamResult) {
	t.Helper()
	sent := time.Now()
	if err := cmd.Process.Signal(sig); err != nil {
		t.Fatal(err)
	}
	var err error
	select {
	case err = <-waitErr:
		res.stop = time.Since(sent)
	case <-time.After(30 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatalf("%v: still running 30 s after %v", cmd.Args[1:], sig)
	}
	res.code = 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		res.code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		res.maxRSS = ru.Maxrss // KiB on Linux
	}
}

// peakRSSSoFar is the process's peak resident set so far (VmHWM, KiB), 0 without /proc.
func peakRSSSoFar(pid int) int64 {
	kib, err := testenv.HWM(pid)
	if err != nil {
		return 0
	}
	return kib
}

func tail(s string) string {
	if len(s) > 2000 {
		return "…" + s[len(s)-2000:]
	}
	return s
}

// checkStream asserts what every interrupted streaming run must show: exit 3 within maxStop of
// the signal, the error line saying what was done, a peak RSS under maxMiB, and memory that does not grow with the input
// (the peak after the last size within growMiB of the peak after the first). The rusage's
// peak is the child's own only while this process is smaller: Go starts children with
// vfork (CLONE_VM), and the kernel counts the parent's peak into the child's ru_maxrss at its
// exec; VmHWM, read from /proc, is the engine's own.
func checkStream(t *testing.T, res streamResult, stderr *regexp.Regexp, maxMiB, growMiB int64) {
	t.Helper()
	t.Logf("%d bytes written; peak RSS %v KiB at the sizes, %d KiB at the end; stopped %v after the signal", res.written, res.hwm, res.maxRSS, res.stop.Round(time.Millisecond))
	if res.code != 3 {
		t.Errorf("exit %d, want 3\nstdout:\n%s\nstderr:\n%s", res.code, tail(res.stdout), res.stderr)
	}
	if res.stop > maxStop {
		t.Errorf("stopped %v after the signal, want within %v", res.stop.Round(time.Millisecond), maxStop)
	}
	if !stderr.MatchString(res.stderr) {
		t.Errorf("stderr does not match %s:\n%s", stderr, res.stderr)
	}
	if res.maxRSS > maxMiB<<10 {
		t.Errorf("peak RSS %d MiB, want under %d MiB", res.maxRSS>>10, maxMiB)
	}
	if n := len(res.hwm); n >= 2 && res.hwm[0] > 0 && res.hwm[n-1]-res.hwm[0] > growMiB<<10 {
		t.Errorf("peak RSS grew with the input: %d KiB after the first size, %d KiB after the last (more than %d MiB)", res.hwm[0], res.hwm[n-1], growMiB)
	}
}

const (
	mib = 1 << 20
	// streamMaxMiB is the bound on every streaming command's peak RSS; streamGrowMiB on its
	// growth between the first and the last size of input (1 and 4 MiB: convert keeping every
	// object grew by about 200 MiB).
	streamMaxMiB  = 300
	streamGrowMiB = 40
	// maxStop bounds the stop after Ctrl-C or SIGTERM, from the signal to the exit. Issue 38
	// asks for a second; the runs here take 3–190 ms on a quiet machine, but one took 944 ms
	// at load 14 (docs/benchmarks.md has the figures), so the test allows twice that: what it
	// must catch is a stop that waits for the input's end (up to 125 s before the change).
	// run waits 30 s before it kills the command.
	maxStop = 2 * time.Second
)

// TestConvertStreams: convert -f - (strategy None: the API server's rule, offline) prints each
// page's findings as it is done, does not grow with the input, and stops on SIGINT with the
// report of the pages done.
func TestConvertStreams(t *testing.T) {
	res := streamRun{
		args: []string{"convert", "--crd-file", cronTabCRD, "--to", "v1", "-f", "-", "-q"},
		doc:  cronTab, at: []int64{1 * mib, 4 * mib}, sig: syscall.SIGINT,
	}.run(t)
	checkStream(t, res, regexp.MustCompile(`error: interrupted after [1-9]\d* objects \(the report above covers them\): nothing was written`), streamMaxMiB, streamGrowMiB)
	m := regexp.MustCompile(`Objects:    (\d+) given, 0 skipped, 0 converted without error, (\d+) failed`).FindStringSubmatch(res.stdout)
	if m == nil || m[1] != m[2] {
		t.Fatalf("the report of what was done:\n%s", tail(res.stdout))
	}
	// Each object's finding is printed as its page is done: as many as the objects counted.
	if n := strings.Count(res.stdout, "pruned-fields   .spec.hostPort"); strconv.Itoa(n) != m[1] {
		t.Errorf("%d findings printed for %s objects", n, m[1])
	}
}

// TestConvertStreamsJSON: -o json writes the findings as they come, and the document is
// complete (valid JSON with the counts) when the run is interrupted.
func TestConvertStreamsJSON(t *testing.T) {
	res := streamRun{
		args: []string{"convert", "--crd-file", cronTabCRD, "--to", "v1", "--round-trip", "-f", "-", "-q", "-o", "json"},
		doc:  cronTab, at: []int64{1 * mib}, sig: syscall.SIGTERM,
	}.run(t)
	checkStream(t, res, regexp.MustCompile(`error: interrupted after [1-9]\d* objects`), streamMaxMiB, streamGrowMiB)
	var rep struct {
		Findings []struct{ Check string }
		Objects  int
		Checks   []struct {
			Name   string
			Failed int
		}
	}
	if err := jsonUnmarshal(res.stdout, &rep); err != nil {
		t.Fatalf("-o json of an interrupted run: %v\n%s", err, tail(res.stdout))
	}
	failed := 0
	for _, c := range rep.Checks {
		failed += c.Failed
	}
	if rep.Objects == 0 || len(rep.Findings) != failed {
		t.Errorf("%d objects, %d findings listed, %d failed checks counted", rep.Objects, len(rep.Findings), failed)
	}
}

// TestPlanStreams: plan -f - reads a stream of documents that are not CRDs a document at a
// time (it kept them all: 314 MB for 57 MB) and stops on SIGINT while reading.
func TestPlanStreams(t *testing.T) {
	res := streamRun{
		args: []string{"plan", "-f", "-", "--old-file", cronTabCRD, "-q"},
		doc:  cronTab, at: []int64{1 * mib, 4 * mib}, sig: syscall.SIGINT,
	}.run(t)
	checkStream(t, res, regexp.MustCompile(`error: interrupted after reading [1-9]\d* documents of -f: nothing was planned`), streamMaxMiB, streamGrowMiB)
}

// TestPlanObjectsStreams: plan --objects from a FIFO (read once: one CRD) is read an object at
// a time and stops on SIGINT while evaluating.
func TestPlanObjectsStreams(t *testing.T) {
	widget := func(i int) string {
		return fmt.Sprintf("---\napiVersion: preview.example.com/v1\nkind: Widget\nmetadata: {name: w-%07d, namespace: default}\nspec: {size: small, mode: Active}\n", i)
	}
	res := streamRun{
		args: []string{"plan", "-f", widgetCRD, "--old-file", widgetCRD, "--objects", "{input}", "-q"},
		fifo: true, doc: widget, at: []int64{256 << 10}, sig: syscall.SIGINT,
	}.run(t)
	checkStream(t, res, regexp.MustCompile(`interrupted after \d+ objects: the plan is incomplete`), streamMaxMiB, streamGrowMiB)
}

// TestStreamsStopOnSIGTERM: SIGTERM stops every streaming command as Ctrl-C does (the tests
// above send SIGINT; convert's JSON test sends SIGTERM): exit 3 within maxStop, saying what was
// done. One small input each: what is asserted is the stop, not the memory.
func TestStreamsStopOnSIGTERM(t *testing.T) {
	widget := func(i int) string {
		return fmt.Sprintf("---\napiVersion: preview.example.com/v1\nkind: Widget\nmetadata: {name: w-%07d, namespace: default}\nspec: {size: small, mode: Active}\n", i)
	}
	for _, c := range []struct {
		name string
		run  streamRun
		want string
	}{
		{"plan -f -", streamRun{args: []string{"plan", "-f", "-", "--old-file", cronTabCRD, "-q"}, doc: cronTab},
			`error: interrupted after reading [1-9]\d* documents of -f: nothing was planned`},
		{"plan --objects", streamRun{args: []string{"plan", "-f", widgetCRD, "--old-file", widgetCRD, "--objects", "{input}", "-q"}, fifo: true, doc: widget},
			`interrupted after \d+ objects: the plan is incomplete`},
		{"preview", streamRun{args: []string{"preview", "-f", "{input}", "--crd-file", cronTabCRD, "-o", "name", "-q"}, fifo: true, doc: cronTab},
			`error: interrupted after [1-9]\d* objects: the output is incomplete`},
		{"versions", streamRun{args: []string{"versions", "-f", "-"}, doc: cronTab},
			`error: interrupted while reading -f, after [\d.]+ [KM]iB: nothing was done`},
		{"explain", streamRun{args: []string{"explain", "-f", "-"}, doc: cronTab},
			`error: interrupted while reading -f, after [\d.]+ [KM]iB: nothing was done`},
	} {
		t.Run(c.name, func(t *testing.T) {
			c.run.at, c.run.sig = []int64{256 << 10}, syscall.SIGTERM
			checkStream(t, c.run.run(t), regexp.MustCompile(c.want), streamMaxMiB, streamGrowMiB)
		})
	}
}

// TestPreviewStreamsPipes: preview reads process substitution, /dev/stdin and FIFOs once (it
// read them twice: no objects found, or a hang), and stops on SIGINT while reading.
func TestPreviewStreamsPipes(t *testing.T) {
	t.Run("/dev/stdin", func(t *testing.T) {
		var in strings.Builder
		for i := 0; i < 20; i++ {
			in.WriteString(cronTab(i))
		}
		cmd := exec.Command(filepath.Join(binDir, "kubectl-crdver"), "preview", "-f", "/dev/stdin", "--crd-file", cronTabCRD, "-o", "name")
		cmd.Stdin = strings.NewReader(in.String())
		out, err := cmd.CombinedOutput()
		if err != nil || !strings.Contains(string(out), "20 objects: 20 accepted, 0 rejected") {
			t.Errorf("preview -f /dev/stdin: %v\n%s", err, out)
		}
	})
	res := streamRun{
		args: []string{"preview", "-f", "{input}", "--crd-file", cronTabCRD, "-o", "name", "-q"},
		fifo: true, doc: cronTab, at: []int64{256 << 10, 1 * mib}, sig: syscall.SIGINT,
	}.run(t)
	checkStream(t, res, regexp.MustCompile(`error: interrupted after [1-9]\d* objects: the output is incomplete`), streamMaxMiB, streamGrowMiB)
	if !strings.Contains(res.stdout, "accepted crontab.stable.example.com/ct-0000000") {
		t.Errorf("the objects previewed were not printed as they came:\n%s", tail(res.stdout))
	}
}

// TestVersionsAndExplainStream: the commands that read CRDs skip the other documents a
// document at a time and stop on SIGINT while reading, saying how far they got.
func TestVersionsAndExplainStream(t *testing.T) {
	for _, c := range []string{"versions", "explain"} {
		t.Run(c, func(t *testing.T) {
			res := streamRun{args: []string{c, "-f", "-"}, doc: cronTab, at: []int64{512 << 10, 2 * mib}, sig: syscall.SIGINT}.run(t)
			checkStream(t, res, regexp.MustCompile(`error: interrupted while reading -f, after [\d.]+ MiB: nothing was done`), streamMaxMiB, streamGrowMiB)
		})
	}
}

// backupDoc is the i-th object of a generated backup, of a kind no CRD of the test cluster
// defines: each is an outcome (failed: no CRD) without a request, so the test measures the
// reading and the printing of the outcomes.
func backupDoc(i int) string {
	return fmt.Sprintf("---\napiVersion: gone.streams.example.com/v1\nkind: Gone\nmetadata:\n  name: g-%07d\n  namespace: default\nspec:\n  size: %d\n  legacy: old-value\n", i, i%100)
}

// TestRestoreStreams: restore -f - copies stdin to a temporary file once (both passes read
// it), in bounded memory, and stops on SIGINT while copying; a backup file is read and its
// outcomes printed as they come (-o json: every object, then the counts), in memory that does
// not grow with the backup.
func TestRestoreStreams(t *testing.T) {
	e := clusterEnv(t)
	res := streamRun{
		args: []string{"restore", "-f", "-", "--dry-run", "--kubeconfig", e.Kubeconfig, "-q"},
		doc:  backupDoc, at: []int64{1 * mib, 4 * mib}, sig: syscall.SIGINT,
		env: []string{"TMPDIR=" + t.TempDir()},
	}.run(t)
	checkStream(t, res, regexp.MustCompile(`error: interrupted before the first backup document: nothing was written`), streamMaxMiB, streamGrowMiB)
	res = streamRun{
		args: []string{"restore", "-f", "-", "--dry-run", "--kubeconfig", e.Kubeconfig, "-q"},
		doc:  backupDoc, at: []int64{256 << 10}, sig: syscall.SIGTERM,
		env: []string{"TMPDIR=" + t.TempDir()},
	}.run(t)
	checkStream(t, res, regexp.MustCompile(`error: interrupted before the first backup document: nothing was written`), streamMaxMiB, streamGrowMiB)

	var rss []int64
	for _, n := range []int{3000, 20000} {
		// The backup and the output go through files: the test process stays small, so that
		// the child's rusage is its own (see checkStream).
		dir := t.TempDir()
		backup := filepath.Join(dir, "backup.yaml")
		writeDocs(t, backup, backupDoc, n)
		out, err := os.Create(filepath.Join(dir, "out.json"))
		if err != nil {
			t.Fatal(err)
		}
		defer out.Close()
		cmd := exec.Command(filepath.Join(binDir, "kubectl-crdver"), "restore", "-f", backup, "--dry-run", "-o", "json", "--kubeconfig", e.Kubeconfig, "-q")
		var stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = out, &stderr
		err = cmd.Run()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 1 {
			t.Fatalf("restore of %d objects no CRD defines: %v, want exit 1\n%s", n, err, stderr.String())
		}
		var rep struct {
			DryRun  bool
			Objects []struct{ Name, State string }
			Counts  map[string]int
		}
		if _, err := out.Seek(0, io.SeekStart); err != nil {
			t.Fatal(err)
		}
		dec := json.NewDecoder(out)
		if err := dec.Decode(&rep); err != nil || dec.More() {
			t.Fatalf("-o json: not one JSON document: %v", err)
		}
		if !rep.DryRun || len(rep.Objects) != n || rep.Counts["failed"] != n || rep.Objects[n-1].Name != fmt.Sprintf("g-%07d", n-1) {
			t.Errorf("-o json of %d objects: dry run %v, %d objects, counts %v", n, rep.DryRun, len(rep.Objects), rep.Counts)
		}
		ru, _ := cmd.ProcessState.SysUsage().(*syscall.Rusage)
		rss = append(rss, ru.Maxrss)
	}
	t.Logf("peak RSS %v KiB for backups of 3,000 and 20,000 objects", rss)
	if rss[1] > streamMaxMiB<<10 || rss[1]-rss[0] > streamGrowMiB<<10 {
		t.Errorf("peak RSS %v KiB: want under %d MiB, and growing less than %d MiB from 3,000 to 20,000 objects", rss, streamMaxMiB, streamGrowMiB)
	}
}

func jsonUnmarshal(s string, v any) error {
	dec := json.NewDecoder(strings.NewReader(s))
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return errors.New("more than one JSON document")
	}
	return nil
}
