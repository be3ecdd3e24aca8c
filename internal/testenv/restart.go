package testenv

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"k8s.io/client-go/kubernetes"

	"github.com/crdver/kubectl-crdver/internal/proc"
)

// RestartAPIServer kills the kube-apiserver process with SIGKILL (a crash, or a node rebooted:
// in-flight requests and watches cut, nothing drained), keeps it down for down, then starts it
// again with the same command line — the same certificates, port and etcd, so clients keep
// their kubeconfig — and waits until it serves. (envtest's own restart issues new
// certificates and users.) The new process is stopped by Stop.
func (e *Env) RestartAPIServer(ctx context.Context, down time.Duration) error {
	return e.restartAPIServer(ctx, down, nil)
}

// RestartAPIServerWith restarts kube-apiserver as RestartAPIServer does (at once), with its
// command line changed by flags ("--name=value"): each replaces the flag of that name, or is
// added (a cluster whose administrator switched a feature gate or an API on, for instance).
func (e *Env) RestartAPIServerWith(ctx context.Context, flags ...string) error {
	return e.restartAPIServer(ctx, 0, flags)
}

func (e *Env) restartAPIServer(ctx context.Context, down time.Duration, flags []string) error {
	pid, args, err := e.apiServerProcess()
	if err != nil {
		return err
	}
	args = withFlags(args, flags)
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		return fmt.Errorf("killing kube-apiserver (pid %d): %w", pid, err)
	}
	for deadline := time.Now().Add(10 * time.Second); ; {
		if st, err := proc.ReadStat(pid); err != nil || st.State == "Z" {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("kube-apiserver (pid %d) still runs 10 s after SIGKILL", pid)
		}
		time.Sleep(20 * time.Millisecond)
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(down):
	}
	if err := waitPortFree(args); err != nil {
		return err
	}
	cmd := exec.Command(args[0], args[1:]...)
	var mu sync.Mutex
	var logs bytes.Buffer // what it says, for the error when it does not serve
	cmd.Stdout = &lockedWriter{mu: &mu, buf: &logs}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting kube-apiserver again: %w", err)
	}
	e.restarted = append(e.restarted, cmd)
	kc, err := kubernetes.NewForConfig(e.Config)
	if err != nil {
		return err
	}
	said := func() string {
		mu.Lock()
		defer mu.Unlock()
		b := logs.Bytes()
		return string(b[max(0, len(b)-3000):])
	}
	for deadline := time.Now().Add(2 * time.Minute); ; {
		if _, err := kc.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx); err == nil {
			return nil
		}
		if st, err := proc.ReadStat(cmd.Process.Pid); err != nil || st.State == "Z" {
			return fmt.Errorf("kube-apiserver exited after its restart; it said:\n%s", said())
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("kube-apiserver not ready 2 minutes after its restart; it said:\n%s", said())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// apiServerProcess finds this environment's kube-apiserver among the processes (the one
// whose etcd is this environment's) and returns its PID and command line.
func (e *Env) apiServerProcess() (int, []string, error) {
	return findProcess("kube-apiserver", "--etcd-servers="+e.EtcdURL)
}

// ServerPIDs returns the process IDs of this environment's kube-apiserver and etcd (the scale
// benchmarks read the CPU time each used during a step: proc.ReadStat).
func (e *Env) ServerPIDs() (apiserver, etcd int, err error) {
	if apiserver, _, err = e.apiServerProcess(); err != nil {
		return 0, 0, err
	}
	if etcd, _, err = findProcess("etcd", "--listen-client-urls="+e.EtcdURL); err != nil {
		return 0, 0, err
	}
	return apiserver, etcd, nil
}

// findProcess finds the live process whose executable is named base and one of whose arguments
// is arg, and returns its PID and command line.
func findProcess(base, arg string) (int, []string, error) {
	dirs, err := filepath.Glob("/proc/[0-9]*/cmdline")
	if err != nil {
		return 0, nil, err
	}
	for _, f := range dirs {
		b, err := os.ReadFile(f)
		if err != nil || len(b) == 0 {
			continue
		}
		args := strings.Split(strings.TrimRight(string(b), "\x00"), "\x00")
		if filepath.Base(args[0]) != base {
			continue
		}
		for _, a := range args {
			if a == arg {
				pid, _ := strconv.Atoi(filepath.Base(filepath.Dir(f)))
				if st, err := proc.ReadStat(pid); err == nil && st.State != "Z" {
					return pid, args, nil
				}
			}
		}
	}
	return 0, nil, fmt.Errorf("no %s process with %s", base, arg)
}

// withFlags is the command line args with each of flags ("--name=value") in place of the
// flag of that name, or added.
func withFlags(args, flags []string) []string {
	out := append([]string{}, args...)
	for _, f := range flags {
		name, _, _ := strings.Cut(f, "=")
		i := slices.IndexFunc(out[1:], func(a string) bool { return a == name || strings.HasPrefix(a, name+"=") })
		if i < 0 {
			out = append(out, f)
		} else {
			out[i+1] = f
		}
	}
	return out
}

// waitPortFree waits (at most 10 s) until the address kube-apiserver's args serve on
// (--bind-address, --secure-port) can be listened on again: its threads close the killed
// process's socket after it shows as a zombie, and a start at once fails with "address
// already in use".
func waitPortFree(args []string) error {
	host, port := "", ""
	for _, a := range args {
		if v, ok := strings.CutPrefix(a, "--bind-address="); ok {
			host = v
		}
		if v, ok := strings.CutPrefix(a, "--secure-port="); ok {
			port = v
		}
	}
	if port == "" {
		return nil
	}
	addr := net.JoinHostPort(host, port)
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		l, err := net.Listen("tcp", addr)
		if err == nil {
			return l.Close()
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("kube-apiserver's address %s is still in use 10 s after it was killed: %w", addr, err)
		}
	}
}
