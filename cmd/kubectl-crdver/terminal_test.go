package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"

	"github.com/crdver/kubectl-crdver/internal/testcrd"
	"github.com/crdver/kubectl-crdver/internal/testwebhook"
)

// replayTerminal is what a terminal shows after out: a carriage return goes back to the start of
// the line, ESC[K erases to its end, a newline (the pty sends \r\n) starts the next one.
func replayTerminal(out string) string {
	var lines []string
	var cur []rune
	col := 0
	rs := []rune(out)
	for i := 0; i < len(rs); i++ {
		switch r := rs[i]; {
		case r == '\n':
			lines = append(lines, string(cur))
			cur, col = nil, 0
		case r == '\r':
			col = 0
		case r == '\x1b' && i+2 < len(rs) && rs[i+1] == '[' && rs[i+2] == 'K':
			cur = cur[:col]
			i += 2
		default:
			if col < len(cur) {
				cur[col] = r
			} else {
				cur = append(cur, r)
			}
			col++
		}
	}
	if len(cur) > 0 {
		lines = append(lines, string(cur))
	}
	return strings.Join(lines, "\n") + "\n"
}

// barFrame is a drawn bar: "rewriting  40% |██  | (120/300, 148 objects/s) [1s:1s]", or with an
// unknown total "previewing (120, 148 objects/s) [1s]".
var barFrame = regexp.MustCompile(`\r[a-z][^\r\n]* (\d+% \|[^|]*\| \(\d+/\d+|\(\d+), \d+ \w+/(s|min|hr)\) \[`)

var digits = regexp.MustCompile(`\d+(\.\d+)?`)

// blanks are runs of spaces (columns move when numbers change width).
var blanks = regexp.MustCompile(` +`)

// sameText is s with numbers as N and runs of spaces as one, its lines sorted (convert's
// findings of one object come in varying order).
func sameText(s string) string {
	lines := strings.Split(blanks.ReplaceAllString(digits.ReplaceAllString(s, "N"), " "), "\n")
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}

// feed is a process's standard input (or a FIFO it reads) written in parts, with a pause
// before each later part.
type feed struct {
	parts []string
	pause time.Duration
	// fifo, when set, is a named pipe the parts are written to, once per run (the command
	// reads it as a file it is given), instead of standard input.
	fifo string
}

// writeTo writes the parts to w, pausing before each later one; it stops at the first error
// (the reader is gone).
func (in *feed) writeTo(w io.Writer) {
	for i, p := range in.parts {
		if i > 0 {
			time.Sleep(in.pause)
		}
		if _, err := io.WriteString(w, p); err != nil {
			return
		}
	}
}

// toFIFO writes in's parts to its FIFO once, for one run, in the background: the writer's
// open waits for the command's. The function it returns waits for the writer, after the run;
// a command that never opened (or stopped reading) the FIFO is stood in for by a reader here.
func (in *feed) toFIFO() (wait func()) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		f, err := os.OpenFile(in.fifo, os.O_WRONLY, 0)
		if err != nil {
			return
		}
		defer f.Close()
		in.writeTo(f)
	}()
	return func() {
		select {
		case <-done:
			return
		default:
		}
		if r, err := os.OpenFile(in.fifo, os.O_RDONLY|syscall.O_NONBLOCK, 0); err == nil {
			_, _ = io.Copy(io.Discard, r)
			_ = r.Close()
		}
		<-done
	}
}

// onTerminalAndPipe runs the built binary with args twice: with stdout and stderr on one
// pseudo-terminal (stdin fed slowly by in, when set), and with both on one pipe (stdin all at
// once, plain progress lines off). It checks what the terminal finally shows is exactly what
// the pipe got, numbers aside (rates, durations): every bar was cleared before anything else was
// printed, and left no blank line. It returns the raw terminal output.
func onTerminalAndPipe(t *testing.T, in *feed, args ...string) string {
	t.Helper()
	bin := filepath.Join(binDir, "kubectl-crdver")
	cmd := exec.Command(bin, args...)
	cmd.Dir = filepath.Join("..", "..")
	fed := func() {}
	if in != nil && in.fifo != "" {
		fed = in.toFIFO()
	} else if in != nil {
		stdin, err := cmd.StdinPipe()
		if err != nil {
			t.Fatal(err)
		}
		go func() {
			defer stdin.Close()
			in.writeTo(stdin)
		}()
	}
	raw, _ := runOnTerminal(t, cmd, func(tty *os.File) { cmd.Stdout, cmd.Stderr = tty, tty }, 3*time.Minute)
	fed() // the FIFO's writer for this run is done before the next run's starts

	piped := exec.Command(bin, append(args, "--progress-interval", "1h")...)
	piped.Dir = cmd.Dir
	fed = func() {}
	if in != nil && in.fifo != "" {
		fed = in.toFIFO()
	} else if in != nil {
		piped.Stdin = strings.NewReader(strings.Join(in.parts, ""))
	}
	var both bytes.Buffer
	piped.Stdout, piped.Stderr = &both, &both
	_ = piped.Run()
	fed()

	screen := replayTerminal(raw)
	if strings.Contains(screen, "% |") || barFrame.MatchString("\r"+screen) {
		t.Errorf("a progress bar is left on the terminal:\n%s", screen)
	}
	if got, want := sameText(screen), sameText(both.String()); got != want {
		t.Errorf("the terminal shows other text than a pipe gets (numbers as N; -pipe +terminal):\n%s\nraw terminal output:\n%q", cmp.Diff(want, got), raw)
	}
	return raw
}

// TestProgressOnTerminal: each long command shows its bar on a terminal once it has run for
// about a second, and clears it before printing anything else there; a short run shows none.
func TestProgressOnTerminal(t *testing.T) {
	repo := func(p ...string) string { return filepath.Join(p...) } // paths relative to the repository root
	t.Run("preview, one object: no bar", func(t *testing.T) {
		raw := onTerminalAndPipe(t, nil, "preview", "-f", repo("testdata", "preview", "crontab-v1beta1.yaml"), "--crd-file", repo("testdata", "crds", "crontab.yaml"))
		if strings.Contains(raw, "previewing") {
			t.Errorf("a sub-second preview drew a bar:\n%q", raw)
		}
	})
	t.Run("preview, slow input: results interleaved with the bar", func(t *testing.T) {
		widgets, err := os.ReadFile(filepath.Join("..", "..", "testdata", "preview", "widgets.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		second := strings.ReplaceAll(string(widgets), "name: ", "name: more-")
		raw := onTerminalAndPipe(t, &feed{parts: []string{string(widgets) + "\n---\n", second}, pause: 2500 * time.Millisecond},
			"preview", "-f", "-", "--crd-file", repo("testdata", "crds", "widget.yaml"), "-o", "name")
		if !barFrame.MatchString(raw) || !strings.Contains(raw, "previewing (") {
			t.Errorf("no bar while preview waited for its input:\n%q", raw)
		}
	})
	t.Run("plan", func(t *testing.T) {
		// The objects come from a FIFO, half of them 2.5 s after the other half: plan is at
		// work past the bar's one-second delay however fast the machine evaluates them (6,000
		// objects in a file took under a second on an idle one).
		var first, second strings.Builder
		for i := 0; i < 2000; i++ {
			half := &first
			if i >= 1000 {
				half = &second
			}
			fmt.Fprintf(half, "---\napiVersion: plan.example.com/v1\nkind: Widget\nmetadata: {name: w-%d, namespace: default}\nspec: {size: 4, mode: a, owner: x, tier: gold}\n", i)
		}
		in := &feed{parts: []string{first.String(), second.String()}, pause: 2500 * time.Millisecond, fifo: filepath.Join(t.TempDir(), "objects.fifo")}
		if err := syscall.Mkfifo(in.fifo, 0o600); err != nil {
			t.Fatal(err)
		}
		raw := onTerminalAndPipe(t, in, "plan", "-f", repo("plan", "testdata", "widgets-new.yaml"), "--old-file", repo("plan", "testdata", "widgets-old.yaml"),
			"--objects", in.fifo, "--workers", "1")
		if !barFrame.MatchString(raw) {
			t.Errorf("no bar while plan waited 2.5 s for half of its objects:\n%q", raw)
		}
		if !strings.Contains(raw, "2000/2000") {
			t.Errorf("plan did not evaluate the 2,000 objects of the FIFO once:\n%q", raw)
		}
	})
	t.Run("convert", func(t *testing.T) {
		srv := testwebhook.StartForTest(t, testwebhook.Options{})
		srv.SetLatency(400 * time.Millisecond)
		crd := writeWebhookCRD(t, srv)
		raw := onTerminalAndPipe(t, nil, "convert", "--crd-file", crd, "--to", "v1", "--generate", "12", "--from", "v1beta1", "--webhook-address", srv.Addr, "--batch-size", "2")
		if !barFrame.MatchString(raw) {
			t.Errorf("no bar while convert waited for the webhook:\n%q", raw)
		}
	})
	t.Run("doctor", func(t *testing.T) {
		e := clusterEnv(t)
		srv := testwebhook.StartForTest(t, testwebhook.Options{})
		srv.SetLatency(1500 * time.Millisecond)
		crd := webhookCRDFor(t, srv, "doctor.cmd.example.com")
		if _, err := e.CreateCRD(context.Background(), crd); err != nil {
			t.Fatal(err)
		}
		if err := e.CreateObjects(context.Background(), crd, []string{"default"}, 1); err != nil {
			t.Fatal(err)
		}
		raw := onTerminalAndPipe(t, nil, "doctor", crd.Name, "--kubeconfig", e.Kubeconfig)
		if !barFrame.MatchString(raw) {
			t.Errorf("no bar while doctor waited for the webhook:\n%q", raw)
		}
	})
	t.Run("migrate", func(t *testing.T) {
		e := clusterEnv(t)
		// Two fixtures alike: the terminal run and the piped run each migrate one.
		a := migrationFixture(t, e, "term-a.cmd.example.com", 300)
		b := migrationFixture(t, e, "term-b.cmd.example.com", 300)
		args := func(name string) []string {
			return []string{"migrate", name, "--to", "v1", "--yes", "--qps", "100", "--concurrency", "1", "--chunk-size", "50",
				"--checkpoint", filepath.Join(t.TempDir(), "cp"), "--kubeconfig", e.Kubeconfig}
		}
		bin := filepath.Join(binDir, "kubectl-crdver")
		cmd := exec.Command(bin, args(a)...)
		raw, err := runOnTerminal(t, cmd, func(tty *os.File) { cmd.Stdout, cmd.Stderr = tty, tty }, 2*time.Minute)
		if err != nil {
			t.Fatalf("migrate: %v\n%q", err, raw)
		}
		var both bytes.Buffer
		piped := exec.Command(bin, append(args(b), "--progress-interval", "1h")...)
		piped.Stdout, piped.Stderr = &both, &both
		if err := piped.Run(); err != nil {
			t.Fatalf("migrate: %v\n%s", err, both.String())
		}
		norm := func(s string) string {
			return sameText(strings.ReplaceAll(strings.ReplaceAll(s, "term-a", "X"), "term-b", "X"))
		}
		screen := replayTerminal(raw)
		if got, want := norm(screen), norm(both.String()); got != want {
			t.Errorf("the terminal shows other text than a pipe gets (-pipe +terminal):\n%s\nraw:\n%q", cmp.Diff(want, got), raw)
		}
		if !barFrame.MatchString(raw) {
			t.Errorf("no bar on the terminal:\n%q", raw)
		}
	})
}

// webhookCRDFor is testdata/crds/crontab-webhook.yaml in group, converted by srv.
func webhookCRDFor(t *testing.T, srv *testwebhook.Server, group string) *apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "testdata", "crds", "crontab-webhook.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := yaml.UnmarshalStrict(b, crd); err != nil {
		t.Fatal(err)
	}
	return testcrd.With(crd, testcrd.Conversion(srv.WebhookConversion("v1", "v1beta1")), testcrd.Group(group))
}

// writeWebhookCRD writes a webhook CRD converted by srv to a file and returns its path.
func writeWebhookCRD(t *testing.T, srv *testwebhook.Server) string {
	t.Helper()
	b, err := json.Marshal(webhookCRDFor(t, srv, "convert.cmd.example.com"))
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "crd.json")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}
