package convert

import (
	"context"
	"strings"
	"testing"

	"github.com/crdver/kubectl-crdver/outcome"
)

// TestEnded: how convert, convert --write/--check and --load end, by their reports (pure
// logic; the runs are tested in plugin/convert_*_test.go and, interrupted, in
// cmd/kubectl-crdver/streams*_test.go).
func TestEnded(t *testing.T) {
	live := context.Background()
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	failed := []CheckCount{{Name: CheckHTTPStatus, Failed: 2, Warnings: 1}}
	warned := []CheckCount{{Name: CheckHTTPStatus, Warnings: 1}}
	check := func(name string, out outcome.Outcome, kind outcome.Kind, line string) {
		t.Helper()
		if out.Kind() != kind || !strings.Contains(out.Message, line) || (kind == outcome.OK) != (out.Message == "") {
			t.Errorf("%s: %+v, want %s with %q", name, out, kind, line)
		}
	}
	r := func(checks []CheckCount, unreachable string) *Report {
		return &Report{CRD: "crontabs.example.com", To: "v1", Objects: 3, Checks: checks, Unreachable: unreachable}
	}
	check("converted", r(nil, "").Ended(live, true), outcome.OK, "")
	check("a warning", r(warned, "").Ended(live, false), outcome.OK, "")
	check("a warning, strict", r(warned, "").Ended(live, true), outcome.Findings, "1 warning(s) converting to v1, and --strict makes warnings fail")
	check("failed checks", r(failed, "").Ended(live, false), outcome.Findings, "crontabs.example.com: 2 failed check(s), 1 warning(s) converting to v1")
	check("unreachable", r(failed, "connection refused").Ended(live, false), outcome.Incomplete, "cannot reach the conversion webhook: connection refused")
	check("interrupted", r(failed, "").Ended(cancelled, false), outcome.Incomplete, "interrupted after 3 objects")

	w := func(status string, mode string, unreachable string) *WriteReport {
		return &WriteReport{CRD: "crontabs.example.com", Mode: mode, Files: []FileResult{{Path: "a.yaml", Status: status}}, Conversions: []*Report{r(nil, unreachable)}}
	}
	check("written", w(FileWritten, "write", "").Ended(live), outcome.OK, "")
	check("not converted", w(FileNotProven, "write", "").Ended(live), outcome.Findings, "1 file(s) not converted")
	check("still to convert", w(FileNotProven, "check", "").Ended(live), outcome.Findings, "convert them with --write")
	check("write, unreachable", w(FileWritten, "write", "refused").Ended(live), outcome.Incomplete, "rerun when it answers")
	check("write, interrupted", w(FileWritten, "write", "").Ended(cancelled), outcome.Incomplete, "interrupted")

	load := &LoadReport{CRD: "crontabs.example.com", Sizes: []LoadResult{{Objects: 1500, Verdict: VerdictOver}}}
	check("load over budget", load.Ended(), outcome.Findings, "does not meet the API server's budget: 1500 object(s) "+VerdictOver)
	load.Unreachable = "refused"
	check("load unreachable", load.Ended(), outcome.Incomplete, "cannot reach the conversion webhook")
	check("load within budget", (&LoadReport{Sizes: []LoadResult{{Objects: 1}}}).Ended(), outcome.OK, "")
}
