package printers

import (
	"encoding/json"
	"io"

	"github.com/crdver/kubectl-crdver/internal/textout"
)

// Report is a report, or a part of one, as a command prints it (Helm's output.Writer): for
// people it prints itself (PrintHuman); as data (-o json|yaml) it is marshalled, and the
// reports of this package marshal as the library's own value. Every library report has its
// Report here (Plan, Migrate, Doctor, …; views.go): a command can print only what has a
// printer, so a report without one does not compile.
type Report interface {
	// PrintHuman prints the report for people, as h says.
	PrintHuman(w io.Writer, h Human) error
}

// MarkdownReport is a Report that is also printed as a pull request comment (-o markdown).
type MarkdownReport interface {
	Report
	// Markdown is the comment, capped at limit bytes (0: markdown.Limit).
	Markdown(limit int) string
}

// ReportPrinter prints a command's reports: as data (Data), for people (Human) or otherwise.
// A command resolves it from its flags once, before its work (kubectl's PrintFlags.ToPrinter).
type ReportPrinter interface {
	// PrintReport prints the command's report.
	PrintReport(w io.Writer, r Report) error
	// PrintPart prints a part of the report as soon as it is known (a migration's plan before
	// its question). The data printers print nothing: the part is in the final report.
	PrintPart(w io.Writer, part Report) error
}

// Data prints reports as indented JSON, or as YAML.
type Data struct{ YAML bool }

// PrintReport prints r as JSON or YAML.
func (p Data) PrintReport(w io.Writer, r Report) error { return textout.Data(w, r, p.YAML) }

// PrintPart prints nothing: the part is in the final report.
func (Data) PrintPart(io.Writer, Report) error { return nil }

// Human prints reports for people, the way kubectl does: upper-case headers, no borders,
// aligned columns (Table), within TerminalWidth columns unless Wide.
type Human struct {
	NoHeaders bool
	Wide      bool
	// AllListed names what lists every item where only the first are shown ("-o json" for the
	// command line); empty: "the JSON report".
	AllListed string
	// WideListed names what shows every item and the whole text where the default output
	// shortens ("-o wide" for the command line); empty: "the wide output".
	WideListed string
}

// PrintReport prints r for people.
func (p Human) PrintReport(w io.Writer, r Report) error { return r.PrintHuman(w, p) }

// PrintPart prints a part of a report as soon as it is known.
func (p Human) PrintPart(w io.Writer, part Report) error { return part.PrintHuman(w, p) }

// all is what lists every item (AllListed).
func (p Human) all() string {
	if p.AllListed == "" {
		return "the JSON report"
	}
	return p.AllListed
}

// wide is what shows everything (WideListed).
func (p Human) wide() string {
	if p.WideListed == "" {
		return "the wide output"
	}
	return p.WideListed
}

// view is a library's report with its printer for people; as data it is the report itself.
type view[T any] struct {
	report T
	human  func(io.Writer, T, Human) error
}

func (v view[T]) PrintHuman(w io.Writer, h Human) error { return v.human(w, v.report, h) }

// MarshalJSON marshals the library's report.
func (v view[T]) MarshalJSON() ([]byte, error) { return json.Marshal(v.report) }

// markdownView is a view that is also printed as a pull request comment.
type markdownView[T any] struct {
	view[T]
	markdown func(T, int) string
}

func (v markdownView[T]) Markdown(limit int) string { return v.markdown(v.report, limit) }

func newView[T any](r T, human func(io.Writer, T, Human) error) view[T] {
	return view[T]{report: r, human: human}
}

func newMarkdownView[T any](r T, human func(io.Writer, T, Human) error, markdown func(T, int) string) markdownView[T] {
	return markdownView[T]{view: newView(r, human), markdown: markdown}
}
