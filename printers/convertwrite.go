package printers

// convertwrite.go: the report of `convert --write`, `--write --dry-run` and `--check`, for
// people (a table per file, then the reasons and diffs) and as Markdown (a pull request
// comment or a CI summary).

import (
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/crdver/kubectl-crdver/convert"
)

// printWriteReport prints a whole report as ConvertWriteStream prints it a file at a time.
func printWriteReport(w io.Writer, r *convert.WriteReport, noHeaders bool) error {
	s := &ConvertWriteStream{w: w, human: &Human{NoHeaders: noHeaders}}
	for _, f := range r.Files {
		if err := s.widenFile(f); err != nil { // every file's rows known: one table's widths
			return err
		}
	}
	for _, f := range r.Files {
		if err := s.File(r, f); err != nil {
			return err
		}
	}
	cp := *r
	cp.Files = nil
	return s.Finish(&cp)
}

// ConvertWriteStream prints the report of `convert --write`, `--dry-run` and `--check` as the
// files are done (convert.WriteOptions.File): for people, what the objects are checked as,
// then each file's objects (one table per file, under one header), its reasons, problems and
// diff, and the counts once the run is over; as data, the files list item by item, then the
// rest of the report. Memory holds one object's result (a file's are read back from its
// spill: convert.FileResult.EachObject, WriteDiff, WriteJSON, WriteYAML).
// Another printer (Markdown: a table of the files' objects, under a title with the counts)
// gets the whole report at Finish, its files kept without their diffs.
type ConvertWriteStream struct {
	w     io.Writer
	p     ReportPrinter
	human *Human
	list  *listStream
	head  bool
	rows  bool
	kept  []convert.FileResult
	// widths are the widest cells of each column so far: later files' rows are as wide.
	widths []int
}

// NewConvertWriteStream prints to w as p does.
func NewConvertWriteStream(w io.Writer, p ReportPrinter) *ConvertWriteStream {
	s := &ConvertWriteStream{w: w, p: p}
	switch p := p.(type) {
	case Data:
		s.list = &listStream{w: w, yaml: p.YAML, key: "files"}
	case Human:
		s.human = &p
	}
	return s
}

// File prints one file's result (convert.WriteOptions.File's signature); r is the report so
// far.
func (s *ConvertWriteStream) File(r *convert.WriteReport, f convert.FileResult) error {
	switch {
	case s.list != nil:
		return s.list.Item(f)
	case s.human == nil:
		k, err := f.Loaded()
		k.Diff = ""
		s.kept = append(s.kept, k)
		return err
	}
	if err := s.printHead(r); err != nil {
		return err
	}
	if err := s.widenFile(f); err != nil {
		return err
	}
	// The rows a chunk at a time, each as wide as the widest of the files so far (one table
	// to the eye); the header once.
	t := &Table{Header: writeHeader()}
	flush := func() error {
		if len(t.Rows) == 0 {
			return nil
		}
		err := t.Print(s.w, s.human.NoHeaders || s.rows)
		s.rows, t.Rows = true, t.Rows[:0]
		return err
	}
	err := eachWriteRow(f, func(r []string) error {
		for i := range len(r) - 1 {
			r[i] += strings.Repeat(" ", s.widths[i]-DisplayWidth(r[i]))
		}
		t.Add(r...)
		if len(t.Rows) < 1000 {
			return nil
		}
		return flush()
	})
	if err == nil {
		err = flush()
	}
	if err == nil {
		err = writeFileDetails(s.w, f)
	}
	if err == nil {
		err = f.WriteDiff(s.w) // as it is read back: the diff of a large file is large
	}
	return err
}

func writeHeader() []string {
	return []string{"file", "line", "kind", "object", "from", "to", "status"}
}

// eachWriteRow gives fn a file's rows: one per object, or the file's status alone.
func eachWriteRow(f convert.FileResult, fn func([]string) error) error {
	if f.Len() == 0 {
		return fn([]string{f.Path, "-", "-", "-", "-", "-", f.Status})
	}
	return f.EachObject(func(o convert.ObjectResult) error {
		from := o.From
		if o.Served != convert.VersionServed {
			from += " (" + o.Served + ")"
		}
		return fn([]string{f.Path, fmt.Sprint(o.Line), o.Kind, o.Name, from, o.To, f.Status})
	})
}

// widenFile keeps the widest cell of each column so far (the header's first), f's rows
// included.
func (s *ConvertWriteStream) widenFile(f convert.FileResult) error {
	if s.widths == nil {
		s.widths = make([]int, len(writeHeader()))
		for i, h := range writeHeader() {
			s.widths[i] = DisplayWidth(h)
		}
	}
	return eachWriteRow(f, func(r []string) error {
		for i, c := range r {
			s.widths[i] = max(s.widths[i], DisplayWidth(c))
		}
		return nil
	})
}

// printHead prints what each converted object is checked as (known before the first file).
func (s *ConvertWriteStream) printHead(r *convert.WriteReport) error {
	if s.head {
		return nil
	}
	s.head = true
	if r.KubeVersion == "" {
		return nil
	}
	_, err := fmt.Fprintf(s.w, "each converted object is checked on the API server's create path at its target version, as Kubernetes %s\n", r.KubeVersion)
	return err
}

// Finish prints the rest of the report r, whose files were given to File (r.Files, if any,
// are printed too).
func (s *ConvertWriteStream) Finish(r *convert.WriteReport) error {
	if len(r.Files) > 0 {
		for _, f := range r.Files {
			if err := s.File(r, f); err != nil {
				return err
			}
		}
		cp := *r
		cp.Files = nil
		r = &cp
	}
	switch {
	case s.list != nil:
		return s.list.Finish(r)
	case s.human == nil:
		cp := *r
		cp.Files = s.kept
		return s.p.PrintReport(s.w, ConvertWrite(&cp))
	}
	if err := s.printHead(r); err != nil {
		return err
	}
	to := writeTargetText(r)
	verb := map[string]string{"write": "converted", "dry-run": "to convert (dry run: nothing written)", "check": "still at a version other than " + to}[r.Mode]
	_, err := fmt.Fprintf(s.w, "%s: %d object(s) in the files, %d already at %s, %d %s\n", r.CRD, r.Objects, r.AtTarget, to, r.Converted, verb)
	return err
}

// writeFileDetails writes a file's reason, the lines of a template, each object's problems,
// dropped comments, warnings, what the round trip added and what was dropped.
func writeFileDetails(w io.Writer, f convert.FileResult) error {
	var b strings.Builder
	if f.Reason != "" {
		fmt.Fprintf(&b, "%s: %s: %s\n", f.Path, f.Status, f.Reason)
	}
	for _, l := range f.Lines {
		fmt.Fprintf(&b, "  %s:%s\n", f.Path, l)
	}
	if _, err := io.WriteString(w, b.String()); err != nil {
		return err
	}
	return f.EachObject(func(o convert.ObjectResult) error {
		b.Reset()
		for _, p := range o.Problems {
			where := p.Check
			if p.Path != "" {
				where += " " + p.Path
			}
			fmt.Fprintf(&b, "%s:%d %s: %s: %s\n", f.Path, o.Line, o.Name, where, p.Detail)
		}
		for _, c := range o.DroppedComments {
			fmt.Fprintf(&b, "%s:%d %s: comment dropped with its field (the conversion removed it): %s\n", f.Path, o.Line, o.Name, c)
		}
		for _, p := range o.Warnings {
			where := p.Check
			if p.Path != "" {
				where += " " + p.Path
			}
			fmt.Fprintf(&b, "%s:%d %s: warning %s: %s\n", f.Path, o.Line, o.Name, where, p.Detail)
		}
		var parts, defaults []string
		for _, c := range o.Added {
			switch {
			case c.Kind != convert.DiffDefaultDropped:
				parts = append(parts, c.Path+" "+c.Detail)
			case !slices.Contains(defaults, c.Path):
				defaults = append(defaults, c.Path)
			}
		}
		if len(parts) > 0 {
			fmt.Fprintf(&b, "%s:%d %s: the round trip adds or normalises (not a loss): %s\n", f.Path, o.Line, o.Name, strings.Join(parts, "; "))
		}
		if len(defaults) > 0 {
			fmt.Fprintf(&b, "%s:%d %s: %s does not have %s, which the file does not set (only %s's default put it there): not a loss\n", f.Path, o.Line, o.Name, o.To, strings.Join(defaults, ", "), o.From)
		}
		for _, p := range o.Dropped {
			fmt.Fprintf(&b, "%s:%d %s: dropped (--allow-data-loss) %s: %s\n", f.Path, o.Line, o.Name, p.Path, p.Detail)
		}
		if b.Len() == 0 {
			return nil
		}
		_, err := io.WriteString(w, b.String())
		return err
	})
}

// writeTargetText is the target version of a report: --to, the one CRD's storage version,
// or "each CRD's storage version".
func writeTargetText(r *convert.WriteReport) string {
	switch {
	case r.To != "":
		return r.To
	case len(r.Targets) == 1:
		return r.Targets[0].To
	}
	return "each CRD's storage version"
}

// ConvertWriteMarkdown is the report as Markdown.
func ConvertWriteMarkdown(r *convert.WriteReport) string {
	var b strings.Builder
	to := writeTargetText(r)
	if len(r.Targets) == 1 || r.To != "" {
		to = "`" + to + "`"
	}
	title := map[string]string{"write": "converted", "dry-run": "to convert", "check": "still at a version other than " + to}[r.Mode]
	fmt.Fprintf(&b, "### %s: %d object(s) %s\n\n", r.CRD, r.Converted, title)
	if len(r.Files) == 0 {
		fmt.Fprintf(&b, "Every object of %s in the files is at %s (%d).\n", r.CRD, to, r.AtTarget)
		return b.String()
	}
	b.WriteString("| File | Line | Kind | Object | From | To | Status |\n|---|---|---|---|---|---|---|\n")
	cell := func(s string) string { return strings.ReplaceAll(s, "|", `\|`) }
	for _, f := range r.Files {
		if len(f.Objects) == 0 {
			fmt.Fprintf(&b, "| `%s` | | | | | | %s |\n", cell(f.Path), cell(f.Status))
		}
		for _, o := range f.Objects {
			from := "`" + o.From + "`"
			if o.Served != convert.VersionServed {
				from += " (" + o.Served + ")"
			}
			fmt.Fprintf(&b, "| `%s` | %d | %s | `%s` | %s | `%s` | %s |\n", cell(f.Path), o.Line, o.Kind, cell(o.Name), from, o.To, cell(f.Status))
		}
	}
	return b.String()
}
