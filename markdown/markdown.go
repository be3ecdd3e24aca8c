// Package markdown prints reports as a pull request comment (what `-o markdown` prints for
// plan, doctor and versions --all): the verdict first, then what a reviewer must read, the rest
// collapsed in <details>, the whole within a GitHub comment's size limit (the lines past it are
// cut, and counted). Plan findings are printed from the report's own fields, so a kind of
// finding added to package plan is printed without a change here.
package markdown

import (
	"fmt"
	"html"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"unicode"

	"github.com/crdver/kubectl-crdver/doctor"
	"github.com/crdver/kubectl-crdver/explain"
	"github.com/crdver/kubectl-crdver/plan"
)

// Limit is a GitHub comment's size limit (65,536 characters; counted here in bytes, which is
// never less).
const Limit = 65536

// Plan is the comment for a plan report, at most limit bytes (0: Limit).
func Plan(r *plan.Report, limit int) string {
	m := newDoc(limit)
	markdownPlan(m, r)
	return m.String()
}

// Doctor is the comment for a doctor report, at most limit bytes (0: Limit).
func Doctor(r *doctor.Report, limit int) string {
	m := newDoc(limit)
	markdownDoctor(m, r)
	return m.String()
}

// Versions is the comment for the versions of every CRD (versions --all), at most limit bytes
// (0: Limit).
func Versions(items []explain.Summary, limit int) string {
	m := newDoc(limit)
	markdownVersions(m, items)
	return m.String()
}

func newDoc(limit int) *mdDoc {
	if limit <= 0 {
		limit = Limit
	}
	return &mdDoc{limit: limit}
}

// mdDoc is a Markdown document with a size cap: Must lines are always written (the verdict);
// the others are written while they fit, keeping room for the closing tags of the open
// <details> and the note on what was cut.
type mdDoc struct {
	b     strings.Builder
	limit int
	// closing is what the open sections still need (</details> lines).
	closing int
	cut     int
}

// mdReserve is the room kept for the note on what was cut.
const mdReserve = 400

func (m *mdDoc) Must(format string, args ...any) { fmt.Fprintf(&m.b, format+"\n", args...) }

// Line writes a line if it fits; else counts it as cut. It reports whether it was written.
func (m *mdDoc) Line(format string, args ...any) bool {
	s := fmt.Sprintf(format, args...) + "\n"
	if m.cut > 0 || m.b.Len()+len(s)+m.closing+mdReserve > m.limit {
		m.cut++
		return false
	}
	m.b.WriteString(s)
	return true
}

// Open starts a collapsed section (nothing when it does not fit: its lines are then cut).
func (m *mdDoc) Open(summary string) bool {
	if !m.Line("<details><summary>%s</summary>\n", summary) {
		return false
	}
	m.closing += len("</details>\n\n")
	return true
}

func (m *mdDoc) Close(opened bool) {
	if opened {
		m.closing -= len("</details>\n\n")
		m.b.WriteString("\n</details>\n\n")
	}
}

func (m *mdDoc) String() string {
	if m.cut > 0 {
		fmt.Fprintf(&m.b, "\n_%s cut to keep this comment within GitHub's %s-character limit; the JSON output has the complete report._\n",
			plural(m.cut, "line"), groupThousands(m.limit))
	}
	return m.b.String()
}

func groupThousands(n int) string {
	s := strconv.Itoa(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// mdCell makes s safe in a table cell: pipes escaped, lines joined with <br>.
func mdCell(s string) string {
	s = strings.ReplaceAll(s, "|", `\|`)
	return strings.ReplaceAll(strings.TrimSpace(s), "\n", "<br>")
}

// mdCode is s in backticks (a path, a command), safe in a table cell.
func mdCode(s string) string {
	if s == "" {
		return ""
	}
	return "`" + strings.ReplaceAll(s, "`", "'") + "`"
}

// mdFix is a fix as a command (in backticks) or, when it is a step for a person, as text.
func mdFix(s string) string {
	if strings.HasPrefix(s, "kubectl ") {
		return mdCode(s)
	}
	return mdCell(s)
}

// mdHTMLCode is s as <code> (inside HTML such as <summary>, where backticks are not read).
func mdHTMLCode(s string) string {
	return "<code>" + html.EscapeString(s) + "</code>"
}

// words turns a JSON key into words: breakingReasons → "breaking reasons".
func words(key string) string {
	var b strings.Builder
	for i, r := range key {
		if unicode.IsUpper(r) {
			if i > 0 {
				b.WriteByte(' ')
			}
			r = unicode.ToLower(r)
		}
		b.WriteRune(r)
	}
	// The one compound the plan's own words hyphenate ("invalid on re-create").
	return strings.ReplaceAll(b.String(), "recreate", "re-create")
}

// stringLists are the []string (or []named-string) fields of the struct v, in declaration
// order, by JSON key, for the keys keep accepts: how the printer reads a report's findings
// without naming their kinds, so that a kind added to the report needs no change here.
func stringLists(v any, keep func(key string) bool) (keys []string, values map[string][]string) {
	values = map[string][]string{}
	rv := reflect.Indirect(reflect.ValueOf(v))
	rt := rv.Type()
	for i := 0; i < rt.NumField(); i++ {
		f := rt.Field(i)
		key, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if !f.IsExported() || key == "" || key == "-" || f.Type.Kind() != reflect.Slice || f.Type.Elem().Kind() != reflect.String || !keep(key) {
			continue
		}
		fv := rv.Field(i)
		if fv.Len() == 0 {
			continue
		}
		for j := 0; j < fv.Len(); j++ {
			values[key] = append(values[key], fv.Index(j).String())
		}
		keys = append(keys, key)
	}
	return keys, values
}

// counts are the non-zero int fields of the struct v but skip, as "1 breaking, 2 safe".
func counts(v any, skip ...string) string {
	rv := reflect.Indirect(reflect.ValueOf(v))
	var parts []string
	for i := 0; i < rv.NumField(); i++ {
		f := rv.Type().Field(i)
		key, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if f.Type.Kind() != reflect.Int || slices.Contains(skip, key) || rv.Field(i).Int() == 0 {
			continue
		}
		parts = append(parts, fmt.Sprintf("%d %s", rv.Field(i).Int(), words(key)))
	}
	return strings.Join(parts, ", ")
}

// markdownPlan: the verdict, a table of the CRDs, what breaks (or is unknown, or gets
// stricter) per CRD, then each CRD's objects with findings and the runbook, collapsed.
func markdownPlan(m *mdDoc, r *plan.Report) {
	m.Must("## kubectl crdver plan: **%s**\n", r.Summary.Verdict)
	judged := ""
	if r.KubernetesVersion != "" {
		judged = fmt.Sprintf(" Judged as Kubernetes %s.", r.KubernetesVersion)
	}
	m.Must("%s: %s.%s\n", plural(r.Summary.CRDs, "CRD"), counts(r.Summary, "crds", "exitCode"), judged)
	m.Line("| CRD | operation | verdict | storage version | objects evaluated | objects with findings |")
	m.Line("|---|---|---|---|---|---|")
	for _, it := range r.Items {
		storage := it.StorageVersion.After
		if it.StorageVersion.Before != "" && it.StorageVersion.Before != it.StorageVersion.After {
			storage = it.StorageVersion.Before + " → " + it.StorageVersion.After
		}
		total := "unknown"
		if it.Objects.Total >= 0 {
			total = strconv.FormatInt(it.Objects.Total, 10)
		}
		m.Line("| %s | %s | **%s** | %s | %d of %s | %d |", mdCode(it.CRD), it.Operation, it.Verdict, storage, it.Objects.Evaluated, total, it.Objects.WithFindings())
	}
	m.Line("")
	for _, it := range r.Items {
		reasons, values := stringLists(&it, func(k string) bool { return strings.HasSuffix(k, "Reasons") })
		if len(reasons) == 0 && len(it.Stricter) == 0 && it.Apply.Allowed {
			continue
		}
		m.Line("### %s: %s\n", mdCode(it.CRD), it.Verdict)
		if !it.Apply.Allowed {
			for _, e := range it.Apply.Errors {
				m.Line("- **apply rejected:** %s", mdCell(e))
			}
		}
		for _, k := range reasons {
			for _, v := range values[k] {
				m.Line("- **%s:** %s", strings.TrimSuffix(words(k), " reasons"), mdCell(v))
			}
		}
		for _, c := range it.Stricter {
			m.Line("- **stricter:** %s %s: %s", c.Versions(), mdCode(c.Path), mdCell(c.Change))
		}
		m.Line("")
	}
	for _, it := range r.Items {
		if len(it.Objects.Findings) > 0 {
			open := m.Open(fmt.Sprintf("%s: %s with findings", mdHTMLCode(it.CRD), plural(len(it.Objects.Findings), "object")))
			if open {
				m.Line("| object | finding | detail |")
				m.Line("|---|---|---|")
				for _, f := range it.Objects.Findings {
					name := f.Name
					if f.Namespace != "" {
						name = f.Namespace + "/" + f.Name
					}
					keys, values := stringLists(&f, func(k string) bool { return k != "kinds" })
					for _, k := range keys {
						for _, v := range values[k] {
							m.Line("| %s | %s | %s |", mdCode(name), words(k), mdCell(v))
						}
					}
				}
			}
			m.Close(open)
		}
		notes := append(append([]string{}, it.Notes...), it.Objects.Notes...)
		if len(notes) > 0 {
			open := m.Open(fmt.Sprintf("%s: %s", mdHTMLCode(it.CRD), plural(len(notes), "note")))
			if open {
				for _, n := range notes {
					m.Line("- %s", mdCell(n))
				}
			}
			m.Close(open)
		}
	}
	if len(r.Runbook) > 0 {
		open := m.Open(fmt.Sprintf("Runbook: %s", plural(len(r.Runbook), "step")))
		if open {
			for i, s := range r.Runbook {
				step := "**" + s.Phase + "**"
				if s.Action != "" && s.Action != s.Phase {
					step += " (" + mdCell(s.Action) + ")"
				}
				m.Line("%d. %s: %s", i+1, step, mdCell(s.Why))
				for _, c := range s.Commands {
					m.Line("   - %s", mdCode(c))
				}
			}
		}
		m.Close(open)
	}
}

// markdownDoctor: the counts, the errors and warnings with their fixes, then the other findings
// and the CRDs without any, collapsed.
func markdownDoctor(m *mdDoc, r *doctor.Report) {
	verdict := "ok"
	switch {
	case r.Summary.Errors > 0:
		verdict = "errors"
	case r.Summary.Warnings > 0:
		verdict = "warnings"
	case len(r.Summary.Incomplete) > 0:
		verdict = "unknown"
	}
	m.Must("## kubectl crdver doctor: **%s**\n", verdict)
	judged := ""
	if r.KubernetesVersion != "" {
		judged = fmt.Sprintf(" Judged as Kubernetes %s.", r.KubernetesVersion)
	}
	c := fmt.Sprintf("%s, %s, %s", plural(r.Summary.Errors, "error"), plural(r.Summary.Warnings, "warning"), plural(r.Summary.Infos, "other finding"))
	m.Must("%s checked: %s.%s\n", plural(r.Summary.CRDs, "CRD"), c, judged)
	for _, in := range r.Summary.Incomplete {
		m.Line("- **unknown:** %s %s: %s", mdCode(in.CRD), in.Check, mdCell(in.Error))
	}
	items := slices.Clone(r.Items)
	slices.SortStableFunc(items, func(a, b doctor.Item) int { return a.Rank() - b.Rank() })
	table := func(keep func(doctor.Finding) bool) {
		m.Line("| CRD | check | severity | finding | fix |")
		m.Line("|---|---|---|---|---|")
		for _, it := range items {
			for _, f := range it.Findings {
				if keep(f) {
					m.Line("| %s | %s | %s | %s | %s |", mdCode(it.CRD), f.Check, f.Severity, mdCell(f.Message), mdFix(f.Fix))
				}
			}
		}
		m.Line("")
	}
	serious := func(f doctor.Finding) bool {
		return f.Severity == doctor.SeverityError || f.Severity == doctor.SeverityWarning
	}
	if r.Summary.Errors+r.Summary.Warnings > 0 {
		m.Line("")
		table(serious)
	}
	if r.Summary.Infos > 0 {
		open := m.Open(plural(r.Summary.Infos, "other finding"))
		if open {
			table(func(f doctor.Finding) bool { return !serious(f) })
		}
		m.Close(open)
	}
	var clean []string
	for _, it := range items {
		if len(it.Findings) == 0 {
			clean = append(clean, mdCode(it.CRD))
		}
	}
	if len(clean) > 0 {
		open := m.Open(plural(len(clean), "CRD") + " without findings")
		if open {
			for _, c := range clean {
				m.Line("- %s", c)
			}
		}
		m.Close(open)
	}
}

// markdownVersions: the CRDs with a migration pending (or unknown) first, then every CRD
// collapsed.
func markdownVersions(m *mdDoc, items []explain.Summary) {
	var pending, unknown int
	for _, s := range items {
		switch {
		case s.MigrationPending == nil:
			unknown++
		case *s.MigrationPending:
			pending++
		}
	}
	verdict := "no migration pending"
	switch {
	case pending > 0:
		verdict = "migration pending"
	case unknown > 0:
		verdict = "unknown"
	}
	m.Must("## kubectl crdver versions --all: **%s**\n", verdict)
	m.Must("%s: %d with a storage migration pending, %d with storedVersions unknown.\n", plural(len(items), "CRD"), pending, unknown)
	row := func(s explain.Summary) {
		stored := "unknown"
		if s.StoredVersionsKnown {
			stored = strings.Join(s.StoredVersions, ", ")
		}
		m.Line("| %s | %s | %s | %s | %d of %d | %s |", mdCode(s.Name), s.StorageVersion, dash(s.PreferredVersion), stored, s.Served, s.Versions, yesNoUnknown(s.MigrationPending))
	}
	header := func() {
		m.Line("| CRD | storage | preferred | stored versions | served | migration pending |")
		m.Line("|---|---|---|---|---|---|")
	}
	if pending+unknown > 0 {
		header()
		for _, s := range items {
			if s.MigrationPending == nil || *s.MigrationPending {
				row(s)
			}
		}
		m.Line("")
	}
	if pending+unknown == len(items) {
		return // the table above has every CRD
	}
	open := m.Open("Every CRD (" + strconv.Itoa(len(items)) + ")")
	if open {
		header()
		for _, s := range items {
			row(s)
		}
	}
	m.Close(open)
}

func plural(n int, word string) string {
	if n == 1 {
		return "1 " + word
	}
	return fmt.Sprintf("%d %ss", n, word)
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func yesNoUnknown(b *bool) string {
	switch {
	case b == nil:
		return "?"
	case *b:
		return "yes"
	}
	return "no"
}
