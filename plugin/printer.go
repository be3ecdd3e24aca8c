package plugin

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/spf13/cobra"
	"golang.org/x/text/width"
	"sigs.k8s.io/yaml"
)

// Output formats accepted by -o.
const (
	outputTable = ""
	outputWide  = "wide"
	outputJSON  = "json"
	outputYAML  = "yaml"
	outputName  = "name"
)

// outputFlags is -o/--output and --no-headers, shared by every command that prints a report.
type outputFlags struct {
	format    string
	noHeaders bool
	allowed   []string
}

func addOutputFlags(cmd *cobra.Command, allowed ...string) *outputFlags {
	f := &outputFlags{allowed: allowed}
	cmd.Flags().StringVarP(&f.format, "output", "o", "", "Output format: one of "+strings.Join(allowed, ", ")+" (default: a table)")
	cmd.Flags().BoolVar(&f.noHeaders, "no-headers", false, "Print tables without the header row")
	_ = cmd.RegisterFlagCompletionFunc("output", func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
		return allowed, cobra.ShellCompDirectiveNoFileComp
	})
	return f
}

func (f *outputFlags) validate() error {
	if f.format == outputTable {
		return nil
	}
	if f.noHeaders && (f.format == outputJSON || f.format == outputYAML || f.format == outputMarkdown) {
		return UsageErrorf("--no-headers applies to tables: it cannot be combined with -o %s", f.format)
	}
	for _, a := range f.allowed {
		if f.format == a {
			return nil
		}
	}
	return UsageErrorf("--output %q is not supported: use one of %s", f.format, strings.Join(f.allowed, ", "))
}

// structured reports whether -o asks for data (json or yaml). Validate may use it to refuse
// options that only make sense for people; Run uses the printer instead.
func (f *outputFlags) structured() bool { return f.format == outputJSON || f.format == outputYAML }

// ReportPrinter prints a command's report: as data for -o json|yaml, for people otherwise.
// Commands resolve it from their flags in Complete (kubectl's PrintFlags.ToPrinter).
type ReportPrinter interface {
	// PrintReport prints the command's report.
	PrintReport(w io.Writer, report any) error
	// PrintPart prints a part of the report as soon as it is known (a migration's plan before
	// its question). The data printers print nothing: the part is in the final report.
	PrintPart(w io.Writer, part any) error
}

// humanOptions are what a command adds to the human printer.
type humanOptions struct {
	// diff: preview prints a unified diff instead of the result.
	diff bool
	// color: colour the diff (--color).
	color bool
}

// toPrinter resolves -o and --no-headers to the command's printer; an -o the command does not
// support is a usage error.
func (f *outputFlags) toPrinter(h humanOptions) (ReportPrinter, error) {
	if err := f.validate(); err != nil {
		return nil, err
	}
	if f.structured() {
		return dataPrinter{format: f.format}, nil
	}
	if f.format == outputMarkdown {
		return markdownPrinter{}, nil
	}
	return &humanPrinter{noHeaders: f.noHeaders, wide: f.format == outputWide, diff: h.diff, color: h.color}, nil
}

// dataPrinter prints reports as indented JSON or as YAML.
type dataPrinter struct{ format string }

func (p dataPrinter) PrintReport(w io.Writer, report any) error {
	return printData(w, p.format, report)
}
func (dataPrinter) PrintPart(io.Writer, any) error { return nil }

// printsData reports whether p prints JSON or YAML (rather than for people).
func printsData(p ReportPrinter) bool {
	switch p.(type) {
	case dataPrinter, *dataPrinter:
		return true
	}
	return false
}

func printData(w io.Writer, format string, v any) error {
	js, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	if format == outputYAML {
		y, err := yaml.JSONToYAML(js)
		if err != nil {
			return err
		}
		_, err = w.Write(y)
		return err
	}
	_, err = fmt.Fprintf(w, "%s\n", js)
	return err
}

// table is a human-readable table printed the way kubectl prints: upper-case headers, no
// borders, columns separated by three spaces.
type table struct {
	header []string
	rows   [][]string
	// maxWidth, when set, wraps the last column's cells at word boundaries so that lines fit
	// (full text is in -o wide, json, yaml).
	maxWidth int
}

// terminalWidth is what default tables fit in.
const terminalWidth = 120

// wrapLastColumn wraps the last column's cells so that every line fits in t.maxWidth, keeping
// at least 30 columns for the last column.
func (t *table) wrapLastColumn(noHeaders bool) {
	n := len(t.header)
	if t.maxWidth <= 0 || n == 0 {
		return
	}
	widths := make([]int, n)
	rows := t.rows
	if !noHeaders {
		rows = append([][]string{t.header}, rows...)
	}
	for _, r := range rows {
		for i := 0; i < n-1 && i < len(r); i++ {
			widths[i] = max(widths[i], utf8.RuneCountInString(r[i]))
		}
	}
	avail := t.maxWidth
	for _, w := range widths[:n-1] {
		avail -= w + 3
	}
	avail = max(avail, 30)
	for _, r := range t.rows {
		if len(r) == n {
			r[n-1] = wrapWords(r[n-1], avail)
		}
	}
}

// wrapWords breaks s into lines of at most width runes at spaces (a longer word is cut).
func wrapWords(s string, width int) string {
	if utf8.RuneCountInString(s) <= width {
		return s
	}
	var lines []string
	line := ""
	var words []string
	for _, word := range strings.Fields(s) {
		// a word longer than a line (a pattern, an enum list) is cut into line-sized pieces
		for r := []rune(word); len(r) > 0; {
			n := min(len(r), width)
			words = append(words, string(r[:n]))
			r = r[n:]
		}
	}
	for _, word := range words {
		switch {
		case line == "":
			line = word
		case utf8.RuneCountInString(line)+1+utf8.RuneCountInString(word) <= width:
			line += " " + word
		default:
			lines = append(lines, line)
			line = word
		}
	}
	if line != "" {
		lines = append(lines, line)
	}
	return strings.Join(lines, "\n")
}

// displayWidth is how many columns s takes on a terminal: two for an East Asian wide or
// full-width character (日本語), none for a combining mark or a format character, one for any
// other (ambiguous ones such as → and … included, as in a terminal not set to East Asian widths).
func displayWidth(s string) int {
	n := 0
	for _, r := range s {
		switch {
		case r < utf8.RuneSelf:
			n++
		case unicode.In(r, unicode.Mn, unicode.Me, unicode.Cf):
		default:
			switch width.LookupRune(r).Kind() {
			case width.EastAsianWide, width.EastAsianFullwidth:
				n += 2
			default:
				n++
			}
		}
	}
	return n
}

func (t *table) add(cells ...string) { t.rows = append(t.rows, cells) }

func (t *table) print(w io.Writer, noHeaders bool) error {
	t.wrapLastColumn(noHeaders)
	rows := t.rows
	if !noHeaders {
		h := make([]string, len(t.header))
		for i, c := range t.header {
			h[i] = strings.ToUpper(c)
		}
		rows = append([][]string{h}, rows...)
	}
	// A cell of several lines (a wrapped last column) spans as many output lines; a column is
	// as wide as its widest line on a terminal (displayWidth).
	var widths []int
	for _, r := range rows {
		for i, c := range r {
			if i == len(widths) {
				widths = append(widths, 0)
			}
			for _, l := range strings.Split(c, "\n") {
				widths[i] = max(widths[i], displayWidth(l))
			}
		}
	}
	var b strings.Builder
	for _, r := range rows {
		cells := make([][]string, len(r))
		height := 1
		for i, c := range r {
			cells[i] = strings.Split(c, "\n")
			height = max(height, len(cells[i]))
		}
		for n := 0; n < height; n++ {
			b.Reset()
			for i := range widths {
				l := ""
				if i < len(cells) && n < len(cells[i]) {
					l = cells[i][n]
				}
				b.WriteString(l)
				if i < len(widths)-1 {
					b.WriteString(strings.Repeat(" ", widths[i]-displayWidth(l)+3))
				}
			}
			// kubectl prints no blanks at the end of a line
			if _, err := io.WriteString(w, strings.TrimRight(b.String(), " ")+"\n"); err != nil {
				return err
			}
		}
	}
	return nil
}
