package plan

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/crdver/kubectl-crdver/preflight"
)

// TestDecisionTableDocumented: docs/decision-table.md has one row per kind of the code's table,
// with the same verdict, exit statuses and runbook actions.
func TestDecisionTableDocumented(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "docs", "decision-table.md"))
	if err != nil {
		t.Fatal(err)
	}
	rows := map[string][]string{}
	for _, l := range strings.Split(string(b), "\n") {
		if !strings.HasPrefix(l, "| `") {
			continue
		}
		var cells []string
		for _, c := range strings.Split(strings.Trim(l, "|"), "|") {
			cells = append(cells, strings.TrimSpace(c))
		}
		if len(cells) == 6 {
			rows[strings.Trim(cells[0], "`")] = cells
		}
	}
	first := func(s string) string { return strings.Trim(strings.Fields(strings.TrimRight(s, ";"))[0], "`;") }
	for _, d := range Decisions() {
		row, ok := rows[string(d.Kind)]
		if !ok {
			t.Errorf("%s: no row in docs/decision-table.md", d.Kind)
			continue
		}
		if got := strings.Trim(row[1], "`"); got != d.Verdict {
			t.Errorf("%s: documented verdict %q, code %q", d.Kind, got, d.Verdict)
		}
		if got := first(row[2]); got != string(rune('0'+d.PlanExit)) {
			t.Errorf("%s: documented plan exit %q, code %d", d.Kind, got, d.PlanExit)
		}
		for _, a := range d.Runbook {
			if !strings.Contains(row[3], "`"+a+"`") {
				t.Errorf("%s: runbook action %s not documented (%q)", d.Kind, a, row[3])
			}
		}
		if got := first(row[5]); got != string(rune('0'+d.UpgradeExit)) {
			t.Errorf("%s: documented upgrade exit %q, code %d", d.Kind, got, d.UpgradeExit)
		}
		if d.Consent != "" && !strings.Contains(row[3], "--"+d.Consent) {
			t.Errorf("%s: the runbook's consent --%s not documented (%q)", d.Kind, d.Consent, row[3])
		}
		if d.Override != "" && !strings.Contains(row[4], "--"+d.Override) {
			t.Errorf("%s: override --%s not documented (%q)", d.Kind, d.Override, row[4])
		}
	}
	if len(rows) != len(Decisions()) {
		t.Errorf("docs/decision-table.md has %d kind rows, the code %d", len(rows), len(Decisions()))
	}
}

// TestDecisionExitCodes: plan exits 1 exactly for breaking, unknown and invalid-on-recreate
// (and stricter with --fail-on stricter); the worst verdict wins.
func TestDecisionExitCodes(t *testing.T) {
	for _, c := range []struct {
		verdict  string
		code     int
		stricter int
	}{
		{VerdictSafe, 0, 0}, {VerdictStricter, 0, 1}, {VerdictInvalidOnRecreate, 1, 1}, {VerdictUnknown, 1, 1}, {VerdictBreaking, 1, 1},
	} {
		if got := ExitCode(c.verdict, false); got != c.code {
			t.Errorf("%s: exit %d, want %d", c.verdict, got, c.code)
		}
		if got := ExitCode(c.verdict, true); got != c.stricter {
			t.Errorf("%s --fail-on stricter: exit %d, want %d", c.verdict, got, c.stricter)
		}
	}
	if Worse(VerdictInvalidOnRecreate, VerdictStricter) != VerdictInvalidOnRecreate || Worse(VerdictInvalidOnRecreate, VerdictUnknown) != VerdictUnknown {
		t.Errorf("verdict order")
	}
	r := &Report{Items: []Item{{CRD: "a", Verdict: VerdictStricter}, {CRD: "b", Verdict: VerdictInvalidOnRecreate}}}
	r.Summarize()
	if r.Summary.Verdict != VerdictInvalidOnRecreate || r.Summary.InvalidOnRecreate != 1 || r.Summary.ExitCode != 1 || !slices.Equal(r.MustAct(false), []string{"b"}) || r.Breaking() {
		t.Errorf("summary %+v must act %v breaking %v", r.Summary, r.MustAct(false), r.Breaking())
	}
}

// TestFindingKinds: an object is invalid on re-create when only its re-create is rejected, and
// not for the strict decoding error that names the fields it loses.
func TestFindingKinds(t *testing.T) {
	strict := `Widget in version "v1" cannot be handled as a Widget: strict decoding error: unknown field "spec.legacy"`
	for _, c := range []struct {
		name string
		f    Finding
		want []Kind
	}{
		{"pattern", Finding{CreateErrors: []string{"spec.interval: Invalid value"}}, []Kind{KindInvalidOnRecreate}},
		{"loses a field", Finding{PrunedOnRead: []string{"spec.legacy"}, CreateErrors: []string{strict}}, []Kind{KindDataLoss}},
		{"write rejected", Finding{CreateErrors: []string{"spec.size: Required value"}, UpdateErrors: []string{"spec.size: Required value"}}, []Kind{KindRejectedWrite}},
		{"maybe loses", Finding{PossiblyPrunedOnRead: []string{"spec.x"}}, []Kind{KindUnknown}},
		{"defaulted only", Finding{DefaultedOnRead: []string{"spec.mode"}}, nil},
		{"type mismatch", Finding{TypeMismatches: []preflight.TypeMismatch{{Path: ".spec.config"}}, TypeRecreateErrors: []string{"spec.config: Invalid value"}}, []Kind{KindTypeMismatch}},
		{"invalid only as stored", Finding{CreateErrors: []string{}, CreateErrorsAfterLoss: []string{"spec.controlPlane: Required value"}}, []Kind{KindInvalidOnRecreate}},
	} {
		if got := c.f.kinds(); !slices.Equal(got, c.want) {
			t.Errorf("%s: kinds %v, want %v", c.name, got, c.want)
		}
	}
}

// TestRecreateErrorsAsStored: the errors of the re-create as stored count for an object that
// loses nothing too, each error once.
func TestRecreateErrorsAsStored(t *testing.T) {
	f := Finding{CreateErrors: []string{"spec.interval: Invalid value"}, CreateErrorsAfterLoss: []string{"spec.interval: Invalid value", "spec.controlPlane: Required value"}}
	if got, want := f.RecreateErrors(), []string{"spec.interval: Invalid value", "spec.controlPlane: Required value"}; !slices.Equal(got, want) {
		t.Errorf("RecreateErrors %q, want %q", got, want)
	}
	if f.empty() || (&Finding{CreateErrorsAfterLoss: []string{"spec.controlPlane: Required value"}}).empty() {
		t.Errorf("a finding with re-create errors is empty")
	}
}
