package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/creack/pty"

	"github.com/crdver/kubectl-crdver/internal/proc"
)

var widgetCRD = filepath.Join("..", "..", "testdata", "crds", "widget.yaml")

// writeWidgetList writes n Widgets as one List, in kubectl get -o json's layout (items before
// kind), each about 700 bytes; every tenth is invalid (size "huge"). It returns the file size.
func writeWidgetList(t testing.TB, path string, n int) int64 {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	w := bufio.NewWriterSize(f, 1<<20)
	fmt.Fprint(w, "{\n    \"apiVersion\": \"v1\",\n    \"items\": [\n")
	for i := 0; i < n; i++ {
		size := "small"
		if i%10 == 9 {
			size = "huge"
		}
		if i > 0 {
			fmt.Fprint(w, ",\n")
		}
		fmt.Fprintf(w, `        {
            "apiVersion": "preview.example.com/v1",
            "kind": "Widget",
            "metadata": {
                "name": "widget-%07d",
                "namespace": "team-%d",
                "labels": {"app.kubernetes.io/name": "widget", "app.kubernetes.io/instance": "widget-%07d", "tier": "backend"},
                "annotations": {"example.com/owner": "platform-team@example.com", "example.com/description": "a widget generated for the big-input tests and benchmarks"}
            },
            "spec": {
                "size": %q,
                "mode": "Active",
                "schedule": "0 * * * *",
                "minReplicas": 2,
                "maxReplicas": 5,
                "ports": [{"name": "http", "port": 8080}, {"name": "metrics", "port": 9090}],
                "tags": ["a", "b", "c"],
                "unknownField": "pruned"
            }
        }`, i, i%7, i, size)
	}
	fmt.Fprint(w, "\n    ],\n    \"kind\": \"List\",\n    \"metadata\": {\"resourceVersion\": \"\"}\n}\n")
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	st, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	return st.Size()
}

// TestPreviewSignalsOnTerminal: a long offline preview shows its progress on a terminal
// (objects, rate, bytes of the total, ETA) and stops on SIGINT and on SIGTERM with exit 3,
// saying how far it got.
func TestPreviewSignalsOnTerminal(t *testing.T) {
	list := filepath.Join(t.TempDir(), "widgets.json")
	writeWidgetList(t, list, 200000)
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM} {
		t.Run(sig.String(), func(t *testing.T) {
			cmd := exec.Command(filepath.Join(binDir, "kubectl-crdver"), "preview", "-f", list, "--crd-file", widgetCRD, "-o", "name")
			cmd.Stdout = io.Discard
			ptmx, tty, err := pty.Open()
			if err != nil {
				t.Skipf("no pseudo-terminal available: %v", err)
			}
			defer ptmx.Close()
			cmd.Stderr = tty
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			tty.Close()
			screen := &syncBuffer{}
			go func() { _, _ = io.Copy(screen, ptmx) }()
			waitErr := make(chan error, 1)
			go func() { waitErr <- cmd.Wait() }()
			// The shared display's bar, in MiB of the input: "previewing  40% |███   | (56/140, 3 MiB/s) [19s:28s]", redrawn.
			progress := regexp.MustCompile(`previewing\s+\d+% \|[^|]*\| \([1-9]\d*/\d+, \d+ MiB/(s|min|hr)\) \[\d+s:\w+\]`)
			deadline := time.Now().Add(time.Minute)
			for !progress.MatchString(screen.String()) {
				if time.Now().After(deadline) {
					_ = cmd.Process.Kill()
					t.Fatalf("no progress line on the terminal within a minute:\n%q", screen.String())
				}
				select {
				case err := <-waitErr:
					t.Fatalf("preview ended before it was interrupted (%v):\n%q", err, screen.String())
				case <-time.After(50 * time.Millisecond):
				}
			}
			sent := time.Now()
			if err := cmd.Process.Signal(sig); err != nil {
				t.Fatal(err)
			}
			select {
			case err := <-waitErr:
				took := time.Since(sent)
				t.Logf("%v: exited %v after the signal", sig, took.Round(time.Millisecond))
				var ee *exec.ExitError
				if !errors.As(err, &ee) || ee.ExitCode() != 3 {
					t.Fatalf("after %v: %v, want exit 3\n%q", sig, err, screen.String())
				}
			case <-time.After(5 * time.Second):
				_ = cmd.Process.Kill()
				t.Fatalf("still running 5 s after %v", sig)
			}
			// The last line reaches the screen buffer through the pseudo-terminal a moment after
			// the exit (later on a loaded machine): wait for it, up to 5 s.
			interrupted := regexp.MustCompile(`error: interrupted after \d+ objects: the output is incomplete`)
			for end := time.Now().Add(5 * time.Second); !interrupted.MatchString(screen.String()) && time.Now().Before(end); {
				time.Sleep(20 * time.Millisecond)
			}
			if out := screen.String(); !interrupted.MatchString(out) || !strings.Contains(out, "\r") {
				t.Errorf("terminal output:\n%q", out[max(0, len(out)-600):])
			}
		})
	}
}

// TestInterruptBlockedStdin: `versions -f -` waiting on a pipe that never ends stops on SIGINT
// with exit 3.
func TestInterruptBlockedStdin(t *testing.T) {
	cmd := exec.Command(filepath.Join(binDir, "kubectl-crdver"), "versions", "-f", "-")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	defer stdin.Close()
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	_, _ = io.WriteString(stdin, "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\n")
	waitBlocked(cmd.Process.Pid) // let it block on the read
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	waitErr := make(chan error, 1)
	go func() { waitErr <- cmd.Wait() }()
	select {
	case err := <-waitErr:
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 3 || !strings.Contains(stderr.String(), "error: interrupted") {
			t.Errorf("exit %v, stderr %q; want 3 and interrupted", err, stderr.String())
		}
	case <-time.After(5 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatal("still running 5 s after SIGINT")
	}
}

// waitBlocked waits until the process pid runs crdver-engine (kubectl-crdver executes it) and
// has used no CPU for 300 ms (blocked: its set-up, signal handlers included, is done), at most
// 20 s; without /proc it waits 300 ms. A fixed 300 ms was too short on a loaded machine: the
// signal came before the engine's handler and killed it.
func waitBlocked(pid int) {
	if _, err := proc.ReadStat(pid); err != nil {
		time.Sleep(300 * time.Millisecond)
		return
	}
	const unknown = ^uint64(0)
	last, still := unknown, 0
	for end := time.Now().Add(20 * time.Second); time.Now().Before(end) && still < 3; {
		time.Sleep(100 * time.Millisecond)
		exe, _ := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid))
		now := unknown
		if st, err := proc.ReadStat(pid); err == nil {
			now = st.CPUTicks // user + system time
		}
		if filepath.Base(exe) == "crdver-engine" && now != unknown && now == last {
			still++
		} else {
			still = 0
		}
		last = now
	}
}

// BenchmarkPreviewBigList previews a ~50 MB List of ~70,000 Widgets (generated, not committed)
// with 1 and 2 workers, from process start to exit, output -o name to /dev/null. It reports
// objects/s and the process's peak RSS (docs/benchmarks.md, "preview on big inputs").
//
//	go test ./cmd/kubectl-crdver -run '^$' -bench PreviewBigList -benchtime 1x
func BenchmarkPreviewBigList(b *testing.B) {
	const n = 70000
	list := filepath.Join(b.TempDir(), "widgets.json")
	size := writeWidgetList(b, list, n)
	b.Logf("input: %d objects, %.1f MB", n, float64(size)/1e6)
	for _, workers := range []int{1, 2} {
		b.Run(fmt.Sprintf("workers=%d", workers), func(b *testing.B) {
			var rss int64
			var total time.Duration
			for i := 0; i < b.N; i++ {
				cmd := exec.Command(filepath.Join(binDir, "kubectl-crdver"), "preview", "-f", list, "--crd-file", widgetCRD,
					"-o", "name", "--workers", fmt.Sprint(workers))
				var stderr bytes.Buffer
				cmd.Stdout, cmd.Stderr = io.Discard, &stderr
				start := time.Now()
				err := cmd.Run()
				total += time.Since(start)
				var ee *exec.ExitError
				if !errors.As(err, &ee) || ee.ExitCode() != 1 || !strings.Contains(stderr.String(), fmt.Sprintf("%d objects: %d accepted, %d rejected", n, n-n/10, n/10)) {
					b.Fatalf("preview: %v\n%s", err, stderr.String())
				}
				if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok && ru.Maxrss > rss {
					rss = ru.Maxrss // KiB on Linux
				}
			}
			b.ReportMetric(float64(n)*float64(b.N)/total.Seconds(), "objects/s")
			b.ReportMetric(float64(rss)/1024, "peak-RSS-MiB")
		})
	}
}
