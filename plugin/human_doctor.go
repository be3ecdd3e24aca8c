package plugin

import (
	"io"
	"strconv"

	"github.com/crdver/kubectl-crdver/doctor"
)

// printDoctorReport prints doctor's summary table (one row per CRD), or with -o wide every
// finding with its fix.
func printDoctorReport(w io.Writer, r *doctor.Report, wide, noHeaders bool) error {
	if wide {
		t := &table{header: []string{"crd", "check", "severity", "message", "fix"}}
		for _, it := range r.Items {
			if len(it.Findings) == 0 {
				t.add(it.CRD, "-", "ok", "no findings", "")
			}
			for _, f := range it.Findings {
				t.add(it.CRD, f.Check, f.Severity, f.Message, f.Fix)
			}
		}
		return t.print(w, noHeaders)
	}
	t := &table{header: []string{"crd", "errors", "warnings", "first finding"}}
	for _, it := range r.Items {
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
		t.add(it.CRD, strconv.Itoa(e), strconv.Itoa(wn), first)
	}
	return t.print(w, noHeaders)
}
