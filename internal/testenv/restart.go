package testenv

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
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
	pid, args, err := e.apiServerProcess()
	if err != nil {
		return err
	}
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
	cmd := exec.Command(args[0], args[1:]...)
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting kube-apiserver again: %w", err)
	}
	e.restarted = append(e.restarted, cmd)
	kc, err := kubernetes.NewForConfig(e.Config)
	if err != nil {
		return err
	}
	for deadline := time.Now().Add(2 * time.Minute); ; {
		if _, err := kc.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx); err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("kube-apiserver not ready 2 minutes after its restart")
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
