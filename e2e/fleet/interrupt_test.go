package fleet

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/crdver/kubectl-crdver/fleet"
	"github.com/crdver/kubectl-crdver/internal/testenv"
)

// blackhole is the address of a server that accepts connections and never answers: a cluster
// that hangs.
func blackhole(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		l.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	return l.Addr().String()
}

// TestFleetSlowClusterAndCtrlC: a cluster that never answers is a row that says it timed out
// (exit 3), not a hang of the whole run; and Ctrl-C (SIGINT) while it hangs stops the run
// within a second, the report saying which clusters finished.
func TestFleetSlowClusterAndCtrlC(t *testing.T) {
	_, kubeconfig := kubeconfigs(t, map[string]*testenv.Env{"a": servers["new-a"], "b": servers["old-a"]}, map[string]string{"slow": blackhole(t)})
	r := newRunner(t, "KUBECONFIG="+kubeconfig)

	res := r.Run("versions", "--all", "--all-contexts", "--cluster-timeout", "3s", "-o", "json")
	rep := report(t, res)
	if res.Code != 3 || rep.ExitCode != 3 {
		t.Errorf("exit %d, report's %d\n%s", res.Code, rep.ExitCode, res.Stderr)
	}
	if s := rep.Row("slow"); s.State != fleet.StateTimedOut || s.ExitCode != 3 || !strings.Contains(s.Error, "timed out after 3s") {
		t.Errorf("slow: %+v", s)
	}
	for _, n := range []string{"a", "b"} {
		if row := rep.Row(n); row.State != fleet.StateDone || row.ExitCode != 0 {
			t.Errorf("%s: %+v", n, row)
		}
	}

	// Ctrl-C once a and b finished, while slow hangs.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := r.Command(ctx, "versions", "--all", "--all-contexts", "-o", "json")
	var out bytes.Buffer
	cmd.Stdout = &out
	pr, pw := io.Pipe()
	cmd.Stderr = pw
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var sent time.Time
	var stderr bytes.Buffer
	scanned := make(chan struct{})
	go func() {
		defer close(scanned)
		finished := 0
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			stderr.WriteString(sc.Text() + "\n")
			if strings.HasPrefix(sc.Text(), "fleet: a:") || strings.HasPrefix(sc.Text(), "fleet: b:") {
				if finished++; finished == 2 {
					sent = time.Now()
					_ = cmd.Process.Signal(syscall.SIGINT)
				}
			}
		}
	}()
	err := cmd.Wait()
	stopped := time.Since(sent)
	pw.Close()
	<-scanned
	if sent.IsZero() {
		t.Fatalf("a and b never finished: %v\n%s", err, stderr.String())
	}
	t.Logf("stopped %v after SIGINT; %s", stopped.Round(time.Millisecond), lastLine(stderr.String()))
	// Within a second (the bound), measured from the signal to the exit of the run
	// and the close of its output (its children's too).
	if stopped >= time.Second {
		t.Errorf("the run stopped %v after SIGINT: want within a second", stopped.Round(time.Millisecond))
	}
	rep = report(t, testenv.Result{Code: cmd.ProcessState.ExitCode(), Stdout: out.String(), Stderr: stderr.String()})
	if cmd.ProcessState.ExitCode() != 3 || !rep.Interrupted || !slices.Equal(rep.Finished, []string{"a", "b"}) {
		t.Errorf("exit %d, interrupted %v, finished %v", cmd.ProcessState.ExitCode(), rep.Interrupted, rep.Finished)
	}
	if s := rep.Row("slow"); s.State != fleet.StateInterrupted {
		t.Errorf("slow: %+v", s)
	}
	if !strings.Contains(stderr.String(), "error: interrupted: 2 of 3 clusters finished (a, b)") {
		t.Errorf("the last line:\n%s", stderr.String())
	}
}
