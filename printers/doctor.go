package printers

import (
	"io"
	"slices"
	"strconv"

	"github.com/crdver/kubectl-crdver/doctor"
)

// printDoctorReport prints doctor's summary table (one row per CRD, those with findings first,
// the first finding wrapped to fit the terminal), or with -o wide every finding with its fix, in
// full.
func printDoctorReport(w io.Writer, r *doctor.Report, wide, noHeaders bool) error {
	items := slices.Clone(r.Items)
	slices.SortStableFunc(items, func(a, b doctor.Item) int { return a.Rank() - b.Rank() })
	if wide {
		t := &Table{Header: []string{"crd", "check", "severity", "message", "fix"}}
		for _, it := range items {
			if len(it.Findings) == 0 {
				t.Add(it.CRD, "-", "ok", "no findings", "")
			}
			for _, f := range it.Findings {
				t.Add(it.CRD, f.Check, f.Severity, f.Message, f.Fix)
			}
		}
		return t.Print(w, noHeaders)
	}
	t := &Table{Header: []string{"crd", "errors", "warnings", "first finding"}, MaxWidth: TerminalWidth}
	for _, it := range items {
		e, wn := 0, 0
		for _, f := range it.Findings {
			switch f.Severity {
			case doctor.SeverityError:
				e++
			case doctor.SeverityWarning:
				wn++
			}
		}
		first := "ok"
		if len(it.Findings) > 0 {
			f := it.Findings[0]
			first = f.Severity + " " + f.Check + ": " + f.Message
		}
		t.Add(it.CRD, strconv.Itoa(e), strconv.Itoa(wn), first)
	}
	return t.Print(w, noHeaders)
}
