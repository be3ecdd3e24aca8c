package printers

import (
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/crdver/kubectl-crdver/crdschema"
	"github.com/crdver/kubectl-crdver/explain"
)

func printExplanation(w io.Writer, e *explain.Explanation, noHeaders bool) error {
	var b strings.Builder
	var flags []string
	if e.Served {
		flags = append(flags, "served")
	} else {
		flags = append(flags, "not served")
	}
	if e.Storage {
		flags = append(flags, "storage")
	}
	fmt.Fprintf(&b, "CRD:         %s\n", e.CRD)
	fmt.Fprintf(&b, "VERSION:     %s (%s)\n", e.Version, strings.Join(flags, ", "))
	var violations []crdschema.Violation
	for _, v := range e.Structural.Versions {
		violations = append(violations, v.Violations...)
	}
	sortViolations(violations)
	pruneNote := ""
	if e.Structural.PreserveUnknownFields {
		pruneNote = " (spec.preserveUnknownFields: true — must be false: nothing is pruned)"
	}
	switch {
	case e.Structural.Structural:
		fmt.Fprintf(&b, "STRUCTURAL:  yes\n")
	case len(violations) == 0:
		fmt.Fprintf(&b, "STRUCTURAL:  no%s\n", pruneNote)
	default:
		fmt.Fprintf(&b, "STRUCTURAL:  no, %s%s: the API server neither prunes nor defaults, and apiextensions.k8s.io/v1 refuses the CRD\n",
			Plural(len(violations), "violation"), pruneNote)
	}
	if _, err := io.WriteString(w, b.String()); err != nil {
		return err
	}
	if err := PrintViolations(w, violations, noHeaders); err != nil {
		return err
	}
	b.Reset()
	f := e.Field
	path := f.Path
	if path == "" {
		path = "<root>"
	}
	fmt.Fprintf(&b, "\nFIELD:       %s <%s>%s\n", path, f.Type, requiredMark(f.Required))
	if f.Description != "" {
		fmt.Fprintf(&b, "DESCRIPTION: %s\n", IndentWrap(oneLine(f.Description, 200), TerminalWidth-13, 13))
	}
	if len(f.Default) > 0 {
		fmt.Fprintf(&b, "DEFAULT:     %s\n", f.Default)
	}
	if c := f.Constraints(); c != "" {
		fmt.Fprintf(&b, "CONSTRAINTS: %s\n", c)
	}
	b.WriteString("\n")
	if _, err := io.WriteString(w, b.String()); err != nil {
		return err
	}
	if len(f.Fields) > 0 {
		t := &Table{Header: []string{"field", "type", "required", "default", "constraints"}, MaxWidth: TerminalWidth}
		root := &f
		root.Walk(func(n *explain.Field, depth int) {
			if n == root {
				return
			}
			name := strings.Repeat("  ", depth-1) + n.Name
			t.Add(name, n.Type, YesNo(n.Required), abbreviate(Dash(string(n.Default)), 32), Dash(n.Constraints()))
		})
		if err := t.Print(w, noHeaders); err != nil {
			return err
		}
	}
	// CEL rules of the field and of everything shown.
	var lines []string
	e.Field.Walk(func(n *explain.Field, _ int) {
		for _, r := range n.Rules {
			where := n.Path
			if where == "" {
				where = "<root>"
			}
			rule := fmt.Sprintf("%s: %s", where, r.Rule)
			if r.Transition {
				rule += " (transition rule: checked on update)"
			}
			// long rules and messages wrap at 120 columns (-o json|yaml has them whole)
			line := "  " + IndentWrap(rule, TerminalWidth-6, 6)
			switch {
			case r.MessageExpression != "":
				line += "\n      " + IndentWrap("messageExpression: "+r.MessageExpression, TerminalWidth-6, 6)
			case r.Message != "":
				line += "\n      " + IndentWrap("message: "+r.Message, TerminalWidth-6, 6)
			}
			if r.FieldPath != "" {
				line += "\n      fieldPath: " + r.FieldPath
			}
			if r.Reason != "" {
				line += "\n      reason: " + r.Reason
			}
			lines = append(lines, line)
		}
	})
	if len(lines) > 0 {
		if _, err := fmt.Fprintf(w, "\nCEL RULES:\n%s\n", strings.Join(lines, "\n")); err != nil {
			return err
		}
	}
	return nil
}

func requiredMark(required bool) string {
	if required {
		return " required"
	}
	return ""
}

func oneLine(s string, max int) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > max {
		s = s[:max-3] + "..."
	}
	return s
}

func printCompare(w io.Writer, d *explain.SchemaDiff, noHeaders bool) error {
	if _, err := fmt.Fprintf(w, "COMPARE:     %s %s -> %s (conversion strategy %s)\n\n", d.CRD, d.From, d.To, d.ConversionStrategy); err != nil {
		return err
	}
	t := &Table{Header: []string{"change", "field", d.From, d.To}}
	for _, c := range d.Added {
		t.Add("added", c.Path, "-", c.To)
	}
	for _, c := range d.Removed {
		t.Add("removed", c.Path, c.From, "-")
	}
	for _, c := range d.Retyped {
		t.Add("retyped", c.Path, c.From, c.To)
	}
	for _, c := range d.DefaultsChanged {
		t.Add("default", c.Path, c.From, c.To)
	}
	for _, c := range d.ValidationChanged {
		t.Add("validation", c.Path, c.From, c.To)
	}
	if len(t.Rows) == 0 {
		if _, err := fmt.Fprintln(w, "The two schemas are the same."); err != nil {
			return err
		}
	} else if err := t.Print(w, noHeaders); err != nil {
		return err
	}
	pruned := func(from, to string, paths []string) error {
		if len(paths) == 0 {
			_, err := fmt.Fprintf(w, "\nReading %s objects as %s prunes nothing.\n", from, to)
			return err
		}
		_, err := fmt.Fprintf(w, "\nReading %s objects as %s prunes (conversion strategy None):\n  %s\n", from, to, strings.Join(paths, "\n  "))
		return err
	}
	if err := pruned(d.From, d.To, d.PrunedFromTo); err != nil {
		return err
	}
	if err := pruned(d.To, d.From, d.PrunedToFrom); err != nil {
		return err
	}
	for _, n := range d.Notes {
		if _, err := fmt.Fprintf(w, "note: %s\n", n); err != nil {
			return err
		}
	}
	return nil
}

// sortViolations orders violations by rule (1 to 4, then the others), then by field.
func sortViolations(violations []crdschema.Violation) {
	rank := func(r int) int {
		if r == 0 {
			return 5 // "other" last
		}
		return r
	}
	sort.SliceStable(violations, func(i, j int) bool {
		if ri, rj := rank(violations[i].Rule), rank(violations[j].Rule); ri != rj {
			return ri < rj
		}
		return violations[i].Field < violations[j].Field
	})
}

// PrintViolations prints structural-schema violations as a table, then the rules they break.
func PrintViolations(w io.Writer, violations []crdschema.Violation, noHeaders bool) error {
	if len(violations) == 0 {
		return nil
	}
	sortViolations(violations)
	t := &Table{Header: []string{"rule", "field", "problem"}}
	rules := map[int]bool{}
	for _, v := range violations {
		rule := "other"
		if v.Rule > 0 {
			rule = fmt.Sprint(v.Rule)
		}
		rules[v.Rule] = true
		t.Add(rule, v.Field, v.Message)
	}
	if err := t.Print(w, noHeaders); err != nil {
		return err
	}
	for r := 1; r <= 5; r++ {
		if rules[r%5] {
			if _, err := fmt.Fprintf(w, "  %s\n", crdschema.RuleTexts[r%5]); err != nil {
				return err
			}
		}
	}
	return nil
}

// IndentWrap wraps s at width columns; lines after the first are indented by indent spaces and
// are width-indent+... wide so that every line fits in the first line's width plus its prefix.
func IndentWrap(s string, width, indent int) string {
	if width < 30 {
		return s
	}
	return strings.ReplaceAll(WrapWords(s, width), "\n", "\n"+strings.Repeat(" ", indent))
}

func printMetadataExplanation(w io.Writer, e *explain.MetadataExplanation, noHeaders bool) error {
	if _, err := fmt.Fprintf(w, "CRD:         %s\nVERSION:     %s\nFIELD:       metadata <object>\nNOTE:        %s\n\n", e.CRD, e.Version, e.Note); err != nil {
		return err
	}
	t := &Table{Header: []string{"FIELD", "TYPE", "DESCRIPTION"}}
	for _, f := range e.Fields {
		t.Add(f.Name, f.Type, abbreviate(f.Description, 64))
	}
	return t.Print(w, noHeaders)
}

// abbreviate shortens s to at most n characters, ending with "…" when it was cut.
func abbreviate(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}
