package testenv

import (
	"bytes"
	"fmt"
	"os/exec"
	"path/filepath"
	"sync"
	"time"
)

// ControllerManager is a kube-controller-manager process started against the environment.
type ControllerManager struct {
	cmd  *exec.Cmd
	mu   sync.Mutex
	logs bytes.Buffer
	done chan struct{}
}

// StartControllerManager starts kube-controller-manager (from e.Assets, built with
// ExtraBinaries: []string{"kube-controller-manager"}) with the admin kubeconfig, no leader
// election and no serving port, plus args (e.g. "--controllers=…", "--feature-gates=…").
func (e *Env) StartControllerManager(args ...string) (*ControllerManager, error) {
	bin := filepath.Join(e.Assets, "kube-controller-manager")
	all := append([]string{
		"--kubeconfig=" + e.Kubeconfig,
		"--leader-elect=false",
		"--secure-port=0",
	}, args...)
	cm := &ControllerManager{done: make(chan struct{})}
	cm.cmd = exec.Command(bin, all...)
	w := &lockedWriter{mu: &cm.mu, buf: &cm.logs}
	cm.cmd.Stdout, cm.cmd.Stderr = w, w
	if err := cm.cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s: %w", bin, err)
	}
	go func() { _ = cm.cmd.Wait(); close(cm.done) }()
	return cm, nil
}

// Logs returns what the process printed so far (for failing tests).
func (cm *ControllerManager) Logs() string {
	cm.mu.Lock()
	defer cm.mu.Unlock()
	return cm.logs.String()
}

// Stop stops the process (SIGTERM, then SIGKILL after 10 s).
func (cm *ControllerManager) Stop() {
	if cm == nil || cm.cmd.Process == nil {
		return
	}
	_ = cm.cmd.Process.Signal(termSignal)
	select {
	case <-cm.done:
	case <-time.After(10 * time.Second):
		_ = cm.cmd.Process.Kill()
		<-cm.done
	}
}

type lockedWriter struct {
	mu  *sync.Mutex
	buf *bytes.Buffer
}

func (w *lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.Write(p)
}

// StartStorageVersionMigrator starts kube-controller-manager with only what the
// storagemigration.k8s.io controller needs: its feature gate, and the storage-version-migrator
// and garbage-collector controllers, plus args (e.g. "--v=4").
func (e *Env) StartStorageVersionMigrator(args ...string) (*ControllerManager, error) {
	return e.StartControllerManager(append([]string{
		"--feature-gates=StorageVersionMigrator=true",
		"--controllers=storage-version-migrator-controller,garbage-collector-controller",
	}, args...)...)
}
