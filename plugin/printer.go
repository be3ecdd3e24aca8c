package plugin

import (
	"strings"

	"github.com/spf13/cobra"

	"github.com/crdver/kubectl-crdver/printers"
)

// Output formats accepted by -o.
const (
	outputTable = ""
	outputWide  = "wide"
	outputJSON  = "json"
	outputYAML  = "yaml"
	outputName  = "name"
)

// outputFlags is -o/--output and --no-headers, shared by every command that prints a report.
type outputFlags struct {
	format    string
	noHeaders bool
	allowed   []string
	// only: formats a command takes in some of its forms only, and which ("with --all").
	only map[string]string
}

func addOutputFlags(cmd *cobra.Command, allowed ...string) *outputFlags {
	f := &outputFlags{allowed: allowed}
	cmd.Flags().StringVarP(&f.format, "output", "o", "", "Output format: one of "+strings.Join(allowed, ", ")+" (default: a table)")
	cmd.Flags().BoolVar(&f.noHeaders, "no-headers", false, "Print tables without the header row")
	_ = cmd.RegisterFlagCompletionFunc("output", func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
		return allowed, cobra.ShellCompDirectiveNoFileComp
	})
	return f
}

func (f *outputFlags) validate() error {
	if f.format == outputTable {
		return nil
	}
	if f.noHeaders && (f.format == outputJSON || f.format == outputYAML || f.format == outputMarkdown) {
		return UsageErrorf("--no-headers applies to tables: it cannot be combined with -o %s", f.format)
	}
	for _, a := range f.allowed {
		if f.format == a {
			return nil
		}
	}
	return UsageErrorf("--output %q is not supported: use one of %s", f.format, f.formats())
}

// formats lists the formats, each with the form of the command it needs if any.
func (f *outputFlags) formats() string {
	var out []string
	for _, a := range f.allowed {
		if when := f.only[a]; when != "" {
			a += " (" + when + ")"
		}
		out = append(out, a)
	}
	return strings.Join(out, ", ")
}

// onlyWhen says that format works in one form of the command only (when: "with --all"), in
// the flag's help and in the error for a format not supported; Validate refuses the others.
func (f *outputFlags) onlyWhen(cmd *cobra.Command, format, when string) {
	if f.only == nil {
		f.only = map[string]string{}
	}
	f.only[format] = when
	cmd.Flags().Lookup("output").Usage = "Output format: one of " + f.formats() + " (default: a table)"
}

// structured reports whether -o asks for data (json or yaml). Validate may use it to refuse
// options that only make sense for people; Run uses the printer instead.
func (f *outputFlags) structured() bool { return f.format == outputJSON || f.format == outputYAML }

// ReportPrinter prints a command's report (a printers.Report: each library report has one, so a
// report without a printer does not compile): as data for -o json|yaml, as a pull request
// comment for -o markdown, for people otherwise. Commands resolve it from their flags in
// Complete (kubectl's PrintFlags.ToPrinter).
type ReportPrinter = printers.ReportPrinter

// warningCounter counts the API server's warnings of a run (root.go's Globals.warnings).
type warningCounter = printers.WarningCounter

// humanOptions are what a command adds to the human printer (preview's stream prints its diff
// itself: PreviewOptions.Diff, colorOn).
type humanOptions struct {
	// diff: preview prints a unified diff instead of the result.
	diff bool
	// color: colour the diff (--color).
	color bool
}

// toPrinter resolves -o and --no-headers to the command's printer; an -o the command does not
// support is a usage error.
func (f *outputFlags) toPrinter(h humanOptions) (ReportPrinter, error) {
	if err := f.validate(); err != nil {
		return nil, err
	}
	if f.structured() {
		return printers.Data{YAML: f.format == outputYAML}, nil
	}
	if f.format == outputMarkdown {
		return markdownPrinter{}, nil
	}
	return printers.Human{NoHeaders: f.noHeaders, Wide: f.format == outputWide, AllListed: "-o json", WideListed: "-o wide"}, nil
}

// printsData reports whether p prints JSON or YAML (rather than for people).
func printsData(p ReportPrinter) bool {
	switch p.(type) {
	case printers.Data, *printers.Data:
		return true
	}
	return false
}

// summariseWarnings makes every command of the tree print the API server's warnings once it
// has run, after its output.
func summariseWarnings(c *cobra.Command, g *Globals) {
	if run := c.RunE; run != nil {
		c.RunE = func(cmd *cobra.Command, args []string) error {
			err := run(cmd, args)
			g.warnings.Summary(g.ErrOut)
			return err
		}
	}
	for _, sub := range c.Commands() {
		summariseWarnings(sub, g)
	}
}
