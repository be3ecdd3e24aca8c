package plugin

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/spf13/cobra"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	crdinfo "github.com/crdver/kubectl-crdver/crd"
	"github.com/crdver/kubectl-crdver/crdschema"
	"github.com/crdver/kubectl-crdver/explain"
)

const explainExample = `  # Is the schema structural? Then the top-level fields of the preferred version
  kubectl crdver explain --crd-file widget-crd.yaml

  # One field and everything under it, in a given version
  kubectl crdver explain widgets.preview.example.com spec.ports --version v1 --recursive

  # What changed between two versions, and what conversion strategy None would prune
  kubectl crdver explain widgets.preview.example.com --compare v1beta1,v1`

// ExplainOptions are the options of `kubectl crdver explain`.
type ExplainOptions struct {
	g      *Globals
	source *crdSource
	out    *outputFlags

	CRDName   string
	Path      string
	Version   string
	Recursive bool
	Compare   string

	compareFrom, compareTo string
}

// NewCmdExplain builds `kubectl crdver explain`.
func NewCmdExplain(g *Globals) *cobra.Command {
	o := &ExplainOptions{g: g}
	cmd := &cobra.Command{
		Use:   "explain [CRD | --crd-file FILE] [FIELD.PATH] [--version V] [--recursive] | --compare V1,V2",
		Short: "Explain a CRD's schema as the API server sees it: structural or not, fields, defaults, rules; compare versions",
		Long: `Explain a version's schema the way the API server sees it. First whether it is structural: every
violation, with which of the four rules of "Specifying a structural schema" it breaks (a
non-structural schema is neither pruned nor defaulted, and apiextensions.k8s.io/v1 refuses it).
Then the field tree: type, required, default, nullable, enum, format, bounds, the
x-kubernetes-* markers (preserve-unknown-fields, int-or-string, embedded-resource, list-type,
list-map-keys, map-type) and CEL rules. Lists and maps are transparent in FIELD.PATH, as in
kubectl explain (spec.ports.name). The version defaults to the preferred one.

--compare V1,V2 lists fields added, removed and retyped, and defaults and validation changed,
from V1 to V2, and which fields the API server's pruning drops when an object stored in V1 is
read as V2 (and back) with conversion strategy None — found by running the API server's pruner.`,
		Example:           explainExample,
		ValidArgsFunction: completeCRDNames(g),
		RunE:              runE(o),
	}
	o.source = addCRDFileFlag(cmd, g, "crd-file", "")
	o.out = addOutputFlags(cmd, outputJSON, outputYAML)
	cmd.Flags().StringVar(&o.Version, "version", "", "The version to explain (default: the preferred version)")
	cmd.Flags().BoolVarP(&o.Recursive, "recursive", "r", false, "Show every field under FIELD.PATH, not only its direct children")
	cmd.Flags().StringVar(&o.Compare, "compare", "", "Compare two versions' schemas: V1,V2")
	return cmd
}

// Complete takes the arguments: a CRD name (unless --crd-file holds exactly one CRD) and a
// field path.
func (o *ExplainOptions) Complete(_ *cobra.Command, args []string) error {
	switch {
	case len(args) > 2:
		return UsageErrorf("explain takes a CRD name and a field path, got %d arguments (%s)", len(args), strings.Join(args, " "))
	case len(args) == 2:
		o.CRDName, o.Path = args[0], args[1]
	case len(args) == 1:
		// with --crd-file, a single argument may be the field path instead: resolve decides
		o.CRDName = args[0]
	}
	return nil
}

// Validate checks the flags. It does no I/O.
func (o *ExplainOptions) Validate() error {
	if err := o.out.validate(); err != nil {
		return err
	}
	if o.Compare != "" {
		parts := strings.Split(o.Compare, ",")
		if len(parts) != 2 || parts[0] == "" || parts[1] == "" || parts[0] == parts[1] {
			return UsageErrorf("--compare takes two different versions separated by a comma, e.g. --compare v1beta1,v1")
		}
		o.compareFrom, o.compareTo = strings.TrimSpace(parts[0]), strings.TrimSpace(parts[1])
		if o.Path != "" || o.Recursive || o.Version != "" {
			return UsageErrorf("--compare compares whole schemas: it cannot be combined with a field path, --recursive or --version")
		}
	}
	if o.CRDName == "" && !o.source.offline() {
		return UsageErrorf("name a CRD (e.g. crontabs.stable.example.com), or read one from a file with --crd-file")
	}
	return nil
}

// Run prints the explanation.
func (o *ExplainOptions) Run(ctx context.Context) error {
	crd, err := o.resolve(ctx)
	if err != nil {
		return err
	}
	if o.Compare != "" {
		for _, v := range []string{o.compareFrom, o.compareTo} {
			if _, err := crdinfo.Lookup(crd, v); err != nil {
				return Usage(err)
			}
		}
		d, err := explain.Compare(crd, o.compareFrom, o.compareTo)
		if err != nil {
			return Usage(err)
		}
		if o.out.structured() {
			return o.out.printStructured(o.g.Out, d)
		}
		return printCompare(o.g.Out, d, o.out.noHeaders)
	}
	version := o.Version
	if version == "" {
		version = crdinfo.PreferredVersion(crd)
		if version == "" {
			version = crdinfo.StorageVersion(crd)
		}
	}
	if _, err := crdinfo.Lookup(crd, version); err != nil {
		return Usage(err)
	}
	e, err := explain.Explain(crd, version, o.Path, o.Recursive)
	if err != nil {
		return Usage(err)
	}
	if o.out.structured() {
		err = o.out.printStructured(o.g.Out, e)
	} else {
		err = printExplanation(o.g.Out, e, o.out.noHeaders)
	}
	if err != nil {
		return err
	}
	if !e.Structural.Structural {
		return ProblemsFound("%s: the schema is not structural: the API server neither prunes nor defaults its objects", crd.Name)
	}
	return nil
}

// resolve finds the CRD (and, with --crd-file and one argument, whether it is the field path).
func (o *ExplainOptions) resolve(ctx context.Context) (*apiextensionsv1.CustomResourceDefinition, error) {
	crd, path, err := o.source.crdOrPath(ctx, o.CRDName, o.Path)
	if err != nil {
		return nil, err
	}
	if path != o.Path {
		o.Path, o.CRDName = path, ""
	}
	return crd, nil
}

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
			plural(len(violations), "violation"), pruneNote)
	}
	if _, err := io.WriteString(w, b.String()); err != nil {
		return err
	}
	if err := printViolations(w, violations, noHeaders); err != nil {
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
		fmt.Fprintf(&b, "DESCRIPTION: %s\n", oneLine(f.Description, 200))
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
		t := &table{header: []string{"field", "type", "required", "default", "constraints"}}
		root := &f
		root.Walk(func(n *explain.Field, depth int) {
			if n == root {
				return
			}
			name := strings.Repeat("  ", depth-1) + n.Name
			t.add(name, n.Type, yesNo(n.Required), dash(string(n.Default)), dash(n.Constraints()))
		})
		if err := t.print(w, noHeaders); err != nil {
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
			line := fmt.Sprintf("  %s: %s", where, r.Rule)
			if r.Transition {
				line += " (transition rule: checked on update)"
			}
			switch {
			case r.MessageExpression != "":
				line += "\n      messageExpression: " + r.MessageExpression
			case r.Message != "":
				line += "\n      message: " + r.Message
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
	t := &table{header: []string{"change", "field", d.From, d.To}}
	for _, c := range d.Added {
		t.add("added", c.Path, "-", c.To)
	}
	for _, c := range d.Removed {
		t.add("removed", c.Path, c.From, "-")
	}
	for _, c := range d.Retyped {
		t.add("retyped", c.Path, c.From, c.To)
	}
	for _, c := range d.DefaultsChanged {
		t.add("default", c.Path, c.From, c.To)
	}
	for _, c := range d.ValidationChanged {
		t.add("validation", c.Path, c.From, c.To)
	}
	if len(t.rows) == 0 {
		if _, err := fmt.Fprintln(w, "The two schemas are the same."); err != nil {
			return err
		}
	} else if err := t.print(w, noHeaders); err != nil {
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

// printViolations prints structural-schema violations as a table, then the rules they break.
func printViolations(w io.Writer, violations []crdschema.Violation, noHeaders bool) error {
	if len(violations) == 0 {
		return nil
	}
	sortViolations(violations)
	t := &table{header: []string{"rule", "field", "problem"}}
	rules := map[int]bool{}
	for _, v := range violations {
		rule := "other"
		if v.Rule > 0 {
			rule = fmt.Sprint(v.Rule)
		}
		rules[v.Rule] = true
		t.add(rule, v.Field, v.Message)
	}
	if err := t.print(w, noHeaders); err != nil {
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
