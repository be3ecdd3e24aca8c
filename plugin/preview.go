package plugin

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/crdver/kubectl-crdver/preview"
)

const previewExample = `  # What the API server would store for these objects (no cluster needed)
  kubectl crdver preview -f widget.yaml --crd-file widget-crd.yaml

  # The CRD from the cluster; only what changed, as a unified diff
  kubectl crdver preview -f widget.yaml widgets.preview.example.com --diff

  # Like kubectl's default (--validate=strict): unknown or duplicate fields reject the object
  kubectl crdver preview -f widget.yaml --crd-file widget-crd.yaml --field-validation Strict

  # An update: transition rules (oldSelf) and ratcheting against the stored object
  kubectl get widget demo -o yaml > old.yaml
  kubectl crdver preview -f new.yaml --old-file old.yaml --crd-file widget-crd.yaml

  # The object as a client reading version v1beta1 would see it (conversion strategy None)
  kubectl crdver preview -f widget.yaml --crd-file widget-crd.yaml --version v1beta1 -o json`

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
	FieldValidation string

	fv preview.FieldValidation
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

The CRD comes from --crd-file, from the cluster by name, or, when neither is given, from the
cluster by the objects' kind and group. Exit status 1 when any object would be rejected.`,
		Example:           previewExample,
		ValidArgsFunction: completeCRDNames(g),
		RunE:              runE(o),
	}
	cmd.Flags().StringSliceVarP(&o.Files, "filename", "f", nil, "Objects to preview: files, directories (- for stdin); several documents per file")
	cmd.Flags().StringSliceVar(&o.OldFiles, "old-file", nil, "Preview an update: the objects as currently stored (e.g. kubectl get -o yaml), matched by kind, namespace and name")
	o.source = addCRDFileFlag(cmd, g, "crd-file", "")
	o.out = addOutputFlags(cmd, outputJSON, outputYAML)
	cmd.Flags().StringVar(&o.Version, "version", "", "Show the result as read in this version (default: each object's own version)")
	cmd.Flags().BoolVar(&o.Diff, "diff", false, "Print a unified diff from the input to the result instead of the whole result")
	o.color = addColorFlag(cmd)
	cmd.Flags().StringVar(&o.FieldValidation, "field-validation", "Warn", "How unknown and duplicate fields are handled, as the API server's fieldValidation: Warn, Strict or Ignore")
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
	if o.Diff && o.out.structured() {
		return UsageErrorf("--diff prints a human diff: it cannot be combined with -o %s", o.out.format)
	}
	return nil
}

// PreviewItem is one object's preview in `preview -o json|yaml`.
type PreviewItem struct {
	// Source names the file and document the object came from.
	Source string `json:"source"`
	// input is the object as read, for --diff.
	input []byte
	preview.PreviewResult
}

// PreviewReport is the whole output of `preview -o json|yaml`.
type PreviewReport struct {
	Items    []PreviewItem `json:"items"`
	Accepted int           `json:"accepted"`
	Rejected int           `json:"rejected"`
}

type gkKey struct{ group, kind string }

type oldKey struct{ kind, namespace, name string }

// Run previews every object.
func (o *PreviewOptions) Run(ctx context.Context) error {
	docs, err := ReadDocuments(o.Files, o.g.In)
	if err != nil {
		return err
	}
	if len(docs) == 0 {
		return UsageErrorf("%s: no objects found", strings.Join(o.Files, ", "))
	}
	olds, err := o.readOld()
	if err != nil {
		return err
	}
	ns, err := o.g.Namespace()
	if err != nil || ns == "" {
		ns = "default"
	}
	previewers, err := o.previewers(ctx, docs)
	if err != nil {
		return err
	}
	report := PreviewReport{Items: []PreviewItem{}}
	for _, d := range docs {
		gv, _ := schema.ParseGroupVersion(d.APIVersion)
		p := previewers[gkKey{gv.Group, d.Kind}]
		opts := preview.PreviewOptions{FieldValidation: o.fv, ReadVersion: o.Version, Namespace: ns}
		var res *preview.PreviewResult
		if olds != nil {
			old, err := o.findOld(olds, d, ns)
			if err != nil {
				return err
			}
			res, err = p.previewer.Update(ctx, d.JSON, old, opts)
			if err != nil {
				return previewInputError(d, p.crd, err)
			}
		} else {
			res, err = p.previewer.Create(ctx, d.JSON, opts)
			if err != nil {
				var ns *preview.NonStructuralError
				if errors.As(err, &ns) {
					if perr := o.printer.PrintPart(o.g.Out, nonStructural(ns.Violations)); perr != nil {
						return perr
					}
				}
				return previewInputError(d, p.crd, err)
			}
		}
		if res.Accepted() {
			report.Accepted++
		} else {
			report.Rejected++
		}
		report.Items = append(report.Items, PreviewItem{Source: d.Where(), PreviewResult: *res, input: d.JSON})
	}
	if err := o.printer.PrintReport(o.g.Out, &report); err != nil {
		return err
	}
	if report.Rejected > 0 {
		return ProblemsFound("%d of %s would be rejected by the API server", report.Rejected, plural(len(report.Items), "object"))
	}
	return nil
}

type crdPreviewer struct {
	crd       *apiextensionsv1.CustomResourceDefinition
	previewer *preview.Previewer
}

// previewers resolves the CRD of every group/kind among the objects.
func (o *PreviewOptions) previewers(ctx context.Context, docs []Document) (map[gkKey]crdPreviewer, error) {
	out := map[gkKey]crdPreviewer{}
	var named *apiextensionsv1.CustomResourceDefinition
	if o.CRDName != "" {
		crd, err := o.source.one(ctx, o.CRDName)
		if err != nil {
			return nil, err
		}
		named = crd
	}
	for _, d := range docs {
		gv, err := schema.ParseGroupVersion(d.APIVersion)
		if err != nil || d.Kind == "" || gv.Version == "" {
			return nil, UsageErrorf("%s: not a Kubernetes object: it needs apiVersion (group/version) and kind", d.Where())
		}
		key := gkKey{gv.Group, d.Kind}
		if _, ok := out[key]; ok {
			continue
		}
		crd := named
		if crd != nil {
			if named.Spec.Group != gv.Group || named.Spec.Names.Kind != d.Kind {
				return nil, UsageErrorf("%s: %s %s does not belong to CustomResourceDefinition %s (group %s, kind %s)",
					d.Where(), d.APIVersion, d.Kind, named.Name, named.Spec.Group, named.Spec.Names.Kind)
			}
		} else if crd, err = o.source.byGroupKind(ctx, gv.Group, d.Kind); err != nil {
			var ee *ExitError
			if !errors.As(err, &ee) || ee.Code != ExitUsage {
				return nil, err
			}
			hint := ""
			if !o.source.offline() {
				hint = "; name the CRD or give it with --crd-file"
			}
			return nil, UsageErrorf("%s: %v%s", d.Where(), err, hint)
		}
		p, err := preview.NewPreviewer(crd)
		if err != nil {
			return nil, Usage(err)
		}
		out[key] = crdPreviewer{crd: crd, previewer: p}
	}
	return out, nil
}

func (o *PreviewOptions) readOld() (map[oldKey][]byte, error) {
	if len(o.OldFiles) == 0 {
		return nil, nil
	}
	docs, err := ReadDocuments(o.OldFiles, o.g.In)
	if err != nil {
		return nil, err
	}
	out := map[oldKey][]byte{}
	for _, d := range docs {
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON(d.JSON); err != nil {
			return nil, UsageErrorf("%s: %v", d.Where(), err)
		}
		out[oldKey{u.GetKind(), u.GetNamespace(), u.GetName()}] = d.JSON
	}
	if len(out) == 0 {
		return nil, UsageErrorf("%s: no objects found", strings.Join(o.OldFiles, ", "))
	}
	return out, nil
}

func (o *PreviewOptions) findOld(olds map[oldKey][]byte, d Document, ns string) ([]byte, error) {
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(d.JSON); err != nil {
		return nil, UsageErrorf("%s: %v", d.Where(), err)
	}
	for _, k := range []oldKey{{u.GetKind(), u.GetNamespace(), u.GetName()}, {u.GetKind(), ns, u.GetName()}, {u.GetKind(), "", u.GetName()}} {
		if old, ok := olds[k]; ok {
			return old, nil
		}
	}
	return nil, UsageErrorf("%s: --old-file has no %s named %q: give the stored object to preview an update", d.Where(), u.GetKind(), u.GetName())
}

// previewInputError turns a preview error into one line naming the document: input problems
// and non-structural schemas are usage errors (exit 2).
func previewInputError(d Document, crd *apiextensionsv1.CustomResourceDefinition, err error) error {
	var ie *preview.InputError
	var ns *preview.NonStructuralError
	switch {
	case errors.As(err, &ie):
		return UsageErrorf("%s: %v", d.Where(), ie.Err)
	case errors.As(err, &ns):
		return UsageErrorf("%s: %s: the schema of version %q is not structural (%s listed above): the API server would neither prune nor default its objects, so there is nothing faithful to preview",
			d.Where(), ns.CRD, ns.Version, plural(len(ns.Violations), "violation"))
	}
	return fmt.Errorf("%s: previewing with %s: %w", d.Where(), crd.Name, err)
}

func plural(n int, what string) string {
	if n == 1 {
		return fmt.Sprintf("1 %s", what)
	}
	return fmt.Sprintf("%d %ss", n, what)
}
