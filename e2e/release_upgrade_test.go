package e2e

import (
	"testing"
)

// TestReleaseUpgrade runs `kubectl crdver upgrade -f NEW/ --yes` (the built binary through
// kubectl's plugin lookup, as a user runs it) on every release and checks what issue 15 asks:
// where objects would lose fields it refuses before writing anything; elsewhere it completes,
// the whole release is applied, no field held at the old storage version is gone, every
// manager's entries survive, every manager can write every object afterwards, and plan of
// the same release afterwards is not breaking.
func TestReleaseUpgrade(t *testing.T) {
	for _, rc := range releaseCases {
		t.Run(rc.name, func(t *testing.T) { testUpgrade(t, rc) })
	}
}

func testUpgrade(t *testing.T, rc releaseCase) {
	h := newHarness(t, rc.rel)
	h.setUp(rc.via)
	oldStorage := h.storageVersions()
	initial, initialCRDs := h.snapshot(), h.crdStates()
	newDir := h.releaseDir(rc.rel.New)
	step := "kubectl crdver upgrade -f " + newDir + " --yes"
	res := h.runStep(t.TempDir(), step)
	t.Logf("%s → exit %d\n%s%s", step, res.Code, tail(res.Stdout, 40), tail(res.Stderr, 20))
	now, nowCRDs := h.snapshot(), h.crdStates()
	for _, v := range h.releaseInvariants(initial, now, oldStorage, false) {
		t.Errorf("after upgrade: %s", v)
	}
	if rc.losesData {
		if res.Code == 0 {
			t.Errorf("upgrade exit 0 although objects lose fields at the new storage version")
		}
		for _, w := range wroteNothing(initialCRDs, nowCRDs, initial, now) {
			t.Errorf("upgrade refused (exit %d) after writing: %s", res.Code, w)
		}
		return
	}
	if res.Code != 0 {
		t.Fatalf("upgrade: exit %d", res.Code)
	}
	for _, v := range h.releaseApplied(newDir) {
		t.Errorf("after upgrade the release is not applied: %s", v)
	}
	for _, f := range h.ssaByEveryManager(nil) {
		t.Errorf("after upgrade: %s", f)
	}
	if after := h.crdver("plan", "-f", newDir); after.code != 0 {
		t.Errorf("plan of the same release after upgrade: exit %d\n%s%s", after.code, after.stdout, after.stderr)
	}
}
