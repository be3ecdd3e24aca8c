package printers

import (
	"fmt"
	"io"
	"strings"

	"github.com/pmezard/go-difflib/difflib"
	"sigs.k8s.io/yaml"

	"github.com/crdver/kubectl-crdver/preview"
)

// Preview prints one object's preview for people: a heading (source, object, verdict), the
// object as the API server would store it (or, with diff, a unified diff from input, coloured
// when color), then what was pruned, defaulted, warned and refused.
func Preview(w io.Writer, source string, r preview.PreviewResult, input []byte, diff, color bool) error {
	var b strings.Builder
	who := r.Name
	if who == "" {
		who = "(no name)"
	}
	if r.Namespace != "" {
		who = r.Namespace + "/" + r.Name
	}
	shown := ""
	if r.ReadVersion != r.Version && r.Object != nil {
		shown = ", shown as read in " + r.ReadVersion
	}
	fmt.Fprintf(&b, "# %s: %s %s, %s in %s%s: %s\n", source, r.Kind, who, r.Operation, r.Version, shown, strings.ToUpper(r.Verdict))
	if r.Object != nil {
		out, err := yaml.Marshal(r.Object)
		if err != nil {
			return err
		}
		if diff {
			in, err := yaml.JSONToYAML(input)
			if err != nil {
				return err
			}
			text, err := difflib.GetUnifiedDiffString(difflib.UnifiedDiff{
				A: difflib.SplitLines(string(in)), B: difflib.SplitLines(string(out)),
				FromFile: "input", ToFile: "result", Context: 3,
			})
			if err != nil {
				return err
			}
			if text == "" {
				text = "(no change)\n"
			}
			b.WriteString(ColorDiff(text, color))
		} else {
			b.Write(out)
		}
	}
	section := func(title string, lines []string) {
		if len(lines) == 0 {
			return
		}
		fmt.Fprintf(&b, "%s:\n", title)
		for _, l := range lines {
			fmt.Fprintf(&b, "  %s\n", l)
		}
	}
	section("pruned (unknown fields)", r.Pruned)
	section("pruned after conversion (fields the other version's schema does not know)", r.PrunedOnConversion)
	section("dropped nulls", r.DroppedNulls)
	section("defaulted", r.Defaulted)
	section("defaulted when read back from storage", r.DefaultedOnRead)
	section("warnings", r.Warnings)
	var errs []string
	for _, e := range r.Errors {
		if e.Field != "" && e.Field != "<nil>" {
			errs = append(errs, e.Field+": "+e.Message)
		} else {
			errs = append(errs, e.Message)
		}
	}
	section("errors", errs)
	section("notes", r.Notes)
	fmt.Fprintf(&b, "verdict: %s\n\n", r.Verdict)
	_, err := io.WriteString(w, b.String())
	return err
}
