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

func printWriteReport(w io.Writer, r *convert.WriteReport, noHeaders bool) error {
	t := &Table{Header: []string{"file", "line", "kind", "object", "from", "to", "status"}}
	for _, f := range r.Files {
		if len(f.Objects) == 0 {
			t.Add(f.Path, "-", "-", "-", "-", "-", f.Status)
			continue
		}
		for _, o := range f.Objects {
			from := o.From
			if o.Served != convert.VersionServed {
				from += " (" + o.Served + ")"
			}
			t.Add(f.Path, fmt.Sprint(o.Line), o.Kind, o.Name, from, o.To, f.Status)
		}
	}
	var b strings.Builder
	to := writeTargetText(r)
	verb := map[string]string{"write": "converted", "dry-run": "to convert (dry run: nothing written)", "check": "still at a version other than " + to}[r.Mode]
	fmt.Fprintf(&b, "%s: %d object(s) in the files, %d already at %s, %d %s\n", r.CRD, r.Objects, r.AtTarget, to, r.Converted, verb)
	if r.KubeVersion != "" {
		fmt.Fprintf(&b, "each converted object is checked on the API server's create path at its target version, as Kubernetes %s\n", r.KubeVersion)
	}
	if _, err := io.WriteString(w, b.String()); err != nil {
		return err
	}
	if len(t.Rows) > 0 {
		if err := t.Print(w, noHeaders); err != nil {
			return err
		}
	}
	b.Reset()
	for _, f := range r.Files {
		if f.Reason != "" {
			fmt.Fprintf(&b, "%s: %s: %s\n", f.Path, f.Status, f.Reason)
		}
		for _, l := range f.Lines {
			fmt.Fprintf(&b, "  %s:%s\n", f.Path, l)
		}
		for _, o := range f.Objects {
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
		}
		if f.Diff != "" {
			b.WriteString(f.Diff)
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
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
