package printers

// convert.go: convert's report for people: the findings, the checks and the bisections, as a
// whole or as a run's pages come (ConvertStream).

import (
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/crdver/kubectl-crdver/convert"
)

// printConvertReport prints a whole report as ConvertStream prints it a page at a time: the
// header, the findings, then the counts, the checks and the rest.
func printConvertReport(w io.Writer, r *convert.Report, noHeaders bool, allListed string) error {
	if err := printConvertHead(w, r); err != nil {
		return err
	}
	if err := printConvertFindings(w, r.Findings, noHeaders, true); err != nil {
		return err
	}
	return printConvertSummary(w, r, len(r.Findings), noHeaders, allListed)
}

// printConvertHead prints what the run converts, and how (known before the first object).
func printConvertHead(w io.Writer, r *convert.Report) error {
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
	_, err := io.WriteString(w, b.String())
	return err
}

// printConvertFindings prints findings as a table; first: they are the run's first, under a
// blank line and the header.
func printConvertFindings(w io.Writer, fs []convert.Finding, noHeaders, first bool) error {
	if len(fs) == 0 {
		return nil
	}
	if first {
		if _, err := io.WriteString(w, "\n"); err != nil {
			return err
		}
	}
	ft := &Table{Header: []string{"object", "direction", "check", "path", "detail"}}
	for _, f := range fs {
		check := f.Check
		if f.Severity == convert.SeverityWarning {
			check += " (warning)"
		}
		ft.Add(f.Object, f.Direction, check, Dash(f.Path), f.Detail)
	}
	return ft.Print(w, noHeaders || !first)
}

// printConvertSummary prints the counts, the notes, the checks, what the round trips added,
// the number of findings (listed above) and the bisections.
func printConvertSummary(w io.Writer, r *convert.Report, findings int, noHeaders bool, allListed string) error {
	var b strings.Builder
	if findings > 0 {
		b.WriteString("\n") // under the findings' table
	}
	notSent := ""
	if r.NotSent > 0 {
		notSent = fmt.Sprintf(", %d not sent", r.NotSent)
	}
	fmt.Fprintf(&b, "Objects:    %d given, %d skipped, %d converted without error, %d failed%s; %d request(s)\n",
		r.Objects, r.Skipped, r.Converted, max(r.FailedObjects, len(r.Failed)), notSent, r.Requests)
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
	if findings == 0 {
		_, err := io.WriteString(w, "\nNo findings.\n")
		return err
	}
	if _, err := fmt.Fprintf(w, "\n%d finding(s), listed above: %d failed check(s), %d warning(s).\n", findings, r.Problems(), r.Warnings()); err != nil {
		return err
	}
	return printBisections(w, r.Bisections, allListed)
}

// ConvertStream prints the report of a convert run as its pages come (convert.Options.Page):
// for people, the header, then each page's findings as soon as the page is done (one table
// per page, under one header), and the counts, checks and the rest once the run is over; as
// data, the findings list item by item, then the rest of the report. Memory holds one page.
type ConvertStream struct {
	w        io.Writer
	human    *Human
	list     *listStream
	head     bool
	findings int
}

// NewConvertStream prints to w as p does (Human or Data).
func NewConvertStream(w io.Writer, p ReportPrinter) *ConvertStream {
	s := &ConvertStream{w: w}
	switch p := p.(type) {
	case Data:
		s.list = &listStream{w: w, yaml: p.YAML, key: "findings"}
	case Human:
		s.human = &p
	default:
		s.human = &Human{}
	}
	return s
}

// Page prints one page's findings (convert.Options.Page's signature).
func (s *ConvertStream) Page(p convert.PageResult) error {
	if s.list != nil {
		for _, f := range p.Findings {
			if err := s.list.Item(f); err != nil {
				return err
			}
		}
		s.findings += len(p.Findings)
		return nil
	}
	if len(p.Findings) == 0 {
		return nil
	}
	if err := s.printHead(p.Report); err != nil {
		return err
	}
	first := s.findings == 0
	s.findings += len(p.Findings)
	return printConvertFindings(s.w, p.Findings, s.human.NoHeaders, first)
}

func (s *ConvertStream) printHead(r *convert.Report) error {
	if s.head || r == nil {
		return nil
	}
	s.head = true
	return printConvertHead(s.w, r)
}

// Finish prints the rest of the report r, whose findings were given to Page (r.Findings, if
// any, are printed too).
func (s *ConvertStream) Finish(r *convert.Report) error {
	if len(r.Findings) > 0 {
		if err := s.Page(convert.PageResult{Report: r, Findings: r.Findings}); err != nil {
			return err
		}
		cp := *r
		cp.Findings = nil
		r = &cp
	}
	if s.list != nil {
		return s.list.Finish(r)
	}
	if err := s.printHead(r); err != nil {
		return err
	}
	return printConvertSummary(s.w, r, s.findings, s.human.NoHeaders, s.human.all())
}

// printRoundTripAdded lists what the round trip added or normalised: not a loss, no failed
// check (convert's loss rule).
func printRoundTripAdded(w io.Writer, cs []convert.Change, noHeaders bool) error {
	if len(cs) == 0 {
		return nil
	}
	if _, err := fmt.Fprintf(w, "\n%d difference(s) of the round trip lose nothing (added or normalised: not a loss, not a failed check):\n", len(cs)); err != nil {
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
