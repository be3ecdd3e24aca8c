package plugin

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"

	"github.com/spf13/cobra"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/crdver/kubectl-crdver/preview"
	"github.com/crdver/kubectl-crdver/printers"
)

const previewExample = `  # A helm chart's objects (your chart in ./chart), with the CRDs from the chart itself (other
  # kinds are skipped)
  helm template ./chart --include-crds | kubectl crdver preview -f -

  # One line per object for CI, only the rejected ones (your kustomize overlay)
  kustomize build overlays/prod | kubectl crdver preview -f - -o name --only-rejected

  # What the API server would store for these objects (no cluster needed)
  kubectl crdver preview -f testdata/preview/widgets.yaml --crd-file testdata/crds/widget.yaml

  # The CRD from the cluster; only what changed, as a unified diff
  kubectl crdver preview -f testdata/preview/widgets.yaml widgets.preview.example.com --diff

  # Like kubectl's default (--validate=strict): unknown or duplicate fields reject the object
  kubectl crdver preview -f testdata/preview/widgets.yaml --crd-file testdata/crds/widget.yaml --field-validation Strict

  # An update: transition rules (oldSelf) and ratcheting against the stored object (in a
  # cluster, save it with kubectl get widget demo -o yaml > old.yaml and pass --old-file old.yaml)
  kubectl crdver preview -f testdata/preview/widget-new.yaml --old-file testdata/preview/widget-old.yaml --crd-file testdata/crds/widget.yaml

  # The object as a client reading version v1beta1 would see it (conversion strategy None)
  kubectl crdver preview -f testdata/preview/widgets.yaml --crd-file testdata/crds/widget.yaml --version v1beta1 -o json`

// PreviewOptions are the options of `kubectl crdver preview`.
type PreviewOptions struct {
	g       *Globals
	source  *crdSource
	out     *outputFlags
	printer ReportPrinter

	Files           []string
	OldFiles        []string
	CRDName         string
	Version         string
	Diff            bool
	color           *colorFlag
	colorOn         bool // --diff in colour (resolved in Complete)
	FieldValidation string
	OnlyRejected    bool
	Workers         int

	input    *inputFlags
	progress *progressFlags
	fv       preview.FieldValidation
	kube     *kubeVersionFlag
	judged   judgedAs
}

// NewCmdPreview builds `kubectl crdver preview`.
func NewCmdPreview(g *Globals) *cobra.Command {
	o := &PreviewOptions{g: g}
	cmd := &cobra.Command{
		Use:   "preview -f OBJECTS [CRD | --crd-file FILE] [--version V] [--old-file OLD] [--diff]",
		Short: "Show what the API server would do to objects: pruning, defaulting, validation, offline",
		Long: `Show each object exactly as the API server would store and return it on create (or, with
--old-file, on update), without sending anything: unknown fields pruned (also in metadata and
embedded resources), nulls of non-nullable fields dropped, defaults applied, status dropped when
the status subresource is on, then validation (OpenAPI schema, list types, embedded resources,
CEL rules with their messages, transition rules and ratcheting on update) and a verdict.

It runs the API server's own code (k8s.io/apiextensions-apiserver) in the API server's order,
and a differential test checks it against server-side dry-run on a real API server.

Like a request from client-go or kubectl --validate=warn, unknown fields are pruned and
reported as warnings (--field-validation Warn); Strict (kubectl's default) rejects them, and
Ignore drops them silently.

The CRDs come from --crd-file, from the cluster by name, from the input itself (a bundle of
CRDs and objects, as helm template and kustomize build print), or, when no --crd-file is
given, from the cluster by the objects' kind and group. Documents that no CRD defines (a
Deployment in a helm template stream) are skipped and counted on stderr (-v lists them;
--strict-kinds makes them errors).

Exit status: 0 every object accepted; 1 some object would be rejected; 2 bad input (nothing
to preview, an invalid CRD, a malformed document); 3 could not complete (cluster unreachable,
interrupted).`,
		Example:           previewExample,
		ValidArgsFunction: completeCRDNames(g),
		RunE:              runE(o),
	}
	cmd.Flags().StringSliceVarP(&o.Files, "filename", "f", nil, "Objects to preview: files, directories (- for stdin); several documents per file")
	cmd.Flags().StringSliceVar(&o.OldFiles, "old-file", nil, "Preview an update: the objects as currently stored (e.g. kubectl get -o yaml), matched by kind, namespace and name")
	o.source = addCRDFileFlag(cmd, g, "crd-file", "")
	o.out = addOutputFlags(cmd, outputJSON, outputYAML, outputName)
	o.input = addInputFlags(cmd, "Make documents that no CustomResourceDefinition defines an error instead of skipping them")
	o.source.input = o.input
	cmd.Flags().BoolVar(&o.OnlyRejected, "only-rejected", false, "Print only the objects the API server would reject (the counts still cover every object)")
	cmd.Flags().IntVar(&o.Workers, "workers", runtime.GOMAXPROCS(0), "How many objects to preview at once (output keeps the input's order)")
	o.progress = addProgressFlags(cmd)
	cmd.Flags().StringVar(&o.Version, "version", "", "Show the result as read in this version (default: each object's own version)")
	cmd.Flags().BoolVar(&o.Diff, "diff", false, "Print a unified diff from the input to the result instead of the whole result")
	o.color = addColorFlag(cmd)
	cmd.Flags().StringVar(&o.FieldValidation, "field-validation", "Warn", "How unknown and duplicate fields are handled, as the API server's fieldValidation: Warn, Strict or Ignore")
	o.kube = addKubeVersionFlag(cmd)
	registerVersionCompletion(cmd, o.source, "version")
	_ = cmd.RegisterFlagCompletionFunc("field-validation", func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
		return []string{"Warn", "Strict", "Ignore"}, cobra.ShellCompDirectiveNoFileComp
	})
	return cmd
}

// Complete takes the arguments.
// Complete takes the arguments and resolves the printer.
func (o *PreviewOptions) Complete(_ *cobra.Command, args []string) (err error) {
	if err := o.completeArgs(args); err != nil {
		return err
	}
	color, err := o.color.enabled(o.g.Out, o.Diff && !o.out.structured())
	if err != nil {
		return err
	}
	o.colorOn = color
	o.printer, err = o.out.toPrinter(humanOptions{diff: o.Diff, color: color})
	return err
}

func (o *PreviewOptions) completeArgs(args []string) error {
	if len(args) > 1 {
		return UsageErrorf("preview takes at most one CRD name, got %d (%s)", len(args), strings.Join(args, " "))
	}
	if len(args) == 1 {
		o.CRDName = args[0]
	}
	return nil
}

// Validate checks the flags. It does no I/O.
func (o *PreviewOptions) Validate() error {
	if err := o.out.validate(); err != nil {
		return err
	}
	if len(o.Files) == 0 {
		return UsageErrorf("give the objects to preview with -f FILE (or -f - for stdin)")
	} else if err := stdinOnce(o.Files, o.source); err != nil {
		return err
	}
	fv, err := preview.ParseFieldValidation(o.FieldValidation)
	if err != nil {
		return UsageErrorf("--field-validation %q is not supported: use Warn, Strict or Ignore", o.FieldValidation)
	}
	o.fv = fv
	if o.Diff && o.out.format != outputTable {
		return UsageErrorf("--diff prints a human diff: it cannot be combined with -o %s", o.out.format)
	}
	if err := o.progress.validate(); err != nil {
		return err
	}
	if o.Workers < 1 {
		return UsageErrorf("--workers must be at least 1, got %d", o.Workers)
	}
	if err := o.kube.validate(); err != nil {
		return err
	}
	for _, f := range o.Files {
		if f == "-" {
			for _, c := range append(append([]string{}, o.source.files...), o.OldFiles...) {
				if c == "-" {
					return UsageErrorf("-f - and --crd-file - / --old-file - both read stdin, which can be read only once: put the CRDs in the same stream as the objects (they are used for them), or in a file")
				}
			}
		}
	}
	return nil
}

// PreviewItem and PreviewReport are the shape of `preview -o json|yaml`.
type (
	PreviewItem   = printers.PreviewItem
	PreviewReport = printers.PreviewReport
)

type oldKey struct{ kind, namespace, name string }

func (o *PreviewOptions) readOld(ctx context.Context) (map[oldKey][]byte, error) {
	if len(o.OldFiles) == 0 {
		return nil, nil
	}
	out := map[oldKey][]byte{}
	err := EachDocument(ctx, o.OldFiles, InputOptions{Stdin: o.g.In, Recursive: o.input.Recursive}, func(d Document) error {
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON(d.JSON); err != nil {
			return UsageErrorf("%s: %v", d.Where(), err)
		}
		out[oldKey{u.GetKind(), u.GetNamespace(), u.GetName()}] = d.JSON
		return nil
	})
	if err != nil {
		return nil, err
	}
	if len(out) == 0 {
		return nil, UsageErrorf("%s: no objects found", strings.Join(o.OldFiles, ", "))
	}
	return out, nil
}

func (o *PreviewOptions) findOld(olds map[oldKey][]byte, source string, js []byte, ns string) ([]byte, error) {
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(js); err != nil {
		return nil, UsageErrorf("%s: %v", source, err)
	}
	for _, k := range []oldKey{{u.GetKind(), u.GetNamespace(), u.GetName()}, {u.GetKind(), ns, u.GetName()}, {u.GetKind(), "", u.GetName()}} {
		if old, ok := olds[k]; ok {
			return old, nil
		}
	}
	return nil, UsageErrorf("%s: --old-file has no %s named %q: give the stored object to preview an update", source, u.GetKind(), u.GetName())
}

// previewInputError turns a preview error into one line naming the document: input problems
// and non-structural schemas are usage errors (exit 2).
func previewInputError(source string, crd *apiextensionsv1.CustomResourceDefinition, err error) error {
	var ie *preview.InputError
	var ns *preview.NonStructuralError
	switch {
	case errors.As(err, &ie):
		return UsageErrorf("%s: %v", source, ie.Err)
	case errors.As(err, &ns):
		return UsageErrorf("%s: %s: the schema of version %q is not structural (%s listed above): the API server would neither prune nor default its objects, so there is nothing faithful to preview",
			source, ns.CRD, ns.Version, plural(len(ns.Violations), "violation"))
	}
	return fmt.Errorf("%s: previewing with %s: %w", source, crd.Name, err)
}

func plural(n int, what string) string { return printers.Plural(n, what) }
