package upgrade

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/crdver/kubectl-crdver/outcome"
	"github.com/crdver/kubectl-crdver/plan"
)

// TestDecide: how a run ends, by the decision table (pure logic; the runs themselves are
// tested on the real API server in plugin/recreate_test.go and plugin/upgrade_test.go).
func TestDecide(t *testing.T) {
	invalid := []ObjectFinding{{CRD: "sources.example.com", Namespace: "default", Name: "bad", Errors: []string{"spec.url: Required value"}}}
	applied := []StepResult{{RunbookStep: plan.RunbookStep{Action: plan.ActionApply}, State: StateDone}, {RunbookStep: plan.RunbookStep{Action: plan.ActionVerify}, State: StateDone}}
	notApplied := []StepResult{{RunbookStep: plan.RunbookStep{Action: plan.ActionApply}, State: StateSkipped, Detail: "not asked"}}
	refused := fmt.Errorf("%w: 1 object would lose fields; nothing was written", ErrRefused)
	for _, c := range []struct {
		name     string
		rep      Report
		err      error
		o        Options
		result   string
		code     int
		refusals []plan.Kind
		message  string
	}{
		{name: "complete", rep: Report{Steps: applied, Verify: &Verify{}}, result: ResultComplete, code: 0, message: "Upgrade complete"},
		{name: "applied, objects left", rep: Report{Steps: applied, Preflight: Preflight{InvalidOnRecreate: invalid}, Verify: &Verify{InvalidOnRecreate: invalid}},
			o: Options{ApplyFile: "rel/"}, result: ResultAppliedRemaining, code: 1, message: "the release is applied and verified; left for you: 1 object invalid on re-create (sources.example.com default/bad)"},
		{name: "fixed during the run", rep: Report{Steps: applied, Preflight: Preflight{InvalidOnRecreate: invalid}, Verify: &Verify{}}, result: ResultComplete, code: 0},
		{name: "not complete after the apply", rep: Report{Steps: applied, Verify: &Verify{}, Problems: []string{"x: storedVersions not trimmed"}},
			result: ResultNotComplete, code: 1, message: "the upgrade is not complete (the release is applied but not verified): x"},
		{name: "refused for data loss", rep: Report{Preflight: Preflight{DataLoss: invalid, Refused: true}}, err: refused,
			result: ResultRefused, code: 1, refusals: []plan.Kind{plan.KindDataLoss}},
		{name: "refused, nothing an option changes", rep: Report{Preflight: Preflight{Refused: true}}, err: refused, result: ResultRefused, code: 1},
		{name: "dry run, objects left", rep: Report{Preflight: Preflight{InvalidOnRecreate: invalid}}, o: Options{DryRun: true},
			result: ResultDryRun, code: 1, message: "the upgrade would apply the release and leave 1 object invalid on re-create"},
		{name: "dry run", o: Options{DryRun: true}, result: ResultDryRun, code: 0},
		{name: "dry run, refused for data loss", rep: Report{Preflight: Preflight{DataLoss: invalid, Refused: true, Reason: "1 object would lose fields"}}, o: Options{DryRun: true},
			result: ResultDryRun, code: 1, refusals: []plan.Kind{plan.KindDataLoss}, message: "the upgrade would be refused"},
		{name: "dry run, data loss accepted", rep: Report{Preflight: Preflight{DataLoss: invalid}}, o: Options{DryRun: true, AllowDataLoss: true},
			result: ResultDryRun, code: 0},
		// The release's conversion cannot convert: a finding, exit 1 with --yes and --dry-run.
		{name: "refused, the webhook not running", rep: Report{Preflight: Preflight{Conversion: []ConversionRefusal{{CRD: "crontabs.example.com"}}, Refused: true}}, err: refused,
			result: ResultRefused, code: 1, refusals: []plan.Kind{plan.KindConversionWebhook}},
		{name: "dry run, the webhook not running", rep: Report{Preflight: Preflight{Conversion: []ConversionRefusal{{CRD: "crontabs.example.com"}}, Refused: true, Reason: "deploy it"}}, o: Options{DryRun: true},
			result: ResultDryRun, code: 1, refusals: []plan.Kind{plan.KindConversionWebhook}, message: "the upgrade would be refused: deploy it"},
		// A preflight that could not complete: exit 3 with --yes and --dry-run alike.
		{name: "preflight incomplete", rep: Report{Preflight: Preflight{Refused: true, Incomplete: true}}, err: refused, result: ResultRefused, code: 3},
		{name: "dry run, preflight incomplete", rep: Report{Preflight: Preflight{Refused: true, Incomplete: true, Reason: "listing failed"}}, o: Options{DryRun: true},
			result: ResultDryRun, code: 3, message: "could not complete its preflight: listing failed"},
		// Versions stored but not served, not read by a dry run: what their objects lose is
		// unknown, a finding (exit 1), not a preflight that could not complete.
		{name: "dry run, versions not read", rep: Report{Preflight: Preflight{Refused: true, Unread: []string{"things.example.com v1alpha1"}, Reason: "objects may be stored at versions the live CRDs do not serve"}}, o: Options{DryRun: true},
			result: ResultDryRun, code: 1, message: "the preflight is not complete: objects may be stored at versions the live CRDs do not serve (--dry-run: nothing was written); run the upgrade without --dry-run"},
		{name: "the apply left to Helm", rep: Report{Steps: []StepResult{{RunbookStep: plan.RunbookStep{Action: plan.ActionToolApply, Why: `let Helm (release "eso" in namespace "x", annotations …) apply the new CRDs`}, State: StateManual, Detail: `let Helm (release "eso" in namespace "x", annotations …) apply the new CRDs`}}},
			result: ResultNotApplied, code: 1, message: `the storage steps are done; the release was not applied by this command: let Helm (release "eso"`},
		{name: "not asked to apply", rep: Report{Steps: notApplied}, o: Options{NoApply: true}, result: ResultNotApplied, code: 0},
		{name: "no apply, objects left", rep: Report{Steps: notApplied, Preflight: Preflight{InvalidOnRecreate: invalid}}, o: Options{NoApply: true},
			result: ResultNotApplied, code: 1, message: "the release was not applied by this command: not asked; left for you"},
		{name: "interrupted", err: fmt.Errorf("%w: before step 2", ErrInterrupted), result: ResultStopped, code: 3},
		{name: "not confirmed", err: ErrNotConfirmed, result: ResultStopped, code: 3},
		{name: "cluster", err: errors.New("connection refused"), result: ResultStopped, code: 3},
	} {
		t.Run(c.name, func(t *testing.T) {
			out := decide(&c.rep, c.err, c.o)
			if out.Result != c.result || out.ExitCode != c.code || !slices.Equal(out.Refusals, c.refusals) || !strings.Contains(out.Message, c.message) {
				t.Errorf("outcome %+v, want result %s exit %d refusals %v message containing %q", out, c.result, c.code, c.refusals, c.message)
			}
			if (out.Result == ResultAppliedRemaining) != (out.Applied && out.Verified && len(out.Remaining) > 0) {
				t.Errorf("applied %v verified %v remaining %q for %s", out.Applied, out.Verified, out.Remaining, out.Result)
			}
		})
	}
}

// TestKindsOf: the kinds of one CRD's findings, the CRD named by the finding (or by an unknown
// answer's "CRD: why"), in the decision table's order.
func TestKindsOf(t *testing.T) {
	pf := Preflight{
		DataLoss:          []ObjectFinding{{CRD: "a.example.com", Name: "x"}},
		Rejected:          []ObjectFinding{{CRD: "b.example.com", Name: "y"}},
		InvalidOnRecreate: []ObjectFinding{{CRD: "a.example.com", Name: "z"}},
		Unknown:           []string{"b.example.com: the webhook did not answer"},
		BlockedCRDs:       []string{"c.example.com"},
	}
	for crd, want := range map[string][]plan.Kind{
		"a.example.com": {plan.KindDataLoss, plan.KindInvalidOnRecreate},
		"b.example.com": {plan.KindRejectedWrite, plan.KindUnknown},
		"c.example.com": {plan.KindApplyRejected},
		"d.example.com": nil,
	} {
		got := pf.KindsOf(crd)
		slices.SortFunc(got, func(a, b plan.Kind) int { return strings.Compare(string(a), string(b)) })
		slices.SortFunc(want, func(a, b plan.Kind) int { return strings.Compare(string(a), string(b)) })
		if !slices.Equal(got, want) {
			t.Errorf("KindsOf(%s) = %v, want %v", crd, got, want)
		}
	}
	if got := len(pf.Kinds()); got != 5 {
		t.Errorf("Kinds() has %d kinds, want the 5 of every CRD: %v", got, pf.Kinds())
	}
}

// TestOutcomeJSON: the outcome's JSON is the documented shape (docs/decision-table.md:
// outcome.result … outcome.message), the embedded outcome.Outcome's fields at its level.
func TestOutcomeJSON(t *testing.T) {
	out := decide(&Report{Preflight: Preflight{DataLoss: []ObjectFinding{{CRD: "a.example.com", Name: "x"}}, Refused: true}}, fmt.Errorf("%w: x would lose fields", ErrRefused), Options{})
	b, err := json.Marshal(out)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"result":"refused","applied":false,"verified":false,"refusals":["data-loss"],"remaining":[],"exitCode":1,"message":"refused: x would lose fields"}`
	if string(b) != want {
		t.Errorf("outcome JSON\n%s\nwant\n%s", b, want)
	}
}

// TestPathOutcome: how a path ends (pathRun.ended, pure logic): the outcome of the step whose
// error stopped it, could not complete for an error no step judged, and findings when it stopped
// at a hop whose release it did not apply (the apply is left to the user), except on a dry run.
func TestPathOutcome(t *testing.T) {
	notApplied := Outcome{Result: ResultNotApplied, Outcome: outcome.Outcome{Message: "the release was not applied by this command: not asked", Remaining: []string{"one object"}}}
	refused := Outcome{Result: ResultRefused, Outcome: outcome.New(outcome.Findings, "refused")}
	complete := Outcome{Result: ResultComplete, Applied: true, Outcome: outcome.New(outcome.OK, "Upgrade complete")}
	for _, c := range []struct {
		name   string
		last   Outcome
		err    error
		judged bool
		dryRun bool
		result string
		code   int
		line   string
	}{
		{name: "complete", last: complete, result: ResultComplete, code: 0, line: "Upgrade complete"},
		{name: "a hop not applied", last: notApplied, result: ResultNotApplied, code: 1, line: "the path stopped at a hop whose release this command did not apply: the release was not applied by this command: not asked; run the same command again"},
		{name: "dry run", last: Outcome{Result: ResultDryRun}, dryRun: true, result: ResultDryRun, code: 0},
		{name: "judged", last: refused, err: ErrRefused, judged: true, result: ResultRefused, code: 1, line: "refused"},
		{name: "not judged, after an applied hop", last: complete, err: errors.New("saving the path's checkpoint: disk full"), result: ResultStopped, code: 3, line: "saving the path's checkpoint: disk full"},
	} {
		p := &pathRun{o: PathOptions{Options: Options{DryRun: c.dryRun}}, out: &PathReport{Outcome: c.last}, judged: c.judged}
		p.ended(c.err)
		got := p.out.Outcome
		if got.Result != c.result || got.ExitCode != c.code || !strings.HasPrefix(got.Message, c.line) {
			t.Errorf("%s: %s, exit %d, %q; want %s, exit %d, %q…", c.name, got.Result, got.ExitCode, got.Message, c.result, c.code, c.line)
		}
		if c.name == "a hop not applied" && !slices.Equal(got.Remaining, c.last.Remaining) {
			t.Errorf("%s: remaining %v, want the hop's %v", c.name, got.Remaining, c.last.Remaining)
		}
	}
}

// TestPlanOwnershipLossJoinsTheDryRun: plan's prediction of the managers a rewrite drops is a
// preflight finding of its own (it stands in where the deeper check cannot send the dry run,
// under the intermediate CRD), and the dry run's answer for the same object joins its row
// instead of counting the object twice; the run is then refused for ownership-loss.
func TestPlanOwnershipLossJoinsTheDryRun(t *testing.T) {
	it := &plan.Item{CRD: "gadgets.example.com"}
	it.Objects.Findings = []plan.Finding{
		{Namespace: "default", Name: "a", Kinds: []plan.Kind{plan.KindOwnershipLoss},
			ManagersLost: &plan.ManagersLost{Lost: []string{"kubectl (Apply at example.com/v1beta1)"}, Reset: true}},
		{Namespace: "default", Name: "b", Kinds: []plan.Kind{plan.KindOwnershipLoss},
			ManagersLost: &plan.ManagersLost{Unknown: "the conversion webhook's answer is needed"}},
	}
	var pf Preflight
	planFindings(it, nil, &pf)
	if len(pf.OwnershipLoss) != 1 || pf.OwnershipLoss[0].Name != "a" {
		t.Fatalf("plan's prediction gave %+v, want object default/a alone (b's answer is unknown)", pf.OwnershipLoss)
	}
	r := &runner{}
	r.addFindings(&pf, []ObjectFinding{{CRD: it.CRD, Namespace: "default", Name: "a",
		Managers: []string{"kubectl (Apply at example.com/v1beta1)", "ctl (Update at example.com/v1beta1)"}}})
	if len(pf.OwnershipLoss) != 1 {
		t.Fatalf("the dry run's answer for default/a made %d rows, want 1: %+v", len(pf.OwnershipLoss), pf.OwnershipLoss)
	}
	if got := pf.OwnershipLoss[0].Managers; !slices.Equal(got, []string{"kubectl (Apply at example.com/v1beta1)", "ctl (Update at example.com/v1beta1)"}) {
		t.Errorf("managers of default/a = %q, want plan's and the dry run's, each once", got)
	}
	if n := pf.Count(plan.KindOwnershipLoss); n != 1 {
		t.Errorf("Count(ownership-loss) = %d, want 1", n)
	}
}
