package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/crdver/kubectl-crdver/internal/testenv"
	"github.com/crdver/kubectl-crdver/plan"
)

// buildEnv is the environment the test binary started with (before the tests point HOME and
// XDG_CACHE_HOME at temporary folders), so that go build uses the usual module and build caches.
var buildEnv = os.Environ()

var (
	pluginOnce sync.Once
	pluginDir  string
	pluginErr  error
)

// pluginBin builds the plugin's two executables (kubectl-crdver, crdver-engine) once into a temporary folder, so that the printed
// commands run as a user runs them: `kubectl crdver …` through kubectl's plugin lookup on PATH.
func pluginBin(t *testing.T) string {
	t.Helper()
	pluginOnce.Do(func() {
		if pluginDir, pluginErr = os.MkdirTemp("", "crdver-e2e-bin-"); pluginErr != nil {
			return
		}
		_, pluginErr = testenv.BuildPlugin(pluginDir, testenv.BuildOptions{Env: buildEnv})
	})
	if pluginErr != nil {
		t.Fatal(pluginErr)
	}
	return pluginDir
}

// stepResult is one printed runbook command, run as a user runs it.
type stepResult struct {
	Step           string
	Code           int
	Stdout, Stderr string
}

// stepCommand is one printed command as a user runs it: bash in the runbook's working folder,
// kubectl and kubectl-crdver on PATH, KUBECONFIG set, and "y" answered to every question.
func (h *harness) stepCommand(ctx context.Context, workDir, step string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, "bash", "-o", "pipefail", "-c", step)
	cmd.Dir = workDir
	kubectlDir := filepath.Dir(os.Getenv("KUBECTL"))
	if os.Getenv("KUBECTL") == "" {
		kubectlDir = "/usr/bin"
	}
	cmd.Env = append(os.Environ(), "PATH="+pluginBin(h.t)+":"+kubectlDir+":"+os.Getenv("PATH"),
		"HOME="+h.home, "XDG_CACHE_HOME="+filepath.Join(h.home, ".cache"), "KUBECONFIG="+h.env.Kubeconfig)
	cmd.Stdin = strings.NewReader(strings.Repeat("y\n", 16))
	return cmd
}

// runStep runs one printed command with bash in the runbook's working folder, kubectl and
// kubectl-crdver on PATH, KUBECONFIG set, and "y" answered to every question.
func (h *harness) runStep(workDir, step string) stepResult {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(h.ctx, 4*time.Minute)
	defer cancel()
	cmd := h.stepCommand(ctx, workDir, step)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	code := 0
	if err != nil {
		code = -1
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		}
	}
	return stepResult{Step: step, Code: code, Stdout: out.String(), Stderr: errOut.String()}
}

// crdState is what a step may change on a CRD.
type crdState struct {
	Versions       []string // name/served/storage
	StoredVersions []string
	Conversion     string
	// Spec and Meta (labels, annotations) as JSON: the whole CRD a step may write.
	Spec, Meta string
}

func (h *harness) crdStates() map[string]crdState {
	h.t.Helper()
	out := map[string]crdState{}
	for name := range h.crds {
		crd, err := h.ext.ApiextensionsV1().CustomResourceDefinitions().Get(h.ctx, name, metav1.GetOptions{})
		if err != nil {
			out[name] = crdState{Versions: []string{"absent: " + err.Error()}}
			continue
		}
		out[name] = stateOf(crd)
	}
	return out
}

func stateOf(crd *apiextensionsv1.CustomResourceDefinition) crdState {
	s := crdState{StoredVersions: crd.Status.StoredVersions}
	for _, v := range crd.Spec.Versions {
		s.Versions = append(s.Versions, fmt.Sprintf("%s/served=%v/storage=%v", v.Name, v.Served, v.Storage))
	}
	if crd.Spec.Conversion != nil {
		s.Conversion = string(crd.Spec.Conversion.Strategy)
	}
	spec, _ := json.Marshal(crd.Spec)
	meta, _ := json.Marshal(map[string]any{"labels": crd.Labels, "annotations": crd.Annotations})
	s.Spec, s.Meta = string(spec), string(meta)
	return s
}

// wroteNothing compares two moments: the same CRD states, and every object at the same
// resourceVersion. It returns what changed.
func wroteNothing(beforeCRDs, afterCRDs map[string]crdState, before, after snapshot) []string {
	var out []string
	for name, b := range beforeCRDs {
		if a := afterCRDs[name]; !reflect.DeepEqual(a, b) {
			var parts []string
			if !slices.Equal(a.Versions, b.Versions) {
				parts = append(parts, fmt.Sprintf("versions %v → %v", b.Versions, a.Versions))
			}
			if !slices.Equal(a.StoredVersions, b.StoredVersions) {
				parts = append(parts, fmt.Sprintf("storedVersions %v → %v", b.StoredVersions, a.StoredVersions))
			}
			if a.Conversion != b.Conversion {
				parts = append(parts, fmt.Sprintf("conversion %s → %s", b.Conversion, a.Conversion))
			}
			if a.Spec != b.Spec {
				parts = append(parts, "spec")
			}
			if a.Meta != b.Meta {
				parts = append(parts, "labels/annotations")
			}
			out = append(out, fmt.Sprintf("CRD %s changed: %s", name, strings.Join(parts, ", ")))
		}
	}
	for o, b := range before {
		switch a := after[o]; {
		case a == nil:
			out = append(out, fmt.Sprintf("%s is gone", o))
		case a.ResourceVersion != b.ResourceVersion:
			out = append(out, fmt.Sprintf("%s was written (resourceVersion %s → %s)", o, b.ResourceVersion, a.ResourceVersion))
		case a.Stored != b.Stored:
			out = append(out, fmt.Sprintf("%s changed in etcd", o))
		}
	}
	return out
}

// readNow reads an object's data after a step: at the old storage version when it is still
// served, else at the live storage version.
func dataAfter(s *objectSnap, oldStorage, liveStorage string) (map[string]any, string) {
	if d, ok := s.Data[oldStorage]; ok {
		return d, oldStorage
	}
	return s.Data[liveStorage], liveStorage
}

// releaseInvariants checks, against the snapshot taken before the runbook, the properties the
// issue asks of every moment of an upgrade: no field held at the old storage version is gone
// (unless allowLoss) and every manager's entries survive. It returns one line per violation.
func (h *harness) releaseInvariants(initial, now snapshot, oldStorage map[string]string, allowLoss bool) []string {
	var out []string
	for o, b := range initial {
		a := now[o]
		if a == nil {
			out = append(out, fmt.Sprintf("%s: gone", o))
			continue
		}
		old := oldStorage[o.CRD]
		live := storageVersion(h.liveCRD(o.CRD))
		after, at := dataAfter(a, old, live)
		if after == nil {
			out = append(out, fmt.Sprintf("%s: unreadable at %s: %v", o, at, a.ReadErrors))
			continue
		}
		if lost := lostFields(b.Data[old], after, "metadata.labels", "status"); len(lost) > 0 && !allowLoss {
			out = append(out, fmt.Sprintf("%s: fields held at %s before are gone or changed (read at %s): %v", o, old, at, lost))
		}
		if lost := lostManagers(b.Managers, a.Managers); len(lost) > 0 {
			out = append(out, fmt.Sprintf("%s: managedFields entries lost: %v", o, lost))
		}
	}
	return out
}

// releaseApplied checks that every CRD of the new release is live with the release's
// versions (name, served, storage).
func (h *harness) releaseApplied(newDir string) []string {
	var out []string
	files, _ := filepath.Glob(filepath.Join(newDir, "*.yaml"))
	for _, f := range files {
		want := testenv.ReadCRDs(h.t, f)[0]
		live, err := h.ext.ApiextensionsV1().CustomResourceDefinitions().Get(h.ctx, want.Name, metav1.GetOptions{})
		if err != nil {
			out = append(out, fmt.Sprintf("%s: %v", want.Name, err))
			continue
		}
		if w, l := stateOf(want).Versions, stateOf(live).Versions; !slices.Equal(w, l) {
			out = append(out, fmt.Sprintf("%s: live versions %v, the release has %v", want.Name, l, w))
		}
	}
	return out
}

// printedStep is one thing the runbook asks for: a command to run, or (Manual) something for
// a person, with Action and Why saying what.
type printedStep struct {
	Command       string
	Manual        bool
	Action, Why   string
	CRDs, Objects []string
}

// runbookSteps flattens the release runbook of plan -o json (Report.Runbook) into commands in
// order; a step without commands (or Manual) is one for a person.
func runbookSteps(rep *plan.Report) (steps []printedStep) {
	for _, st := range rep.Runbook {
		if st.Manual || len(st.Commands) == 0 {
			steps = append(steps, printedStep{Manual: true, Action: st.Action, Why: st.Why, CRDs: st.CRDs, Objects: st.Objects})
			continue
		}
		for _, c := range st.Commands {
			steps = append(steps, printedStep{Command: c, Action: st.Action, Why: st.Why, CRDs: st.CRDs})
		}
	}
	return steps
}

// testRunbook is step (3) of TestReleaseMatrix: it follows the runbook plan prints for the
// release, step by step, as a user at a terminal does (bash, kubectl and the kubectl-crdver
// binary on PATH, "y" to every question), and checks after every step: no field held at the
// old storage version is gone (unless the step says --allow-data-loss), every manager's
// entries survive, a step that fails wrote nothing. Steps for a person that name objects are
// done by the release's scripted fixes; a step that asks to move data or accept its loss is
// taken as consent (the commands that drop it must still say --allow-data-loss). The runbook
// must run to its end, its verify step passing: the whole release applied, every manager
// able to write every object, plan of the same release not breaking. It returns the harness
// (what the test fixed or deleted).
func testRunbook(t *testing.T, rc releaseCase) *harness {
	knownGap(t, rc, "runbook", "(3)")
	h := newHarnessOn(t, rc.rel, rc.server(t))
	h.setUp(rc.via)
	oldStorage := h.storageVersions()
	initial := h.snapshot()
	newDir := h.releaseDir(rc.rel.New)
	r := h.crdver("plan", "-f", newDir, "-o", "json")
	if r.code != 0 && r.code != 1 {
		t.Fatalf("plan: exit %d\n%s", r.code, r.stderr)
	}
	var rep plan.Report
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Fatalf("plan -o json: %v\n%s", err, r.stdout)
	}
	steps := runbookSteps(&rep)
	if len(steps) == 0 {
		t.Fatalf("plan -o json has no release runbook (runbook is empty):\n%s", r.stdout)
	}
	if human := h.crdver("plan", "-f", newDir); true {
		t.Logf("plan -f NEW/ (exit %d):\n%s", human.code, tail(human.stdout, 60))
	}
	// The new release's CRDs are watched too (a CRD the release adds appears).
	files, _ := filepath.Glob(filepath.Join(newDir, "*.yaml"))
	for _, f := range files {
		h.crds[crdName(t, f)] = true
	}
	work := t.TempDir()
	prevCRDs, prev := h.crdStates(), initial
	stopped := ""
	for i, ps := range steps {
		step := ps.Command
		if ps.Manual {
			if ps.Action == plan.ActionChangeWriters {
				// The GitOps manifests are the test's: from here on they are applied at a served
				// version (ssaByEveryManager), which is what the step asks of the user.
				t.Logf("step %d (for a person, done by the test): %s", i+1, ps.Why)
				continue
			}
			if ps.Action == plan.ActionConvertObjects {
				// The user accepts the loss the step lists (the backup keeps it); a later command
				// that drops the fields must say --allow-data-loss (the invariants below).
				t.Logf("step %d (for a person: loss accepted by the test): %s %v", i+1, ps.Why, ps.Objects)
				continue
			}
			if h.runbookFixes(&rep, ps) {
				t.Logf("step %d (for a person, done by the test's scripted fixes): %s", i+1, ps.Why)
				// The user's edits are the new baseline of "nothing lost".
				initial = h.snapshot()
				prevCRDs, prev = h.crdStates(), initial
				continue
			}
			stopped = fmt.Sprintf("step %d is for a person (%s %v): %s %s", i+1, ps.Action, ps.CRDs, ps.Why, step)
			break
		}
		res := h.runStep(work, step)
		nowCRDs, now := h.crdStates(), h.snapshot()
		t.Logf("step %d: %s → exit %d\n%s%s", i+1, step, res.Code, tail(res.Stdout, 12), tail(res.Stderr, 12))
		allowLoss := strings.Contains(step, "--allow-data-loss")
		for _, v := range h.releaseInvariants(initial, now, oldStorage, allowLoss) {
			t.Errorf("after step %d (%s): %s", i+1, step, v)
		}
		if res.Code != 0 {
			// A step that fails must have written nothing (kubectl crdver refuses before
			// writing; the one apply of the release comes after every CRD is ready).
			for _, w := range wroteNothing(prevCRDs, nowCRDs, prev, now) {
				t.Errorf("step %d (%s) failed (exit %d) after writing: %s", i+1, step, res.Code, w)
			}
			stopped = fmt.Sprintf("step %d failed (exit %d): %s", i+1, res.Code, step)
			break
		}
		prevCRDs, prev = nowCRDs, now
		if allowLoss {
			// The loss the step consented to (listed by the runbook's convert step, kept by
			// its backup) is the new baseline: no later step may lose anything more.
			initial = now
		}
	}
	if stopped != "" {
		t.Errorf("(3) the release runbook did not end with its verify step passing: %s", stopped)
		return h
	}
	if last := steps[len(steps)-1]; last.Action != plan.ActionVerify {
		t.Errorf("(3) the runbook's last step is %s, not verify", last.Action)
	}
	for _, v := range h.releaseApplied(newDir) {
		t.Errorf("the runbook ran to its end but the release is not applied: %s", v)
	}
	for _, f := range h.ssaByEveryManager(nil) {
		t.Errorf("after the runbook: %s", f)
	}
	after := h.crdver("plan", "-f", newDir)
	if after.code != 0 {
		t.Errorf("plan of the same release after the runbook: exit %d\n%s%s", after.code, after.stdout, after.stderr)
	}
	return h
}

// tail is the last n lines of s.
func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = append([]string{"…"}, lines[len(lines)-n:]...)
	}
	if len(lines) == 1 && lines[0] == "" {
		return ""
	}
	return strings.Join(lines, "\n") + "\n"
}
