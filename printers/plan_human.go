package printers

import (
	"fmt"
	"io"
	"strings"
	"unicode/utf8"

	"github.com/crdver/kubectl-crdver/ownership"
	"github.com/crdver/kubectl-crdver/plan"
)

// findingsShown is how many objects the default output lists per CRD (-o wide: all).
const findingsShown = 10

// changeShown is how many runes of a schema change (a CEL rule, a pattern) the default output
// shows; -o wide and json keep the whole text.
const changeShown = 80

// schemaChangesShown is how many schema changes other than lossy ones the default output
// lists per CRD (-o wide: all).
const schemaChangesShown = 20

// planPrinter prints a plan for people: within TerminalWidth columns by default (prose and the
// last column of each table wrapped, long CEL text shortened), everything whole with -o wide.
type planPrinter struct {
	w         io.Writer
	wide      bool
	noHeaders bool
	// wideListed names what shows everything ("-o wide").
	wideListed string
}

// printPlanReport prints a summary table, then each CRD's details: the verdict and its
// reasons, the objects with findings and the field managers, then the schema detail.
func printPlanReport(w io.Writer, r *plan.Report, h Human) error {
	wide, noHeaders := h.Wide, h.NoHeaders
	p := &planPrinter{w: w, wide: wide, noHeaders: noHeaders, wideListed: h.wide()}
	// The summary fits 120 columns for CRD names up to 56 characters: the storage change and
	// the schema changes by effect are in the details (and in -o wide).
	t := &Table{Header: []string{"crd", "verdict", "apply", "storage", "changes", "objects", "findings"}}
	for _, it := range r.Items {
		apply := "allowed"
		if !it.Apply.Allowed {
			apply = "rejected"
		}
		storage := it.StorageVersion.After
		changes := fmt.Sprint(len(it.SchemaChanges))
		if wide {
			if it.StorageVersion.Before != "" && it.StorageVersion.Before != it.StorageVersion.After {
				storage = it.StorageVersion.Before + " → " + it.StorageVersion.After
			}
			changes = changesText(it.SchemaChanges)
		}
		objects := fmt.Sprintf("%d/%s", it.Objects.Evaluated, countText(it.Objects.Total))
		t.Add(it.CRD, Dash(it.Verdict), apply, Dash(storage), changes, objects, fmt.Sprint(it.Objects.WithFindings()))
	}
	if err := t.Print(w, noHeaders); err != nil {
		return err
	}
	for i := range r.Items {
		fmt.Fprintln(w)
		if err := p.item(&r.Items[i]); err != nil {
			return err
		}
	}
	fmt.Fprintln(w)
	Runbook(w, "Runbook (the whole release, in this order):", r.Runbook)
	return nil
}

// changesText counts the schema changes by effect: "8 (2 lossy, 5 stricter)".
func changesText(cs []plan.SchemaChange) string {
	lossy, stricter := 0, 0
	for _, c := range cs {
		switch c.Effect {
		case plan.EffectLossy:
			lossy++
		case plan.EffectStricter:
			stricter++
		}
	}
	var parts []string
	if lossy > 0 {
		parts = append(parts, fmt.Sprintf("%d lossy", lossy))
	}
	if stricter > 0 {
		parts = append(parts, fmt.Sprintf("%d stricter", stricter))
	}
	if len(parts) == 0 {
		return fmt.Sprint(len(cs))
	}
	return fmt.Sprintf("%d (%s)", len(cs), strings.Join(parts, ", "))
}

func countText(n int64) string {
	if n < 0 {
		return "?"
	}
	return fmt.Sprint(n)
}

func dashList(s []string) string { return Dash(strings.Join(s, ", ")) }

// table is a table whose last column wraps at TerminalWidth minus the indent, except -o wide.
func (p *planPrinter) table(header ...string) *Table {
	t := &Table{Header: header}
	if !p.wide {
		t.MaxWidth = TerminalWidth - 4
	}
	return t
}

// line prints prefix+text wrapped at TerminalWidth, continuation lines indented under the
// text (-o wide: one line).
func (p *planPrinter) line(prefix, text string) {
	if p.wide {
		fmt.Fprintf(p.w, "%s%s\n", prefix, text)
		return
	}
	indent := utf8.RuneCountInString(prefix)
	width := max(TerminalWidth-indent, 40)
	fmt.Fprintf(p.w, "%s%s\n", prefix, strings.ReplaceAll(WrapWords(text, width), "\n", "\n"+strings.Repeat(" ", indent)))
}

// bullet prints "- text" under indent, wrapped.
func (p *planPrinter) bullet(indent int, text string) {
	p.line(strings.Repeat(" ", indent)+"- ", text)
}

// shorten keeps the first line and at most n runes of s, marking the cut with "…"
// (-o wide: s whole).
func (p *planPrinter) shorten(s string, n int) string {
	if p.wide {
		return s
	}
	cut := false
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s, cut = s[:i], true
	}
	if r := []rune(s); len(r) > n {
		s, cut = string(r[:n]), true
	}
	if cut {
		return strings.TrimRight(s, " ") + "…"
	}
	return s
}

func (p *planPrinter) item(it *plan.Item) error {
	w := p.w
	fmt.Fprintf(w, "%s (%s): %s\n", it.CRD, it.Operation, Dash(plan.VerdictText(it.Verdict)))

	if len(it.BreakingReasons) > 0 {
		fmt.Fprintln(w, "  Breaking:")
		for _, r := range it.BreakingReasons {
			p.bullet(4, r)
		}
	}
	if len(it.UnknownReasons) > 0 {
		fmt.Fprintln(w, "  Unknown (taken as breaking):")
		for _, r := range it.UnknownReasons {
			p.bullet(4, r)
		}
	}
	if len(it.InvalidOnRecreateReasons) > 0 {
		fmt.Fprintln(w, "  Invalid on re-create (for you to fix; not breaking by itself: their writes are accepted):")
		for _, r := range it.InvalidOnRecreateReasons {
			p.bullet(4, r)
		}
	}
	if len(it.Stricter) > 0 {
		lossy := 0
		for _, c := range it.Stricter {
			if c.Effect == plan.EffectLossy {
				lossy++
			}
		}
		text := fmt.Sprintf("%s hold new objects and changes to stricter rules or other defaults", Plural(len(it.Stricter)-lossy, "schema change"))
		if lossy > 0 {
			text += fmt.Sprintf("; %s drop fields", Plural(lossy, "change"))
		}
		if it.Verdict == plan.VerdictStricter {
			text += "; no live object violates them"
		}
		p.line("  Stricter: ", text+" (schema changes below)")
	}
	if it.Apply.Allowed {
		fmt.Fprintln(w, "  Apply: allowed")
	} else {
		fmt.Fprintln(w, "  Apply: rejected by the API server:")
		for _, e := range it.Apply.Errors {
			p.line("    ", e)
		}
	}
	for _, wn := range it.Apply.Warnings {
		p.line("    warning: ", wn)
	}
	if it.Operation == plan.OperationUpdate {
		p.line("  Versions: ", fmt.Sprintf("added %s; removed %s; unserved %s; deprecated %s",
			dashList(it.Versions.Added), dashList(it.Versions.Removed), dashList(it.Versions.Unserved), dashList(it.Versions.Deprecated)))
	}
	storage := it.StorageVersion.After
	switch it.StorageVersion.Before {
	case "":
	case it.StorageVersion.After:
		storage += " (unchanged)"
	default:
		storage = it.StorageVersion.Before + " → " + it.StorageVersion.After
	}
	pending := "no migration pending"
	switch {
	case it.MigrationPending && it.MigrationObjects == 0 && it.Objects.Total < 0:
		pending = "migration pending; objects not counted"
	case it.MigrationPending:
		pending = "migration pending for " + Plural(int(it.MigrationObjects), "object")
	}
	p.line("  Storage: ", fmt.Sprintf("%s; storedVersions after the apply: %s (%s)", storage, dashList(it.StoredVersionsAfterApply), pending))
	if len(it.Conversion) > 0 {
		p.line("  Conversion: ", strings.Join(it.Conversion, "; "))
	}
	if err := p.conversionCheck(it); err != nil {
		return err
	}
	if err := p.objects(it); err != nil {
		return err
	}
	if err := p.managers(it); err != nil {
		return err
	}
	if err := p.schemaChanges(it); err != nil {
		return err
	}
	for _, n := range it.Notes {
		p.line("  note: ", n)
	}
	return nil
}

func (p *planPrinter) objects(it *plan.Item) error {
	w := p.w
	if it.Operation == plan.OperationUpdate {
		at := ""
		if it.Objects.ReadVersion != "" {
			at = " at " + it.Objects.ReadVersion
		}
		fmt.Fprintf(w, "  Objects: %d of %s evaluated%s, %d with findings\n", it.Objects.Evaluated, countText(it.Objects.Total), at, it.Objects.WithFindings())
		for _, n := range it.Objects.Notes {
			p.line("    note: ", n)
		}
	}
	if len(it.Objects.Findings) == 0 {
		return nil
	}
	shown := it.Objects.Findings
	if !p.wide && len(shown) > findingsShown {
		shown = shown[:findingsShown]
	}
	t := p.table("namespace", "name", "re-create", "no-op update", "defaulted on read", "pruned on read")
	for _, f := range shown {
		pruned := dashList(f.PrunedOnRead)
		if len(f.PossiblyPrunedOnRead) > 0 {
			pruned = strings.TrimPrefix(pruned+" ", "- ") + "(depending on the encoding: " + strings.Join(f.PossiblyPrunedOnRead, ", ") + ")"
		}
		defaulted := dashList(f.DefaultedOnRead)
		if !p.wide {
			defaulted = WrapWords(defaulted, 30)
		}
		t.Add(Dash(f.Namespace), f.Name, okOrRejected(f.CreateErrors), okOrRejected(f.UpdateErrors), defaulted, pruned)
	}
	if err := printIndented(w, t, p.noHeaders); err != nil {
		return err
	}
	// Messages: each object's errors (default: the first of each kind); warnings of the no-op
	// update once each, with the number of objects they came from.
	type warning struct {
		text    string
		objects []string
	}
	var warnings []*warning
	byText := map[string]*warning{}
	for _, f := range shown {
		name := f.Name
		if f.Namespace != "" {
			name = f.Namespace + "/" + name
		}
		for _, m := range firstUnlessWide(f.CreateErrors, p.wide) {
			p.line("    ", fmt.Sprintf("%s: re-create: %s", name, p.shorten(m, 2*changeShown)))
		}
		for _, m := range firstUnlessWide(f.UpdateErrors, p.wide) {
			p.line("    ", fmt.Sprintf("%s: update: %s", name, p.shorten(m, 2*changeShown)))
		}
		for _, m := range f.TypeMismatches {
			p.line("    ", fmt.Sprintf("%s: type: %s is %s, %s expects %s (server-side apply fails: %s)", name, m.Path, m.ValueType, it.Objects.ReadVersion, m.Expected, p.shorten(m.Error, 2*changeShown)))
		}
		for _, m := range f.UpdateWarnings {
			wn := byText[m]
			if wn == nil {
				wn = &warning{text: m}
				byText[m] = wn
				warnings = append(warnings, wn)
			}
			wn.objects = append(wn.objects, name)
		}
		for _, m := range f.Notes {
			p.line("    ", fmt.Sprintf("%s: note: %s", name, m))
		}
	}
	for _, wn := range warnings {
		who := wn.objects[0]
		if len(wn.objects) > 1 {
			who = fmt.Sprintf("%s (%s, …)", Plural(len(wn.objects), "object"), wn.objects[0])
			if p.wide {
				who = fmt.Sprintf("%s (%s)", Plural(len(wn.objects), "object"), strings.Join(wn.objects, ", "))
			}
		}
		p.line("    ", fmt.Sprintf("%s: update warning: %s", who, p.shorten(wn.text, 2*changeShown)))
	}
	if len(shown) < len(it.Objects.Findings) {
		p.line("    ", fmt.Sprintf("… and %s more (%s lists every object and every message)", Plural(len(it.Objects.Findings)-len(shown), "object"), p.wideListed))
	}
	if it.Objects.Omitted > 0 {
		p.line("    ", fmt.Sprintf("… and %s more not listed (a plan lists the first %s with findings; the verdict and the counts are of all)", Plural(int(it.Objects.Omitted), "object"), Plural(len(it.Objects.Findings), "object")))
	}
	return nil
}

func firstUnlessWide(msgs []string, wide bool) []string {
	if !wide && len(msgs) > 1 {
		return msgs[:1]
	}
	return msgs
}

func (p *planPrinter) managers(it *plan.Item) error {
	if len(it.ManagedFields) == 0 {
		return nil
	}
	fmt.Fprintln(p.w, "  Field managers:")
	t := p.table("version", "manager", "role", "objects", "last write", "after the apply")
	for _, m := range it.ManagedFields {
		writers := m.Writers
		if len(writers) == 0 { // a report from before writers were recorded
			for _, name := range m.Managers {
				writers = append(writers, plan.ManagerWriter{Writer: ownership.Writer{Manager: name, Objects: m.Objects}})
			}
		}
		for _, wr := range writers {
			after := "ok"
			switch {
			case m.RemovedByThisChange:
				after = "removed: server-side apply fails on these objects"
			case m.UnservedByThisChange:
				after = "no longer served"
			}
			if wr.Role == ownership.RoleOneTime && (m.RemovedByThisChange || m.UnservedByThisChange) {
				after += "; written once, nothing to change in " + wr.Manager
			}
			if wr.Advice != "" {
				after += "; " + wr.Advice
			}
			name := wr.Manager
			if wr.Subresource != "" {
				name += " (/" + wr.Subresource + ")"
			}
			last := "-"
			if wr.LastWrite != nil {
				last = wr.LastWrite.UTC().Format("2006-01-02")
			}
			t.Add(m.Version, name, Dash(string(wr.Role)), fmt.Sprint(wr.Objects), last, after)
		}
	}
	return printIndented(p.w, t, p.noHeaders)
}

func (p *planPrinter) schemaChanges(it *plan.Item) error {
	if len(it.SchemaChanges) == 0 {
		if it.Operation == plan.OperationUpdate {
			fmt.Fprintln(p.w, "  Schema changes: none")
		}
		return nil
	}
	fmt.Fprintln(p.w, "  Schema changes:")
	t := p.table("version", "path", "effect", "change")
	// The default shows every lossy change and the first of the others; -o wide all.
	others, hidden := 0, 0
	for _, c := range it.SchemaChanges {
		if !p.wide && c.Effect != plan.EffectLossy {
			if others++; others > schemaChangesShown {
				hidden++
				continue
			}
		}
		v := c.Versions()
		path := Dash(c.Path)
		if !p.wide {
			path = wrapPath(path, 48)
		}
		t.Add(v, path, Dash(c.Effect), p.shorten(c.Change, changeShown))
	}
	if err := printIndented(p.w, t, p.noHeaders); err != nil {
		return err
	}
	if hidden > 0 {
		p.line("    ", fmt.Sprintf("… and %d more (%s lists every schema change)", hidden, p.wideListed))
	}
	return nil
}

// wrapPath breaks a dotted path into lines of at most width runes after a dot (a segment
// longer than a line is cut).
func wrapPath(path string, width int) string {
	if utf8.RuneCountInString(path) <= width {
		return path
	}
	segs := strings.SplitAfter(path, ".")
	var lines []string
	line := ""
	for _, s := range segs {
		if line != "" && utf8.RuneCountInString(line)+utf8.RuneCountInString(s) > width {
			lines = append(lines, line)
			line = ""
		}
		line += s
	}
	if line != "" {
		lines = append(lines, line)
	}
	return WrapWords(strings.Join(lines, " "), width)
}

func okOrRejected(errs []string) string {
	if len(errs) > 0 {
		return "rejected"
	}
	return "ok"
}

// printIndented prints a table indented by four spaces.
func printIndented(w io.Writer, t *Table, noHeaders bool) error {
	var b strings.Builder
	if err := t.Print(&b, noHeaders); err != nil {
		return err
	}
	lines := strings.Split(strings.TrimRight(b.String(), "\n"), "\n")
	for _, l := range lines {
		if _, err := fmt.Fprintf(w, "    %s\n", l); err != nil {
			return err
		}
	}
	return nil
}
