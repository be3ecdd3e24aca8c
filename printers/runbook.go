package printers

import (
	"fmt"
	"io"
	"strings"
	"unicode/utf8"

	"github.com/crdver/kubectl-crdver/plan"
)

// Runbook prints the release runbook: numbered steps, each with why and its commands
// (a step without a command is for a person to do). Lines are wrapped to fit 120 columns;
// a command longer than a line is continued with a backslash.
func Runbook(w io.Writer, title string, steps []plan.RunbookStep) {
	if len(steps) == 0 {
		return
	}
	fmt.Fprintf(w, "%s\n", title)
	for i, s := range steps {
		head := fmt.Sprintf("  %d. [%s] ", i+1, s.Phase)
		if len(s.CRDs) > 0 && len(s.CRDs) <= 3 {
			head += strings.Join(s.CRDs, ", ") + ": "
		}
		WriteWrapped(w, head+s.Why, strings.Repeat(" ", 7), 120)
		for _, o := range s.Objects {
			WriteWrapped(w, "       - "+o, strings.Repeat(" ", 9), 120)
		}
		for _, c := range s.Commands {
			prefix := "       $ "
			if s.Manual {
				prefix = "       e.g. $ "
			}
			// A command longer than the line is continued with a backslash (the shell joins
			// the lines back), so it stays runnable as copied.
			fmt.Fprintf(w, "%s%s\n", prefix, continued(c, TerminalWidth-len(prefix), strings.Repeat(" ", len(prefix))))
		}
	}
}

// WriteWrapped writes text wrapped at width, continuation lines indented by indent.
func WriteWrapped(w io.Writer, text, indent string, width int) {
	line := text[:len(text)-len(strings.TrimLeft(text, " "))]
	empty := true
	for _, word := range strings.Fields(text) {
		if !empty && len(line)+1+len(word) > width {
			fmt.Fprintln(w, line)
			line, empty = indent, true
		}
		if !empty {
			line += " "
		}
		line, empty = line+word, false
	}
	if !empty {
		fmt.Fprintln(w, line)
	}
}

// shellWords splits a command at the spaces outside single quotes: a quoted argument holding
// spaces (a JSON patch whose values have spaces) is one word.
func shellWords(cmd string) []string {
	var out []string
	var b strings.Builder
	quoted := false
	for _, r := range cmd {
		switch {
		case r == '\'':
			quoted = !quoted
			b.WriteRune(r)
		case r == ' ' && !quoted:
			if b.Len() > 0 {
				out = append(out, b.String())
				b.Reset()
			}
		default:
			b.WriteRune(r)
		}
	}
	if b.Len() > 0 {
		out = append(out, b.String())
	}
	return out
}

// continued breaks a shell command longer than width at spaces, ending each broken line with
// " \" (the shell joins them back).
func continued(cmd string, width int, pad string) string {
	if utf8.RuneCountInString(cmd) <= width {
		return cmd
	}
	// Lines break only between words: a word cut by a backslash-newline is no longer the same
	// argument (inside quotes, a JSON patch, the shell keeps both), so a longer word stays whole.
	var lines []string
	line := ""
	for _, w := range shellWords(cmd) {
		switch {
		case line == "":
			line = w
		case utf8.RuneCountInString(line)+1+utf8.RuneCountInString(w) <= width-2:
			line += " " + w
		default:
			lines = append(lines, line)
			line = w
		}
	}
	lines = append(lines, line)
	return strings.Join(lines, " \\\n"+pad+"  ")
}
