package plugin

import (
	"context"
	"errors"
	"strings"

	"github.com/spf13/cobra"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	crdinfo "github.com/crdver/kubectl-crdver/crd"
	"github.com/crdver/kubectl-crdver/explain"
	"github.com/crdver/kubectl-crdver/printers"
)

const explainExample = `  # Is the schema structural? Then the top-level fields of the preferred version
  kubectl crdver explain -f testdata/crds/widget.yaml

  # One field and everything under it, in a given version
  kubectl crdver explain widgets.preview.example.com spec.ports --version v1 --recursive

  # What changed between two versions, and what conversion strategy None would prune
  kubectl crdver explain widgets.preview.example.com --compare v1beta1,v1`

// ExplainOptions are the options of `kubectl crdver explain`.
type ExplainOptions struct {
	g       *Globals
	source  *crdSource
	out     *outputFlags
	printer ReportPrinter

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
		Use:   "explain [CRD | -f FILE] [FIELD.PATH] [--version V] [--recursive] | --compare V1,V2",
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
	o.source = addCRDFileFlag(cmd, g, "filename", "f")
	aliasFlag(cmd, "crd-file", "filename")
	o.source.kube = addKubeVersionFlag(cmd)
	o.out = addOutputFlags(cmd, outputJSON, outputYAML)
	cmd.Flags().StringVar(&o.Version, "version", "", "The version to explain (default: the preferred version)")
	cmd.Flags().BoolVarP(&o.Recursive, "recursive", "r", false, "Show every field under FIELD.PATH, not only its direct children")
	cmd.Flags().StringVar(&o.Compare, "compare", "", "Compare two versions' schemas: V1,V2")
	registerVersionCompletion(cmd, o.source, "version")
	cmd.ValidArgsFunction = completeExplainArgs(g, o.source, &o.Version)
	return cmd
}

// Complete takes the arguments: a CRD name (unless -f holds exactly one CRD) and a
// field path.
// Complete takes the arguments and resolves the printer.
func (o *ExplainOptions) Complete(_ *cobra.Command, args []string) (err error) {
	if err := o.completeArgs(args); err != nil {
		return err
	}
	o.printer, err = o.out.toPrinter(humanOptions{})
	return err
}

func (o *ExplainOptions) completeArgs(args []string) error {
	switch {
	case len(args) > 2:
		return UsageErrorf("explain takes a CRD name and a field path, got %d arguments (%s)", len(args), strings.Join(args, " "))
	case len(args) == 2:
		o.CRDName, o.Path = args[0], args[1]
	case len(args) == 1:
		// with -f, a single argument may be the field path instead: resolve decides
		o.CRDName = args[0]
	}
	return nil
}

// Validate checks the flags. It does no I/O.
func (o *ExplainOptions) Validate() error {
	if err := o.out.validate(); err != nil {
		return err
	}
	if err := o.source.kube.validate(); err != nil {
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
		return UsageErrorf("name a CRD (e.g. crontabs.stable.example.com), or read one from a file with -f FILE")
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
		return o.runCompare(crd)
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
	path := explain.Path(crd, version, o.Path)
	if field, ok := strings.CutPrefix(path, "metadata"); ok && (field == "" || field[0] == '.') {
		m, err := explain.Metadata(crd, version, strings.TrimPrefix(field, "."))
		if err != nil {
			return Usage(err)
		}
		return o.printer.PrintReport(o.g.Out, printers.Metadata(m))
	}
	e, err := explain.Explain(crd, version, path, o.Recursive)
	if err != nil {
		return Usage(err)
	}
	if err := o.printer.PrintReport(o.g.Out, printers.Explanation(e)); err != nil {
		return err
	}
	if !e.Structural.Structural {
		return ProblemsFound("%s: the schema is not structural: the API server neither prunes nor defaults its objects", crd.Name)
	}
	return nil
}

// runCompare prints the differences between --compare's two versions' schemas.
func (o *ExplainOptions) runCompare(crd *apiextensionsv1.CustomResourceDefinition) error {
	if o.Path != "" { // the single argument turned out to be a field path of the file's CRD
		return UsageErrorf("--compare compares whole schemas: it cannot be combined with a field path (%s)", o.Path)
	}
	for _, v := range []string{o.compareFrom, o.compareTo} {
		if _, err := crdinfo.Lookup(crd, v); err != nil {
			return Usage(err)
		}
	}
	d, err := explain.Compare(crd, o.compareFrom, o.compareTo)
	if err != nil {
		return Usage(err)
	}
	return o.printer.PrintReport(o.g.Out, printers.Compare(d))
}

// resolve finds the CRD (and, with -f and one argument, whether it is the field path).
func (o *ExplainOptions) resolve(ctx context.Context) (*apiextensionsv1.CustomResourceDefinition, error) {
	crd, path, err := o.source.crdOrPath(ctx, o.CRDName, o.Path)
	var ee *ExitError
	if err != nil && o.Path == "" && strings.Contains(o.CRDName, ".") && errors.As(err, &ee) && ee.Code == ExitUsage {
		// kubectl's form: <resource>.<field path>, e.g. httproute.spec.rules
		segs := strings.Split(o.CRDName, ".")
		for i := len(segs) - 1; i >= 1; i-- {
			if c, _, e := o.source.crdOrPath(ctx, strings.Join(segs[:i], "."), strings.Join(segs[i:], ".")); e == nil {
				o.CRDName, o.Path = strings.Join(segs[:i], "."), strings.Join(segs[i:], ".")
				return c, nil
			}
		}
	}
	if err != nil {
		return nil, err
	}
	if path != o.Path {
		o.Path, o.CRDName = path, ""
	}
	return crd, nil
}
