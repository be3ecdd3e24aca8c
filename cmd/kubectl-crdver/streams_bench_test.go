package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/crdver/kubectl-crdver/internal/testenv"
)

func ptr[T any](v T) *T { return &v }

// BenchmarkStreams runs every command that reads an input on a generated input of
// CRDVER_BENCH_STREAM_OBJECTS objects (default 40,000 CronTabs, about 7.5 MB; 1,060,000 is
// about 200 MB), piped into its stdin (restore: a backup file of as many objects no CRD of the
// cluster defines), from process start to exit: wall time, objects/s and peak RSS; then the
// same command interrupted with SIGINT CRDVER_BENCH_STOP_AFTER into its run (default 2s), and
// how long it took to exit (stop-ms). CRDVER_BENCH_BIN, when set, is the folder of another
// build (kubectl-crdver and crdver-engine, e.g. of main before a change) run instead.
// CRDVER_BENCH_COMMANDS narrows the commands (e.g. "convert plan"). docs/benchmarks.md, "Input
// streams".
//
//	CRDVER_BENCH_STREAM_OBJECTS=350000 go test ./cmd/kubectl-crdver -run '^$' -bench Streams -benchtime 1x -timeout 2h
func BenchmarkStreams(b *testing.B) {
	n := 40000
	if s := os.Getenv("CRDVER_BENCH_STREAM_OBJECTS"); s != "" {
		var err error
		if n, err = strconv.Atoi(s); err != nil {
			b.Fatal(err)
		}
	}
	stopAfter := 2 * time.Second
	if s := os.Getenv("CRDVER_BENCH_STOP_AFTER"); s != "" {
		var err error
		if stopAfter, err = time.ParseDuration(s); err != nil {
			b.Fatal(err)
		}
	}
	bin := filepath.Join(binDir, "kubectl-crdver")
	if dir := os.Getenv("CRDVER_BENCH_BIN"); dir != "" {
		bin = filepath.Join(dir, "kubectl-crdver")
	}
	only := map[string]bool{}
	for _, c := range bytes.Fields([]byte(os.Getenv("CRDVER_BENCH_COMMANDS"))) {
		only[string(c)] = true
	}
	var kubeconfig string
	cases := []struct {
		name string
		args func() []string
		doc  func(int) string
		file bool // the input is a file (-f FILE), not stdin
	}{
		{"convert", func() []string { return []string{"convert", "--crd-file", cronTabCRD, "--to", "v1", "-f", "-", "-q"} }, cronTab, false},
		{"plan", func() []string { return []string{"plan", "-f", "-", "--old-file", cronTabCRD, "-q"} }, cronTab, false},
		{"preview", func() []string { return []string{"preview", "-f", "-", "--crd-file", cronTabCRD, "-o", "name", "-q"} }, cronTab, false},
		{"restore", func() []string {
			return []string{"restore", "--dry-run", "-q", "--kubeconfig", kubeconfig, "-f"}
		}, backupDoc, true},
	}
	for _, c := range cases {
		if len(only) > 0 && !only[c.name] {
			continue
		}
		b.Run(c.name, func(b *testing.B) {
			stopDoc := c.doc
			if c.name == "restore" {
				e, err := benchEnv()
				if err != nil {
					b.Fatal(err)
				}
				kubeconfig = e.Kubeconfig
				// The interrupted run restores objects of a CRD of the cluster, deleted since
				// the backup: a GET each (the measured run's objects have no CRD: no request).
				crd := testenv.TwoVersionCRD("missing.streams.example.com", "things", "Thing", apiextensionsv1.JSONSchemaProps{Type: "object", XPreserveUnknownFields: ptr(true)})
				if _, err := e.CreateCRD(context.Background(), crd); err != nil && !apierrors.IsAlreadyExists(err) {
					b.Fatal(err)
				}
				stopDoc = func(i int) string {
					return fmt.Sprintf("---\napiVersion: missing.streams.example.com/v1\nkind: Thing\nmetadata:\n  name: t-%07d\n  namespace: default\nspec:\n  size: %d\n", i, i%100)
				}
			}
			var input string
			var size int64
			if c.file {
				input = filepath.Join(b.TempDir(), "backup.yaml")
				size = writeDocs(b, input, c.doc, n)
			}
			var wall time.Duration
			var rss, stop int64
			for i := 0; i < b.N; i++ {
				args := c.args()
				if c.file {
					args = append(args, input)
				}
				r := runStream(b, bin, args, c.doc, n, c.file, 0)
				wall += r.wall
				size = max(size, r.written)
				rss = max(rss, r.rss)
				args = c.args()
				if c.file {
					stopInput := filepath.Join(b.TempDir(), "stop.yaml")
					writeDocs(b, stopInput, stopDoc, n)
					args = append(args, stopInput)
				}
				s := runStream(b, bin, args, stopDoc, n, c.file, stopAfter)
				if s.code != 3 {
					b.Errorf("%s interrupted after %v: exit %d, want 3\n%s", c.name, stopAfter, s.code, s.stderr)
				}
				stop = max(stop, s.stop.Milliseconds())
				b.Logf("%s: %d objects (%.1f MB): %.1f s, peak RSS %d MiB; SIGINT after %v: exit %d in %d ms: %s", c.name, n, float64(size)/1e6, r.wall.Seconds(), r.rss>>10, stopAfter, s.code, s.stop.Milliseconds(), lastLine(s.stderr))
			}
			b.ReportMetric(wall.Seconds()/float64(b.N), "wall-s")
			b.ReportMetric(float64(n)*float64(b.N)/wall.Seconds(), "objects/s")
			b.ReportMetric(float64(rss)/1024, "peak-RSS-MiB")
			b.ReportMetric(float64(stop), "stop-ms")
		})
	}
}

var benchEnvOnce struct {
	env *testenv.Env
	err error
	ok  bool
}

func benchEnv() (*testenv.Env, error) {
	if env != nil {
		return env, nil
	}
	if !benchEnvOnce.ok {
		benchEnvOnce.ok = true
		benchEnvOnce.env, benchEnvOnce.err = testenv.Start(testenv.Options{})
		env = benchEnvOnce.env
	}
	return benchEnvOnce.env, benchEnvOnce.err
}

// writeDocs writes n documents to path and returns its size.
func writeDocs(b testing.TB, path string, doc func(int) string, n int) int64 {
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	w := bufio.NewWriterSize(f, 1<<20)
	var size int64
	for i := 0; i < n; i++ {
		k, _ := w.WriteString(doc(i))
		size += int64(k)
	}
	if err := w.Flush(); err != nil {
		b.Fatal(err)
	}
	return size
}

type benchRun struct {
	wall, stop time.Duration
	rss        int64 // KiB
	code       int
	written    int64
	stderr     string
}

// runStream runs bin with args, n documents piped into its stdin (unless fromFile); with
// interrupt > 0 it sends SIGINT that long after the start and measures the time to exit.
func runStream(b *testing.B, bin string, args []string, doc func(int) string, n int, fromFile bool, interrupt time.Duration) benchRun {
	cmd := exec.Command(bin, args...)
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = io.Discard, &stderr
	var in io.WriteCloser
	if !fromFile {
		var err error
		if in, err = cmd.StdinPipe(); err != nil {
			b.Fatal(err)
		}
	}
	start := time.Now()
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	var r benchRun
	written := make(chan int64, 1)
	if in != nil {
		go func() {
			w := bufio.NewWriterSize(in, 1<<20)
			var size int64
			for i := 0; i < n; i++ {
				k, err := w.WriteString(doc(i))
				size += int64(k)
				if err != nil {
					break
				}
			}
			_ = w.Flush()
			in.Close()
			written <- size
		}()
	} else {
		written <- 0
	}
	waitErr := make(chan error, 1)
	go func() { waitErr <- cmd.Wait() }()
	// The child's own peak (VmHWM of the engine's memory, every 50 ms): its rusage would also
	// count this process's peak (see checkStream).
	var peak atomic.Int64
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		for {
			hwm := peakRSSSoFar(cmd.Process.Pid)
			if hwm == 0 {
				return
			}
			peak.Store(max(peak.Load(), hwm))
			time.Sleep(50 * time.Millisecond)
		}
	}()
	var err error
	if interrupt > 0 {
		select {
		case err = <-waitErr:
			b.Logf("%v: ended before the interrupt", args[0])
		case <-time.After(interrupt):
			sent := time.Now()
			_ = cmd.Process.Signal(syscall.SIGINT)
			err = <-waitErr
			r.stop = time.Since(sent)
		}
	} else {
		err = <-waitErr
	}
	r.wall = time.Since(start)
	r.written = <-written
	if ee, ok := err.(*exec.ExitError); ok {
		r.code = ee.ExitCode()
	}
	<-sampled
	r.rss = peak.Load()
	if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok && r.rss == 0 {
		r.rss = ru.Maxrss // no /proc: an upper bound
	}
	r.stderr = stderr.String()
	return r
}

func lastLine(s string) string {
	s = string(bytes.TrimSpace([]byte(s)))
	if i := bytes.LastIndexByte([]byte(s), '\n'); i >= 0 {
		return s[i+1:]
	}
	return s
}
