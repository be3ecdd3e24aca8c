package e2e

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/crdver/kubectl-crdver/internal/testenv"
)

// TestRealReleaseFlakyNetwork is issue 25's fault proxy on a real release: cert-manager's
// v1.6.3 → v1.7.3 upgrade on a cluster that went v1.5.5 → v1.6.3 (objects stored at
// versions v1.7.3 removes), run as a user runs it, through a tunnel that drops 2% of the
// connections (some before the request, some in the middle) and resets every open connection
// once a second. Cut off longer than its retries, a run ends with exit 3 saying to run the same
// command again, which is done; the last run ends applied and verified as an uninterrupted run
// does (checkApplied:
// every field and manager kept, etcd at the storage version, storedVersions trimmed, every
// manager able to write).
func TestRealReleaseFlakyNetwork(t *testing.T) {
	var rc releaseCase
	for _, c := range releaseCases {
		if c.name == "cert-manager-1.6-to-1.7" {
			rc = c
		}
	}
	h := newHarness(t, rc.rel)
	h.setUp(rc.via)
	newDir := h.releaseDir(rc.rel.New)
	oldStorage := h.storageVersions()
	h.watchRelease(newDir)
	before := h.snapshot()
	work := t.TempDir()

	proxy, err := testenv.StartProxy(env)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(proxy.Close)
	kc, err := proxy.Kubeconfig(env, work)
	if err != nil {
		t.Fatal(err)
	}
	proxy.DropConnections(0.02)
	stop := proxy.ResetEvery(time.Second)
	step := fmt.Sprintf("kubectl crdver upgrade -f %s --yes --backup %s --kubeconfig %s 2>&1", newDir, filepath.Join(work, "backup.yaml"), kc)
	var r stepResult
	for run := 1; run <= 4; run++ {
		r = h.runStep(work, step)
		t.Logf("run %d → exit %d\n%s", run, r.Code, tail(r.Stdout, 3))
		if r.Code != 3 {
			break
		}
		// Cut off for longer than the retries: exit 3 must say how to go on, and that is
		// running the same command again.
		if last := lastLine(r.Stdout); !strings.Contains(last, "run the same command again") {
			t.Errorf("run %d: exit 3 without saying to run the same command again: %s", run, last)
		}
	}
	resets := stop()
	proxy.DropConnections(0)
	t.Logf("%d resets", resets)
	if resets == 0 {
		t.Fatalf("the tunnel never broke during the runs")
	}
	h.checkApplied("upgrade through the flaky tunnel", r, newDir, before, oldStorage, nil)
}
