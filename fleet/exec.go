package fleet

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"
)

// Command is a child process run for one cluster (Exec).
type Command struct {
	Path string
	Args []string
	// Env is the child's environment (nil: this process's).
	Env []string
	// Grace is how long the child has to stop once ctx ends (it is sent an interrupt, as
	// Ctrl-C sends it) before it is killed (0: DefaultGrace).
	Grace time.Duration
}

// DefaultGrace is the time a child has to stop after its interrupt: the engine's commands stop
// within a second of Ctrl-C (and a kill after it is as safe, by design: DESIGN.md "State that
// resumes a run").
const DefaultGrace = time.Second

// stderrTail is how much of a child's stderr is kept (its end: the error line is last).
const stderrTail = 64 << 10

// ExecResult is how a child ended.
type ExecResult struct {
	// ExitCode is the child's exit status; 3 when it was killed or could not start.
	ExitCode int
	// Stdout is everything it printed there (its -o json report).
	Stdout []byte
	// Stderr is the end of what it printed there; ErrorLine its last "error: " line without
	// the prefix ("" when none).
	Stderr    string
	ErrorLine string
	// Err is why it could not start, or how it was ended (killed by a signal); nil when it
	// exited by itself.
	Err error
}

// Exec runs c and waits for it. When ctx ends the child is interrupted (SIGINT; killed on
// systems without signals) and killed if it is still running Grace later. On Linux the child
// is also sent SIGTERM if this process dies first (SIGKILL included), so that no child outlives
// the fleet run it belongs to.
func Exec(ctx context.Context, c Command) ExecResult {
	cmd := exec.CommandContext(ctx, c.Path, c.Args...)
	cmd.Env = c.Env
	var out bytes.Buffer
	errTail := &tailBuffer{max: stderrTail}
	cmd.Stdout, cmd.Stderr = &out, errTail
	cmd.Cancel = func() error {
		if err := cmd.Process.Signal(os.Interrupt); err != nil {
			return cmd.Process.Kill()
		}
		return nil
	}
	cmd.WaitDelay = c.Grace
	if cmd.WaitDelay <= 0 {
		cmd.WaitDelay = DefaultGrace
	}
	cmd.SysProcAttr = childAttr()
	err := cmd.Run()
	res := ExecResult{Stdout: out.Bytes(), Stderr: errTail.String()}
	res.ErrorLine = lastErrorLine(res.Stderr)
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee) && ee.Exited():
		res.ExitCode = ee.ExitCode()
	case errors.Is(err, exec.ErrWaitDelay) && cmd.ProcessState != nil && cmd.ProcessState.Exited():
		res.ExitCode = cmd.ProcessState.ExitCode() // it exited; a grandchild held its output open
	default:
		res.ExitCode, res.Err = 3, err
	}
	return res
}

// lastErrorLine is the last line of s that starts with "error: ", without the prefix.
func lastErrorLine(s string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		if rest, ok := strings.CutPrefix(lines[i], "error: "); ok {
			return rest
		}
	}
	return ""
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	b   []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if over := len(t.b) - t.max; over > 0 {
		t.b = append(t.b[:0], t.b[over:]...)
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.b)
}
