package plugin

import (
	"io"

	"github.com/crdver/kubectl-crdver/plan"
	"github.com/crdver/kubectl-crdver/printers"
)

// The names the printers of plan and upgrade (human_plan.go, human_upgrade.go) and of the
// preflight (preflight.go) use for package printers' table engine, until they move there too.

// table is a printers.Table with the field and method names those files use.
type table struct {
	header   []string
	rows     [][]string
	maxWidth int
}

func (t *table) add(cells ...string) { t.rows = append(t.rows, cells) }

func (t *table) engine() *printers.Table {
	return &printers.Table{Header: t.header, Rows: t.rows, MaxWidth: t.maxWidth}
}

func (t *table) wrapLastColumn(noHeaders bool) { t.engine().WrapLastColumn(noHeaders) }

func (t *table) print(w io.Writer, noHeaders bool) error { return t.engine().Print(w, noHeaders) }

const terminalWidth = printers.TerminalWidth

func wrapWords(s string, width int) string { return printers.WrapWords(s, width) }

func indentWrap(s string, width, indent int) string { return printers.IndentWrap(s, width, indent) }

func writeWrapped(w io.Writer, text, indent string, width int) {
	printers.WriteWrapped(w, text, indent, width)
}

func printRunbook(w io.Writer, title string, steps []plan.RunbookStep) {
	printers.Runbook(w, title, steps)
}

// warningCounter counts the API server's warnings of a run (root.go's Globals.warnings).
type warningCounter = printers.WarningCounter
