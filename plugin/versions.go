package plugin

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"
	apiextensionshelpers "k8s.io/apiextensions-apiserver/pkg/apihelpers"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	crdinfo "github.com/crdver/kubectl-crdver/crd"
	"github.com/crdver/kubectl-crdver/explain"
	"github.com/crdver/kubectl-crdver/fleet"
	"github.com/crdver/kubectl-crdver/printers"
)

const versionsExample = `  # Versions of a CRD in the cluster, in priority order
  kubectl crdver versions crontabs.stable.example.com

  # The same for a CRD in a file (no cluster needed), with deprecation warnings
  kubectl crdver versions -f testdata/crds/crontab.yaml -o wide

  # Every CRD in the cluster, and whether a storage migration is pending
  kubectl crdver versions --all

  # Sort version strings the way Kubernetes does (no cluster needed)
  kubectl crdver versions --sort v1 v2beta1 v1alpha1 v2

  # In a runbook: exit 1 unless v1beta1 can be removed from spec.versions
  kubectl crdver versions crontabs.stable.example.com --can-remove v1beta1`

// VersionsOptions are the options of `kubectl crdver versions`.
type VersionsOptions struct {
	g       *Globals
	source  *crdSource
	out     *outputFlags
	printer ReportPrinter

	Name      string
	All       bool
	Sort      bool
	SortArgs  []string
	CanRemove string
	fleet     *fleetFlags
}

// NewCmdVersions builds `kubectl crdver versions`.
func NewCmdVersions(g *Globals) *cobra.Command {
	o := &VersionsOptions{g: g}
	cmd := &cobra.Command{
		Use:   "versions [CRD] [-f FILE] | --all | --sort VERSION...",
		Short: "Show a CRD's versions in priority order: served, storage, stored, deprecated, preferred, safe to remove",
		Long: `Show a CRD's versions in Kubernetes' version-priority order (GA > beta > alpha, then by
number; other names last, alphabetically), with what is served, which version is the storage
version, which are still listed in status.storedVersions, what is deprecated, and the
preferred version that discovery reports for the group and kubectl uses by default.

Notes say what needs attention and, for every version, whether it is safe to remove from
spec.versions: it is not when it is the storage version, is still listed in
status.storedVersions (migrate first), is the only served version, or (on a cluster) is still
named by some object's managedFields (server-side apply fails on those objects once the version
is gone: run kubectl crdver retire). When a fact is not known (a file without status, objects
that could not be listed) the answer is unknown, never safe.`,
		Example:           versionsExample,
		ValidArgsFunction: completeCRDNames(g),
		RunE:              runE(o),
	}
	o.source = addCRDFileFlag(cmd, g, "filename", "f")
	o.source.input = addInputFlags(cmd, "Make documents in -f that are not CustomResourceDefinitions an error instead of skipping them")
	o.source.kube = addKubeVersionFlag(cmd)
	o.out = addOutputFlags(cmd, outputWide, outputJSON, outputYAML, outputMarkdown)
	// One CRD refuses -o markdown, --all refuses -o wide (Validate): the help and the -o error
	// say where each works.
	o.out.onlyWhen(cmd, outputWide, "for one CRD")
	o.out.onlyWhen(cmd, outputMarkdown, "with --all")
	cmd.Flags().BoolVarP(&o.All, "all", "A", false, "Summarise every CRD (of the cluster, or of the files given with -f)")
	// -A selects all namespaces in kubectl and convert: here it still works, with a note.
	_ = cmd.Flags().MarkShorthandDeprecated("all", "use --all (in kubectl and in convert, -A selects all namespaces)")
	cmd.Flags().BoolVar(&o.Sort, "sort", false, "Sort the version strings given as arguments, highest priority first, one per line (no cluster needed)")
	cmd.Flags().StringVar(&o.CanRemove, "can-remove", "", "Exit 1 (and say why) unless this version is safe to remove from spec.versions")
	registerVersionCompletion(cmd, o.source, "can-remove")
	o.fleet = addFleetFlags(cmd, g, o.out, fleetSpec{kind: fleet.KindVersionsAll, timeout: 10 * time.Minute,
		refuse: map[string]string{"filename": "the fleet reads each cluster's CRDs"}})
	return cmd
}

// Complete takes the arguments.
// Complete takes the arguments and resolves the printer.
func (o *VersionsOptions) Complete(_ *cobra.Command, args []string) (err error) {
	if err := o.completeArgs(args); err != nil {
		return err
	}
	o.printer, err = o.out.toPrinter(humanOptions{})
	return err
}

func (o *VersionsOptions) completeArgs(args []string) error {
	if o.Sort {
		o.SortArgs = args
		return nil
	}
	if len(args) > 1 {
		return UsageErrorf("versions takes one CRD name, got %d (%s)", len(args), strings.Join(args, " "))
	}
	if len(args) == 1 {
		o.Name = args[0]
	}
	return nil
}

// Validate checks that the flags fit together. It does no I/O.
func (o *VersionsOptions) Validate() error {
	if err := o.out.validate(); err != nil {
		return err
	}
	if err := o.source.kube.validate(); err != nil {
		return err
	}
	switch {
	case o.Sort && (o.All || o.source.offline() || o.CanRemove != ""):
		return UsageErrorf("--sort takes only version strings: it cannot be combined with --all, -f or --can-remove")
	case o.Sort && o.out.format == outputWide:
		return UsageErrorf("--sort prints version strings: -o wide does not apply (use -o json or -o yaml for a list)")
	case o.Sort && o.out.noHeaders:
		return UsageErrorf("--sort prints version strings: --no-headers does not apply")
	case o.Sort && len(o.SortArgs) == 0:
		return UsageErrorf("--sort needs version strings to sort, e.g. kubectl crdver versions --sort v1 v2beta1")
	case o.All && o.Name != "":
		return UsageErrorf("--all shows every CRD: do not name one (%q)", o.Name)
	case o.All && o.CanRemove != "":
		return UsageErrorf("--can-remove needs one CRD, not --all")
	case !o.All && o.out.format == outputMarkdown:
		return UsageErrorf("-o markdown is for --all (a pull request comment on every CRD): use -o json or -o yaml for one CRD")
	case o.All && o.out.format == outputWide:
		return UsageErrorf("--all has no wide output: use -o json or -o yaml for every field")
	case o.fleet.set() && !o.All:
		return UsageErrorf("on a fleet, versions summarises every CRD of each cluster: add --all")
	case !o.All && !o.Sort && o.Name == "" && !o.source.offline():
		return UsageErrorf("name a CRD (e.g. crontabs.stable.example.com), or use -f FILE, --all or --sort")
	}
	return o.fleet.validate()
}

// Run prints the report.
func (o *VersionsOptions) Run(ctx context.Context) error {
	switch {
	case o.Sort:
		return o.runSort()
	case o.All:
		return o.runAll(ctx)
	}
	crd, err := o.source.one(ctx, o.Name)
	if err != nil {
		return err
	}
	preferred, err := o.groupPreferred(ctx, crd)
	if err != nil {
		return err
	}
	report := explain.AnalyzeVersions(crd, preferred)
	if report.MigrationPending != nil && *report.MigrationPending {
		report.Notes[0] += fmt.Sprintf("; run `kubectl crdver migrate %s`", crd.Name)
	}
	if o.CanRemove != "" {
		if _, err := crdinfo.Lookup(crd, o.CanRemove); err != nil {
			return Usage(err)
		}
	}
	census, mfNotes := clusterManagedFields(ctx, o.g, o.source.offline(), crd)
	if !o.source.offline() {
		explain.ManagedFieldsSafety(crd, &report, census, census != nil || len(mfNotes) == 0)
	}
	if err := o.printer.PrintReport(o.g.Out, printers.WithCensus(printers.Versions(report), census, mfNotes)); err != nil {
		return err
	}
	return o.canRemove(crd.Name, report)
}

// canRemove is --can-remove's answer as the exit status: 1 when the version is not safe to
// remove or whether it is cannot be told (a note when it is served: its readers leave no record).
func (o *VersionsOptions) canRemove(name string, report explain.VersionsReport) error {
	if o.CanRemove == "" {
		return nil
	}
	for _, v := range report.Versions {
		switch {
		case v.Name == o.CanRemove && v.SafeToRemove && v.Served:
			// What the cluster records holds nothing at it; readers leave no record.
			fmt.Fprintf(o.g.ErrOut, "note: %s: %s is served and neither stored nor named by managedFields; clients that still request it (the API server keeps no record of readers) get 404 once it is removed\n", name, v.Name)
		case v.Name != o.CanRemove || v.SafeToRemove:
		case !report.StoredVersionsKnown && strings.HasPrefix(v.Notes[len(v.Notes)-1], "unknown"):
			return ProblemsFound("%s: whether version %q is safe to remove is unknown: the file has no status.storedVersions, and the cluster may still store objects at %s; check the cluster (kubectl crdver versions %s --can-remove %s)",
				name, v.Name, v.Name, name, v.Name)
		default:
			return ProblemsFound("%s: version %q is %s", name, v.Name, v.Notes[len(v.Notes)-1])
		}
	}
	return nil
}

func (o *VersionsOptions) runSort() error {
	sorted := append([]string{}, o.SortArgs...)
	crdinfo.SortByPriority(sorted)
	return o.printer.PrintReport(o.g.Out, printers.SortedVersions(sorted))
}

// groupPreferred returns the preferred version of crd's group. From the cluster it is what the
// API server's discovery reports for the group (GET /apis/<group>); from files it is worked
// out the same way over every CRD of the files.
func (o *VersionsOptions) groupPreferred(ctx context.Context, crd *apiextensionsv1.CustomResourceDefinition) (string, error) {
	if o.source.offline() {
		crds, err := o.source.load(ctx)
		if err != nil {
			return "", err
		}
		return crdinfo.PreferredVersions(crds)[crd.Spec.Group], nil
	}
	cs, err := o.g.clients()
	if err != nil {
		return "", err
	}
	dc, err := cs.Discovery()
	if err != nil {
		return "", err
	}
	body, err := dc.RESTClient().Get().AbsPath("/apis", crd.Spec.Group).Do(ctx).Raw()
	if err != nil {
		if isNotFound(err) {
			return "", nil // no served version: the group is not in discovery
		}
		return "", clusterError(fmt.Sprintf("reading discovery for group %q", crd.Spec.Group), err)
	}
	var group metav1.APIGroup
	if err := json.Unmarshal(body, &group); err != nil {
		return "", Unavailable(fmt.Errorf("reading discovery for group %q: %w", crd.Spec.Group, err))
	}
	return group.PreferredVersion.Version, nil
}

func (o *VersionsOptions) runAll(ctx context.Context) error {
	if o.fleet.set() {
		return o.fleet.run(ctx)
	}
	crds, err := o.source.all(ctx)
	if err != nil {
		return err
	}
	if o.source.offline() {
		if err := o.source.duplicates(ctx); err != nil {
			return err
		}
	} else {
		// Discovery only counts established CRDs.
		established := crds[:0]
		for _, crd := range crds {
			if apiextensionshelpers.IsCRDConditionTrue(crd, apiextensionsv1.Established) {
				established = append(established, crd)
			}
		}
		crds = established
	}
	return o.printer.PrintReport(o.g.Out, printers.VersionsAll(explain.Summarize(crds)))
}
