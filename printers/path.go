package printers

import (
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/crdver/kubectl-crdver/plan"
	"github.com/crdver/kubectl-crdver/upgrade"
)

// pathWho says who carries a hop out: crdver, a person first (a conversion webhook to get
// running), or the deployment tool that applies the CRDs.
func pathWho(h *plan.Hop) string {
	who := "crdver"
	if h.Plan != nil && slices.ContainsFunc(h.Plan.Runbook, func(s plan.RunbookStep) bool { return s.Action == plan.ActionToolApply }) {
		who += ", then the CRDs' tool"
	}
	if len(h.Waiting()) > 0 {
		who = "you (webhook), then " + who
	}
	return who
}

// pathWhat says what happens in a hop: its rewrites and runbook actions.
func pathWhat(h *plan.Hop) string {
	var parts []string
	for _, g := range plan.GroupRewrites(h.Rewrites) {
		parts = append(parts, fmt.Sprintf("%s → %s (%s) by %s", strings.Join(g.From, ","), g.To, crdsText(g.CRDs), g.Conversion))
	}
	if a := h.Actions(); len(a) > 0 {
		parts = append(parts, strings.Join(a, ", "))
	}
	return strings.Join(parts, "; ")
}

// crdsText names up to two CRDs, else counts them.
func crdsText(crds []string) string {
	switch {
	case len(crds) == 0:
		return "all"
	case len(crds) <= 2:
		return strings.Join(crds, ", ")
	}
	return Plural(len(crds), "CRD")
}

// Path prints a release path: the verdict line, a table of the hops (hop, release, CRDs, what
// happens, who does it), each CRD's reason, the instructions for a person, and the runbook of
// every hop.
func Path(w io.Writer, r *plan.PathReport, noHeaders bool) error {
	WriteWrapped(w, fmt.Sprintf("Path to %s: %s", r.Target, r.Verdict), "  ", TerminalWidth)
	fmt.Fprintln(w)
	t := &Table{Header: []string{"hop", "release", "crds", "verdict", "who does it", "what happens"}, MaxWidth: TerminalWidth}
	for i := range r.Hops {
		h := &r.Hops[i]
		verdict := "-"
		if h.Plan != nil {
			verdict = Dash(h.Plan.Summary.Verdict)
		}
		t.Add(fmt.Sprint(h.Index), h.Release, crdsText(h.CRDs), verdict, pathWho(h), pathWhat(h))
	}
	t.WrapLastColumn(noHeaders)
	if err := t.Print(w, noHeaders); err != nil {
		return err
	}
	fmt.Fprintln(w)
	for _, c := range r.CRDs {
		how := "direct"
		if len(c.Via) > 0 {
			how = "via " + strings.Join(c.Via, ", ")
		}
		WriteWrapped(w, fmt.Sprintf("%s (stored at %s): %s: %s", c.CRD, strings.Join(c.StoredVersions, ", "), how, c.Reason), "  ", TerminalWidth)
	}
	for i := range r.Hops {
		h := &r.Hops[i]
		if in := h.Instruction(); in != "" {
			WriteWrapped(w, fmt.Sprintf("Before hop %d (%s): %s", h.Index, h.Release, in), "  ", TerminalWidth)
		}
	}
	for i := range r.Hops {
		h := &r.Hops[i]
		if h.Plan == nil {
			continue
		}
		fmt.Fprintln(w)
		title := fmt.Sprintf("Hop %d: %s (kubectl crdver upgrade -f %s)", h.Index, h.Release, h.File)
		if h.Index > 1 {
			if evaluated(h.Plan) {
				title += ", planned from the CRDs and objects the hops before leave"
			} else {
				title += ", planned from the CRDs the hops before leave (objects evaluated when the hop runs)"
			}
		}
		Runbook(w, title+":", h.Plan.Runbook)
	}
	return nil
}

// PathMarkdown is a release path for a pull request: the verdict, the hops' table, the
// instructions and every hop's runbook.
func PathMarkdown(r *plan.PathReport) string {
	var b strings.Builder
	cell := func(s string) string { return strings.ReplaceAll(s, "|", `\|`) }
	fmt.Fprintf(&b, "### Release path to %s\n\n%s\n\n", r.Target, cell(r.Verdict))
	b.WriteString("| hop | release | CRDs | verdict | who does it | what happens |\n|---|---|---|---|---|---|\n")
	for i := range r.Hops {
		h := &r.Hops[i]
		verdict := "-"
		if h.Plan != nil {
			verdict = h.Plan.Summary.Verdict
		}
		fmt.Fprintf(&b, "| %d | %s | %s | %s | %s | %s |\n", h.Index, cell(h.Release), cell(crdsText(h.CRDs)), verdict, cell(pathWho(h)), cell(pathWhat(h)))
	}
	b.WriteString("\n")
	for _, c := range r.CRDs {
		how := "direct"
		if len(c.Via) > 0 {
			how = "via " + strings.Join(c.Via, ", ")
		}
		fmt.Fprintf(&b, "- `%s` (stored at %s): %s: %s\n", c.CRD, strings.Join(c.StoredVersions, ", "), how, c.Reason)
	}
	for i := range r.Hops {
		h := &r.Hops[i]
		if in := h.Instruction(); in != "" {
			fmt.Fprintf(&b, "- **Before hop %d (%s):** %s\n", h.Index, h.Release, in)
		}
	}
	for i := range r.Hops {
		h := &r.Hops[i]
		if h.Plan == nil {
			continue
		}
		fmt.Fprintf(&b, "\n<details><summary>Hop %d: %s runbook</summary>\n\n", h.Index, cell(h.Release))
		for j, s := range h.Plan.Runbook {
			fmt.Fprintf(&b, "%d. **%s** %s\n", j+1, s.Action, s.Why)
			for _, c := range s.Commands {
				fmt.Fprintf(&b, "   ```\n   %s\n   ```\n", c)
			}
		}
		b.WriteString("\n</details>\n")
	}
	return b.String()
}

// PathPreflight prints what the path's preflight found at each hop before the first write
// (upgrade along a path): one row per object and finding, with the hop, whether it refuses
// the run under the consent given, and the fields or the first error. Nothing when no hop
// found anything.
func PathPreflight(w io.Writer, hops []upgrade.HopPreflight, noHeaders bool) error {
	t := &Table{Header: []string{"hop", "release", "object", "finding", "refuses", "detail"}, MaxWidth: TerminalWidth}
	add := func(hp upgrade.HopPreflight, k plan.Kind, fs []upgrade.ObjectFinding, fields bool) {
		refuses := YesNo(slices.Contains(hp.Refusals, k))
		for _, f := range fs {
			obj := f.CRD + " " + f.Name
			if f.Namespace != "" {
				obj = f.CRD + " " + f.Namespace + "/" + f.Name
			}
			detail := ""
			switch {
			case fields:
				detail = strings.Join(f.Fields, ", ")
			case len(f.Errors) > 0:
				detail = f.Errors[0]
			}
			t.Add(fmt.Sprint(hp.Hop), hp.Release, obj, string(k), refuses, Dash(detail))
		}
	}
	for _, hp := range hops {
		add(hp, plan.KindDataLoss, hp.DataLoss, true)
		add(hp, plan.KindRejectedWrite, hp.Rejected, false)
		add(hp, plan.KindTypeMismatch, hp.TypeMismatch, false)
		add(hp, plan.KindInvalidOnRecreate, hp.InvalidOnRecreate, false)
		for _, c := range hp.BlockedCRDs {
			t.Add(fmt.Sprint(hp.Hop), hp.Release, c, string(plan.KindApplyRejected), YesNo(true), "the API server would reject the CRD")
		}
	}
	if len(t.Rows) == 0 {
		return nil
	}
	if _, err := fmt.Fprintln(w, "\nThe path's preflight (every hop, each object as the hops before leave it):"); err != nil {
		return err
	}
	return t.Print(w, noHeaders)
}

// evaluated: the plan evaluated objects (a later hop's, taken through the hops before).
func evaluated(p *plan.Report) bool {
	for _, it := range p.Items {
		if it.Objects.Evaluated > 0 {
			return true
		}
	}
	return false
}
