package testenv

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"testing"
	"time"
)

// User runs the built plugin (BuildPlugin) as one user does, each run a process of its own:
// HOME and XDG_CACHE_HOME in a folder of the user's own (where checkpoints, leases and the
// default backups live, so that two users do not share them), NO_COLOR set, then Env; in Dir
// when set. A run that takes more than 5 minutes is killed.
type User struct {
	// Bin is the plugin's kubectl-crdver.
	Bin string
	// Home is the user's HOME and XDG_CACHE_HOME.
	Home string
	// Env is added to the environment after the rest ("VAR=value"; a later one wins).
	Env []string
	// Dir is the working folder of each run ("": the test's own).
	Dir string

	t testing.TB
}

// NewUser is a user of bin with a home of its own (a t.TempDir) and env.
func NewUser(t testing.TB, bin string, env ...string) *User {
	return &User{Bin: bin, Home: t.TempDir(), Env: env, t: t}
}

// Result is one run of the plugin.
type Result struct {
	Code           int
	Stdout, Stderr string
	// Killed: RunKilled killed it.
	Killed bool
}

// Command is the plugin run with args as the user, killed when ctx ends.
func (u *User) Command(ctx context.Context, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, u.Bin, args...)
	cmd.Env = append(append(os.Environ(), "XDG_CACHE_HOME="+u.Home, "HOME="+u.Home, "NO_COLOR=1"), u.Env...)
	cmd.Cancel = func() error { return cmd.Process.Kill() }
	cmd.Dir = u.Dir
	return cmd
}

// Run runs the plugin to its end; the test fails if it cannot be started.
func (u *User) Run(args ...string) Result {
	u.t.Helper()
	var out, errb bytes.Buffer
	return u.runTo(&out, &errb, args...)
}

// RunCombined is Run with standard output and standard error on one pipe, in the order a
// terminal shows them: the result's Stdout holds both, its Stderr is empty.
func (u *User) RunCombined(args ...string) Result {
	u.t.Helper()
	var both bytes.Buffer
	return u.runTo(&both, &both, args...)
}

func (u *User) runTo(out, errb *bytes.Buffer, args ...string) Result {
	u.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := u.Command(ctx, args...)
	cmd.Stdout, cmd.Stderr = out, errb
	err := cmd.Run()
	res := Result{Stdout: out.String()}
	if errb != out {
		res.Stderr = errb.String()
	}
	if ee, ok := err.(*exec.ExitError); ok {
		res.Code = ee.ExitCode()
	} else if err != nil {
		u.t.Fatalf("running %v: %v", args, err)
	}
	return res
}

// RunKilled runs the plugin and kills it with SIGKILL as soon as kill says so (it is called
// with each line of stderr, and every 10 ms with "", and the process), or lets it end.
func (u *User) RunKilled(kill func(line string, p *os.Process) bool, args ...string) Result {
	u.t.Helper()
	return u.runKilled(kill, func(p *os.Process) bool { return kill("", p) }, args...)
}

// RunKilledWhen runs the plugin and kills it with SIGKILL as soon as ready says so (asked every
// 10 ms, always on the caller's goroutine), or lets it end.
func (u *User) RunKilledWhen(ready func() bool, args ...string) Result {
	u.t.Helper()
	return u.runKilled(nil, func(*os.Process) bool { return ready() }, args...)
}

// runKilled runs the plugin, asks onLine (when not nil) about each line of stderr and poll
// every 10 ms, and kills the plugin with SIGKILL as soon as one says so.
func (u *User) runKilled(onLine func(line string, p *os.Process) bool, poll func(p *os.Process) bool, args ...string) Result {
	u.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := u.Command(ctx, args...)
	var out, errb bytes.Buffer
	var mu sync.Mutex // errb is written by exec's copying goroutine
	cmd.Stdout = &out
	pr, pw := io.Pipe()
	cmd.Stderr = io.MultiWriter(pw, &lockedWriter{mu: &mu, buf: &errb})
	if err := cmd.Start(); err != nil {
		u.t.Fatal(err)
	}
	var once sync.Once
	killed := false
	doKill := func() {
		once.Do(func() {
			killed = true
			_ = cmd.Process.Signal(syscall.SIGKILL)
		})
	}
	go func() {
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			if onLine != nil && onLine(sc.Text(), cmd.Process) {
				doKill()
			}
		}
		_, _ = io.Copy(io.Discard, pr)
	}()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	var err error
loop:
	for {
		select {
		case err = <-done:
			break loop
		case <-tick.C:
			if poll(cmd.Process) {
				doKill()
			}
		}
	}
	pw.Close()
	mu.Lock()
	defer mu.Unlock()
	res := Result{Stdout: out.String(), Stderr: errb.String(), Killed: killed}
	if ee, ok := err.(*exec.ExitError); ok {
		res.Code = ee.ExitCode()
	}
	return res
}
