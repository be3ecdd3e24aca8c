package e2e

import (
	"bufio"
	"context"
	"fmt"
	"hash/fnv"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// The crash matrix of issue 25 on the real releases: TestReleaseMatrix's upgrade runs (the
// one that applies the release, and the refused one before it) go through crashChain, which
// kills the command with SIGKILL — as a laptop dying does, no signal handler runs — and runs
// the very same command again, until one run ends by itself. For each kind of step the
// upgrade takes (backup, intermediate-crds, migrate, retire, apply, …), the first time a step
// of that kind ends in the chain:
//
//   - one run is killed as the step ends (the `step N/M KIND: done` line);
//   - then randomKills runs are killed at a random moment: after a random one of the progress
//     notes the run prints (`upgrade: …`, between its writes), a random delay of up to 300 ms
//     later (or as a step of a kind not yet killed at ends, when that comes first).
//
// A later step of a kind already killed at (the retire of the next CRD) runs through: it
// resumes and checkpoints as the first did, and killing it again would only repeat that (a
// release with 8 retires took 2 kills per step, 233 s; e2e/survive kills our own release at
// every point).
//
// After every kill the cluster is checked against the objects before the run: no field lost
// but the consented ones, every manager kept, every object readable, and
// status.storedVersions naming every version an object is still encoded at in etcd. The run
// that ends is then checked by TestReleaseMatrix as an uninterrupted one is (applied and
// verified, storedVersions trimmed, every manager can write, the way back and the restore from
// the backup — which proves the backup kept every consented field).
//
// CRDVER_CRASH_SEED fixes the random moments (the seed is logged); CRDVER_CRASH_RANDOM sets
// how many random moments per kind of step (default 1; 0 kills at step ends only).

// stepDone is the progress line that ends a step of upgrade that did its work in this run
// (not one found already done, skipped or left for a person). A resumed run plans again and
// numbers its steps afresh, so the first such line of each run is the next step's end. The
// verify step writes nothing, and a finished upgrade run again verifies again: it is no kill
// point.
var stepDone = regexp.MustCompile(`upgrade: step (\d+)/\d+ (\S+): done$`)

// randomKills is the number of runs killed at a random moment inside each step.
func randomKills() int {
	if s := os.Getenv("CRDVER_CRASH_RANDOM"); s != "" {
		if n, err := strconv.Atoi(s); err == nil && n >= 0 {
			return n
		}
	}
	return 1
}

// crashSeed is the seed of the random moments of one release's chain: CRDVER_CRASH_SEED, or
// one drawn from the clock (logged, so a failure can be run again with it).
func crashSeed(name string) uint64 {
	if s := os.Getenv("CRDVER_CRASH_SEED"); s != "" {
		if n, err := strconv.ParseUint(s, 10, 64); err == nil {
			h := fnv.New64a()
			h.Write([]byte(name))
			return n ^ h.Sum64()
		}
	}
	return uint64(time.Now().UnixNano())
}

// killRule decides, for each line the command prints, whether to kill it now (0) or after
// a delay (> 0); a negative answer lets it run on.
type killRule func(line string) time.Duration

// runStepKilled runs one command as runStep does, in its own process group, and kills the
// whole group with SIGKILL when the rule says so. It reports whether the run was killed.
func (h *harness) runStepKilled(workDir, step string, rule killRule) (stepResult, bool) {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(h.ctx, 4*time.Minute)
	defer cancel()
	cmd := h.stepCommand(ctx, workDir, step)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	pr, pw := io.Pipe()
	cmd.Stdout, cmd.Stderr = pw, pw
	if err := cmd.Start(); err != nil {
		h.t.Fatal(err)
	}
	var (
		mu     sync.Mutex
		killed bool
		out    strings.Builder
	)
	kill := func() {
		mu.Lock()
		defer mu.Unlock()
		if !killed {
			killed = true
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		}
	}
	read := make(chan struct{})
	go func() {
		defer close(read)
		sc := bufio.NewScanner(pr)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			mu.Lock()
			out.WriteString(line + "\n")
			mu.Unlock()
			switch d := rule(line); {
			case d == 0:
				kill()
			case d > 0:
				time.AfterFunc(d, kill)
			}
		}
		_, _ = io.Copy(io.Discard, pr)
	}()
	err := cmd.Wait()
	pw.Close()
	<-read
	code := 0
	if err != nil {
		code = -1
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		}
	}
	mu.Lock()
	defer mu.Unlock()
	return stepResult{Step: step, Code: code, Stdout: out.String()}, killed
}

// crashChain runs step (an upgrade command) killed as each kind of step first ends and at
// random moments after, as the file's comment says, checking the cluster after every kill; it
// returns the run that ended by itself.
func (h *harness) crashChain(label, workDir, step string, before snapshot, oldStorage map[string]string, consented map[*tracked][]string) stepResult {
	t := h.t
	t.Helper()
	seed := crashSeed(h.rel.Project + label)
	rng := rand.New(rand.NewPCG(seed, seed>>1))
	t.Logf("%s: crash chain, seed %d (CRDVER_CRASH_SEED), %d random moments per kind of step", label, seed, randomKills())
	killedAt := map[string]bool{} // the kinds of step a run was killed at the end of
	randomLeft := 0               // random runs still owed to the kind last killed at
	for run := 1; run <= 80; run++ {
		random := randomLeft > 0
		boundary := ""
		rule := func(line string) time.Duration {
			if m := stepDone.FindStringSubmatch(line); m != nil && m[2] != "verify" && !killedAt[m[2]] {
				if boundary == "" {
					boundary = m[1] + " (" + m[2] + ")"
					killedAt[m[2]] = true
				}
				return 0
			}
			if random && strings.HasPrefix(line, "upgrade: ") && rng.IntN(2) == 0 {
				return time.Duration(rng.IntN(300)+1) * time.Millisecond
			}
			return -1
		}
		began := time.Now()
		res, killed := h.runStepKilled(workDir, step, rule)
		took := time.Since(began).Round(10 * time.Millisecond)
		if !killed {
			t.Logf("%s: run %d ended by itself (exit %d, %s) after %d kills", label, run, res.Code, took, run-1)
			return res
		}
		if random {
			randomLeft--
		}
		if boundary != "" {
			randomLeft = randomKills()
		}
		where := "at a random moment"
		switch {
		case boundary != "" && !random:
			where = "as step " + boundary + " ended"
		case boundary != "":
			where = "as step " + boundary + " ended, before the random moment"
		}
		t.Logf("%s: run %d killed %s (after %s); last lines:\n%s", label, run, where, took, tail(res.Stdout, 3))
		for _, v := range h.crashInvariants(before, oldStorage, consented) {
			t.Errorf("%s: after run %d was killed %s: %s", label, run, where, v)
		}
	}
	t.Fatalf("%s: 80 runs killed and none ended", label)
	return stepResult{}
}

// crashInvariants is what must hold at every moment of an upgrade, killed or not: every
// object readable, no field lost but the consented ones, every manager kept, and every
// version an object is encoded at in etcd still in status.storedVersions (else a later trim
// or removal makes it unreadable).
func (h *harness) crashInvariants(before snapshot, oldStorage map[string]string, consented map[*tracked][]string) []string {
	var out []string
	now := h.snapshot()
	for o, b := range before {
		a := now[o]
		if a == nil {
			out = append(out, fmt.Sprintf("%s: gone", o))
			continue
		}
		crd := h.liveCRD(o.CRD)
		if v := strings.TrimPrefix(a.StoredAPIVersion, o.Group+"/"); !slices.Contains(crd.Status.StoredVersions, v) {
			out = append(out, fmt.Sprintf("%s: encoded at %s in etcd, which %s's status.storedVersions %v no longer names", o, v, o.CRD, crd.Status.StoredVersions))
		}
		old := oldStorage[o.CRD]
		data, at := dataAfter(a, old, storageVersion(crd))
		if data == nil {
			out = append(out, fmt.Sprintf("%s: unreadable at %s: %v", o, at, a.ReadErrors))
			continue
		}
		if lost := lostFields(b.Data[old], data, consented[o]...); len(lost) > 0 {
			out = append(out, fmt.Sprintf("%s: fields held at %s before are gone or changed (read at %s), outside the consented losses %v: %v", o, old, at, consented[o], lost))
		}
		if lost := lostManagers(b.Managers, a.Managers); len(lost) > 0 {
			out = append(out, fmt.Sprintf("%s: managedFields entries lost: %v", o, lost))
		}
	}
	return out
}
