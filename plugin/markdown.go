package plugin

import (
	"fmt"
	"io"

	"github.com/crdver/kubectl-crdver/convert"
	"github.com/crdver/kubectl-crdver/doctor"
	"github.com/crdver/kubectl-crdver/markdown"
	"github.com/crdver/kubectl-crdver/plan"
	"github.com/crdver/kubectl-crdver/printers"
)

const outputMarkdown = "markdown"

// markdownPrinter prints reports as a pull request comment (package markdown). limit is the
// size cap (0: markdown.Limit; tests lower it).
type markdownPrinter struct{ limit int }

func (p markdownPrinter) PrintPart(io.Writer, any) error { return nil }

func (p markdownPrinter) PrintReport(w io.Writer, report any) error {
	var out string
	switch r := report.(type) {
	case *plan.Report:
		out = markdown.Plan(r, p.limit)
	case *doctor.Report:
		out = markdown.Doctor(r, p.limit)
	case *convert.WriteReport:
		out = printers.ConvertWriteMarkdown(r)
	case *convert.LoadReport:
		out = printers.ConvertLoadMarkdown(r)
	case versionsSummary:
		out = markdown.Versions(r.Items, p.limit)
	default:
		return fmt.Errorf("-o markdown is not supported for this report (%T)", report)
	}
	_, err := io.WriteString(w, out)
	return err
}
