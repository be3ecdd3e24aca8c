package printers

// convert.go: convert's report for people: the checks, the findings and the bisections.

import (
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"github.com/crdver/kubectl-crdver/convert"
)

func printConvertReport(w io.Writer, r *convert.Report, noHeaders bool, allListed string) error {
	var b strings.Builder
	fmt.Fprintf(&b, "CRD:        %s (conversion strategy %s)\n", r.CRD, r.Strategy)
	if r.Webhook != "" {
		fmt.Fprintf(&b, "Webhook:    %s\n", r.Webhook)
	}
	what := "to " + r.To
	if r.RoundTrip {
		what += " and back (round trip)"
	}
	if r.ReviewVersion != "" {
		what += ", ConversionReview " + r.ReviewVersion
	}
	fmt.Fprintf(&b, "Converted:  %s\n", what)
	notSent := ""
	if r.NotSent > 0 {
		notSent = fmt.Sprintf(", %d not sent", r.NotSent)
	}
	fmt.Fprintf(&b, "Objects:    %d given, %d skipped, %d converted without error, %d failed%s; %d request(s)\n",
		r.Objects, r.Skipped, r.Converted, len(r.Failed), notSent, r.Requests)
	if r.Latency.Requests > 0 {
		fmt.Fprintf(&b, "Latency:    p50 %s, p99 %s, max %s over %d request(s)\n", ms(r.Latency.P50), ms(r.Latency.P99), ms(r.Latency.Max), r.Latency.Requests)
	}
	for _, n := range r.Notes {
		fmt.Fprintf(&b, "note: %s\n", n)
	}
	b.WriteString("\n")
	if _, err := io.WriteString(w, b.String()); err != nil {
		return err
	}
	t := &Table{Header: []string{"check", "passed", "failed", "warnings"}}
	for _, c := range r.Checks {
		t.Add(c.Name, strconv.Itoa(c.Passed), strconv.Itoa(c.Failed), strconv.Itoa(c.Warnings))
	}
	if len(r.Checks) > 0 {
		if err := t.Print(w, noHeaders); err != nil {
			return err
		}
	}
	if err := printRoundTripAdded(w, r.Added, noHeaders); err != nil {
		return err
	}
	if len(r.Findings) == 0 {
		_, err := io.WriteString(w, "\nNo findings.\n")
		return err
	}
	if _, err := fmt.Fprintf(w, "\n%d finding(s): %d failed check(s), %d warning(s):\n", len(r.Findings), r.Problems(), r.Warnings()); err != nil {
		return err
	}
	ft := &Table{Header: []string{"object", "direction", "check", "path", "detail"}}
	for _, f := range r.Findings {
		check := f.Check
		if f.Severity == convert.SeverityWarning {
			check += " (warning)"
		}
		ft.Add(f.Object, f.Direction, check, Dash(f.Path), f.Detail)
	}
	if err := ft.Print(w, noHeaders); err != nil {
		return err
	}
	return printBisections(w, r.Bisections, allListed)
}

// printRoundTripAdded lists what the round trip added or normalised: not a loss, no failed
// check (convert's loss rule).
func printRoundTripAdded(w io.Writer, cs []convert.Change, noHeaders bool) error {
	if len(cs) == 0 {
		return nil
	}
	what := "added or normalised"
	if slices.ContainsFunc(cs, func(c convert.Change) bool { return c.Kind == convert.DiffDefaultDropped }) {
		what = "added, normalised, or a default the input did not hold dropped"
	}
	if _, err := fmt.Fprintf(w, "\n%d difference(s) of the round trip lose nothing (%s: not a loss, not a failed check):\n", len(cs), what); err != nil {
		return err
	}
	t := &Table{Header: []string{"object", "direction", "path", "detail"}}
	for _, c := range cs {
		t.Add(c.Object, c.Direction, c.Path, c.Detail)
	}
	return t.Print(w, noHeaders)
}

// printBisections names the objects to blame for each request that failed as a whole.
func printBisections(w io.Writer, bs []convert.Bisection, allListed string) error {
	var b strings.Builder
	for _, bi := range bs {
		state := "minimal failing object(s)"
		if !bi.Complete {
			state = "smallest failing set found (the search stopped early: request budget, interrupt or unreachable webhook)"
		}
		fmt.Fprintf(&b, "\n%s (%s) failed as a whole (%s); bisected with %d more request(s), %s:\n", bi.Request, bi.Direction, bi.Check, bi.Requests, state)
		const shown = 20
		for i, o := range bi.Objects {
			if i == shown {
				fmt.Fprintf(&b, "  … and %d more (%s lists them all)\n", len(bi.Objects)-shown, allListed)
				break
			}
			fmt.Fprintf(&b, "  %s\n", o)
		}
		fmt.Fprintf(&b, "  webhook said: %s\n", bi.Detail)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func ms(v float64) string { return strconv.FormatFloat(v, 'f', 1, 64) + "ms" }
