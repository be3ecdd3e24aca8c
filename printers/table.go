// Package printers prints the libraries' reports for people, the way kubectl prints: a table
// engine (upper-case headers, no borders, aligned columns, terminal display widths) and one
// human printer per report type (Human), plus the JSON/YAML data printer (Data). It names no
// flags: the command layer (package plugin) chooses a printer from its flags and words what
// depends on them.
package printers

import (
	"fmt"
	"io"
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/width"
)

// Table is a human-readable table printed the way kubectl prints: upper-case headers, no
// borders, columns separated by three spaces.
type Table struct {
	Header []string
	Rows   [][]string
	// MaxWidth, when set, wraps the last column's cells at word boundaries so that lines fit
	// (full text is in -o wide, json, yaml).
	MaxWidth int
}

// TerminalWidth is what default tables fit in.
const TerminalWidth = 120

// WrapLastColumn wraps the last column's cells so that every line fits in t.MaxWidth, keeping
// at least 30 columns for the last column.
func (t *Table) WrapLastColumn(noHeaders bool) {
	n := len(t.Header)
	if t.MaxWidth <= 0 || n == 0 {
		return
	}
	widths := make([]int, n)
	rows := t.Rows
	if !noHeaders {
		rows = append([][]string{t.Header}, rows...)
	}
	for _, r := range rows {
		for i := 0; i < n-1 && i < len(r); i++ {
			widths[i] = max(widths[i], utf8.RuneCountInString(r[i]))
		}
	}
	avail := t.MaxWidth
	for _, w := range widths[:n-1] {
		avail -= w + 3
	}
	avail = max(avail, 30)
	for _, r := range t.Rows {
		if len(r) == n {
			r[n-1] = WrapWords(r[n-1], avail)
		}
	}
}

// WrapWords breaks s into lines of at most width runes at spaces (a longer word is cut).
func WrapWords(s string, width int) string {
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

// DisplayWidth is how many columns s takes on a terminal: two for an East Asian wide or
// full-width character (日本語), none for a combining mark or a format character, one for any
// other (ambiguous ones such as → and … included, as in a terminal not set to East Asian widths).
func DisplayWidth(s string) int {
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

// Add appends a row.
func (t *Table) Add(cells ...string) { t.Rows = append(t.Rows, cells) }

// Print writes the table (without its header row when noHeaders), its last column wrapped to
// MaxWidth when set.
func (t *Table) Print(w io.Writer, noHeaders bool) error {
	t.WrapLastColumn(noHeaders)
	rows := t.Rows
	if !noHeaders {
		h := make([]string, len(t.Header))
		for i, c := range t.Header {
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
				widths[i] = max(widths[i], DisplayWidth(l))
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
					b.WriteString(strings.Repeat(" ", widths[i]-DisplayWidth(l)+3))
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

// Dash is s, or "-" when s is empty.
func Dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// YesNo is "yes" or "no".
func YesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

// YesNoUnknown is "yes", "no" or "?" when b is nil.
func YesNoUnknown(b *bool) string {
	if b == nil {
		return "?"
	}
	return YesNo(*b)
}

// Mark is "*" when b is true.
func Mark(b bool) string {
	if b {
		return "*"
	}
	return ""
}

// Plural is "1 object", "2 objects".
func Plural(n int, what string) string {
	if n == 1 {
		return fmt.Sprintf("%d %s", n, what)
	}
	return fmt.Sprintf("%d %ss", n, what)
}
