package plugin

import (
	"fmt"
	"io"

	"github.com/crdver/kubectl-crdver/printers"
)

const outputMarkdown = "markdown"

// markdownPrinter prints reports as a pull request comment (printers.MarkdownReport: plan,
// doctor, convert --write, versions --all, a release path). limit is the size cap (0:
// markdown.Limit; tests lower it). Only the commands whose report has one offer -o markdown.
type markdownPrinter struct{ limit int }

func (p markdownPrinter) PrintPart(io.Writer, printers.Report) error { return nil }

func (p markdownPrinter) PrintReport(w io.Writer, r printers.Report) error {
	m, ok := r.(printers.MarkdownReport)
	if !ok {
		return fmt.Errorf("-o markdown is not supported for this report (%T)", r)
	}
	_, err := io.WriteString(w, m.Markdown(p.limit))
	return err
}
