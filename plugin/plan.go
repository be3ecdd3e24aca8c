package plugin

import (
	"context"
	"errors"
	"fmt"
	"github.com/crdver/kubectl-crdver/preview"
	"slices"
	"sync/atomic"
	"time"

	"github.com/spf13/cobra"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/crdver/kubectl-crdver/fleet"
	"github.com/crdver/kubectl-crdver/manifest"
	"github.com/crdver/kubectl-crdver/plan"
	"github.com/crdver/kubectl-crdver/printers"
	"github.com/crdver/kubectl-crdver/webhookcheck"
)

const planExample = `  # What applying an operator release's CRDs would do to the cluster (nothing is written):
  # a file or directory, or a kustomization (config/crd here) through stdin
  kubectl crdver plan -f testdata/crds/crontab-release.yaml
  kustomize build config/crd | kubectl crdver plan -f -

  # Every object with a finding, with every message
  kubectl crdver plan -f testdata/crds/crontab-release.yaml -o wide

  # CI, no cluster: against the previous release's CRD and sample objects
  kubectl crdver plan -f plan/testdata/widgets-new.yaml --old-file plan/testdata/widgets-old.yaml --objects plan/testdata/widgets-objects.yaml

  # A large cluster: evaluate at most 1000 objects per CRD
  kubectl crdver plan -f testdata/crds/crontab-release.yaml --sample 1000 -o json`

// PlanOptions are the options of `kubectl crdver plan`.
type PlanOptions struct {
	g       *Globals
	out     *outputFlags
	printer ReportPrinter

	Files           []string
	OldFiles        []string
	ObjectFiles     []string
	Sample          int64
	FieldValidation string
	ChunkSize       int64
	Workers         int
	progressFlags   *progressFlags
	progress        Progress
	Webhook         string
	FailOn          string

	fv      preview.FieldValidation
	webhook *webhookcheck.Target
	// objects are the release's documents that make a conversion webhook (readCRDDocs).
	objects []plan.ReleaseObject
	kube    *kubeVersionFlag
	path    *pathFlags

	fleet *fleetFlags // --contexts, --all-contexts, --kubeconfigs (fleet.go)
}

// NewCmdPlan builds `kubectl crdver plan`.
func NewCmdPlan(g *Globals) *cobra.Command {
	o := &PlanOptions{g: g}
	cmd := &cobra.Command{
		Use:   "plan -f NEW-CRDS [-f ...] [--old-file OLD-CRDS [--objects OBJECTS]]",
		Short: "Show what applying new CRDs would do to the cluster and its objects, before you apply them (read-only)",
		Long: `Compare each CRD of the input with the live one and predict, with the API server's own code,
what applying it does. Nothing is written to the cluster.

1. Whether the API server accepts the update (its own CRD validation, including the rule that
   every status.storedVersions entry must stay in spec.versions), with its error text.
2. Versions added, removed, no longer served or newly deprecated; the storage version before and
   after; status.storedVersions after the apply and whether a migration is then pending.
3. Schema changes per version (live and new schema of the same version), and from the old
   storage version (and removed versions still in storedVersions) to the new storage version,
   each lossy, stricter or compatible.
4. Every live object under the new CRD: what its next read prunes and defaults, whether
   re-creating it as listed (a restore, a GitOps replace; --field-validation, Strict by default
   as kubectl create) and a no-op update (a controller's next write; ratcheting applies) would
   be rejected, with the messages.
5. Field managers per version (managedFields), each an applier (GitOps, kubectl apply), a
   one-time command (kubectl create) or a controller, with what to change when the version goes.
6. Conversion strategy and webhook changes, and, where the release makes stored objects read or
   written at another version (a storage switch, a new preferred version), the conversion it
   relies on: the new CRD's webhook (its Service and ready endpoints, or URL; caBundle;
   conversionReviewVersions) and a ConversionReview round trip of every stored object through it,
   checked as the API server checks a response (--webhook asks the release's webhook running
   elsewhere instead; --sample bounds the round trips too).
7. The runbook: the steps that make the change safe, as commands.

Offline (CI, no cluster): --old-file gives the live CRDs and --objects sample objects.

Verdict per CRD (docs/decision-table.md): breaking when something live breaks or loses data
(the apply is rejected; the conversion webhook the new CRD relies on is not running, not
reachable or fails on objects; an object loses fields on read or its next write would be rejected;
server-side apply fails on objects whose managedFields name a removed version; a manager that
applies manifests still writes a version that is removed or no longer served); unknown when the plan cannot tell
(status.storedVersions not known and a version removed, objects not evaluated or sampled,
a controller that last wrote a version that goes); invalid on re-create when live objects
violate the new schema but their writes are accepted (the API server ratchets unchanged fields):
a re-create of them (a restore, a GitOps replace) is rejected, and the runbook has a step to fix
them; stricter when only new objects and changes meet stricter rules (added CEL rules, tighter
limits, new required fields, changed defaults) that no live object violates; safe otherwise.

Exit status: 0 safe or stricter; 1 breaking, unknown or invalid on re-create (and stricter with
--fail-on stricter); 3 could not complete.`,
		Example: planExample,
		Args:    cobra.NoArgs,
		RunE:    runE(o),
	}
	f := cmd.Flags()
	f.StringSliceVarP(&o.Files, "filename", "f", nil, "The new CRDs: files, directories (- for stdin); documents that are not CRDs are skipped")
	f.StringSliceVar(&o.OldFiles, "old-file", nil, "Offline: the CRDs as they are now (instead of the cluster's); a CRD of -f not found here is a create (an empty file: every CRD is)")
	f.StringSliceVar(&o.ObjectFiles, "objects", nil, "Offline: objects as the cluster returns them (kubectl get -o yaml), evaluated under the new CRDs; needs --old-file")
	o.out = addOutputFlags(cmd, outputWide, outputJSON, outputYAML, outputMarkdown)
	f.Int64Var(&o.Sample, "sample", 0, "Evaluate at most this many objects per CRD, and round-trip at most this many per stored version through its conversion webhook (0: all)")
	f.StringVar(&o.FieldValidation, "field-validation", "Strict", "fieldValidation of the re-create: Strict (kubectl create's default), Warn or Ignore")
	f.Int64Var(&o.ChunkSize, "chunk-size", 500, "Objects per list page")
	f.IntVar(&o.Workers, "workers", 0, "Objects evaluated in parallel (0: one per core)")
	f.StringVar(&o.FailOn, "fail-on", "breaking", "Exit 1 on: breaking (something live breaks or the plan cannot tell) or stricter (also when rules only get stricter for new objects)")
	f.StringVar(&o.Webhook, "webhook", "", "Judge the new CRDs' conversion through this webhook instead of the one they name: https://HOST:PORT[/PATH] (a local binary, a port-forward; TLS verified against the new CRD's caBundle as its service name) or NAMESPACE/SERVICE[:PORT] (a sandbox namespace, through the API server's service proxy)")
	o.progressFlags = addProgressFlags(cmd)
	_ = cmd.RegisterFlagCompletionFunc("fail-on", func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
		return []string{"breaking", "stricter"}, cobra.ShellCompDirectiveNoFileComp
	})
	_ = cmd.RegisterFlagCompletionFunc("field-validation", func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
		return []string{"Strict", "Warn", "Ignore"}, cobra.ShellCompDirectiveNoFileComp
	})
	o.kube = addKubeVersionFlag(cmd)
	o.path = addPathFlags(cmd)
	o.fleet = addFleetFlags(cmd, g, o.out, fleetSpec{kind: fleet.KindPlan, pathKind: fleet.KindPlanPath, waves: true, timeout: 10 * time.Minute, refuse: map[string]string{
		"old-file": "an offline plan has no cluster", "objects": "an offline plan has no cluster"}})
	return cmd
}

// Complete resolves the printer: plan has no arguments.
func (o *PlanOptions) Complete(_ *cobra.Command, _ []string) (err error) {
	o.progress = o.progressFlags.toProgress(o.g.ErrOut)
	o.printer, err = o.out.toPrinter(humanOptions{})
	return err
}

// Validate checks the flags. It does no I/O.
func (o *PlanOptions) Validate() error {
	if err := o.out.validate(); err != nil {
		return err
	}
	if err := o.progressFlags.validate(); err != nil {
		return err
	}
	fv, err := preview.ParseFieldValidation(o.FieldValidation)
	if err != nil {
		return UsageErrorf("--field-validation %q is not supported: use Strict, Warn or Ignore", o.FieldValidation)
	}
	o.fv = fv
	switch {
	case o.FailOn != "breaking" && o.FailOn != "stricter":
		return UsageErrorf("--fail-on %q is not supported: use breaking or stricter", o.FailOn)
	case len(o.Files) == 0:
		return UsageErrorf("give the new CRDs with -f FILE (a file, a directory, or - for stdin)")
	case len(o.ObjectFiles) > 0 && len(o.OldFiles) == 0:
		return UsageErrorf("--objects is for offline plans: give the current CRDs with --old-file too")
	case o.Sample < 0:
		return UsageErrorf("--sample must be 0 (all) or more, got %d", o.Sample)
	case o.ChunkSize < 1:
		return UsageErrorf("--chunk-size must be at least 1, got %d", o.ChunkSize)
	case o.Webhook != "" && len(o.OldFiles) > 0:
		return UsageErrorf("--webhook round-trips the live objects: plan against the cluster, without --old-file")
	case o.Workers < 0:
		return UsageErrorf("--workers must be 0 (one per core) or more, got %d", o.Workers)
	}
	if o.Webhook != "" {
		if o.webhook, err = webhookcheck.ParseTarget(o.Webhook); err != nil {
			return UsageErrorf("--webhook %v", err)
		}
	}
	if err := o.path.validate(); err != nil {
		return err
	}
	if err := o.fleet.validate(); err != nil {
		return err
	}
	return o.kube.validate()
}

// Run plans every CRD of the input.
func (o *PlanOptions) Run(ctx context.Context) error {
	if o.fleet.set() {
		return o.fleet.run(ctx)
	}
	next, skipped, err := o.g.readCRDFiles(ctx, o.Files, "-f", func(d Document) { o.objects = append(o.objects, releaseObject(d)...) })
	if err != nil {
		return err
	}
	live := len(o.OldFiles) == 0
	judged, err := o.kube.resolve(ctx, o.g, live, live)
	if err != nil {
		return err
	}
	o.noteSkipped(skipped)
	ro := o.releaseOptions(next, judged, live)
	rc, err := o.releaseClients(ctx, live, &ro, next)
	if err != nil {
		return err
	}
	if o.path.set() {
		return o.runPath(ctx, rc, ro, next)
	}
	report, runErr := plan.Release(ctx, rc, ro)
	if runErr != nil && len(report.Items) == 0 {
		return o.runError(runErr)
	}
	failOnStricter := o.FailOn == "stricter"
	if err := o.print(report, judged, failOnStricter); err != nil {
		return err
	}
	if runErr != nil {
		return o.runError(runErr)
	}
	return end(report.Outcome(failOnStricter), nil)
}

// print prints the report judged as judged, its exit status with --fail-on, then the note on
// the version and where the apply verdicts come from.
func (o *PlanOptions) print(report *plan.Report, judged judgedAs, failOnStricter bool) error {
	report.KubernetesVersion = judged.String()
	report.Summarize()
	report.Summary.ExitCode = report.ExitCode(failOnStricter)
	if err := o.printer.PrintReport(o.g.Out, printers.Plan(report)); err != nil {
		return err
	}
	judged.printNote(o.g.ErrOut)
	printers.ApplySources(o.g.ErrOut, report)
	return nil
}

func (o *PlanOptions) noteSkipped(skipped int) {
	switch {
	case skipped == 1:
		o.progress.Notef("skipped 1 document that is not a CustomResourceDefinition")
	case skipped > 1:
		o.progress.Notef("skipped %d documents that are not CustomResourceDefinitions", skipped)
	}
}

// releaseOptions are plan.Release's options from the flags: next judged as judged, against
// the cluster when live (its server-side dry run unless --kube-version names another version).
func (o *PlanOptions) releaseOptions(next []*apiextensionsv1.CustomResourceDefinition, judged judgedAs, live bool) plan.ReleaseOptions {
	applyFile := plan.JoinFiles(o.Files)
	if applyFile == "-" {
		applyFile = "NEW-CRDS.yaml"
	}
	return plan.ReleaseOptions{
		Next: next, KubeVersion: judged.Version, ChunkSize: o.ChunkSize,
		ServerDryRun: live && o.kube.v.IsZero(), // --kube-version asks for another version than the server's
		Plan:         plan.Options{FieldValidation: o.fv, Sample: o.Sample, Workers: o.Workers},
		Runbook:      plan.RunbookOptions{ApplyFile: applyFile},
		OnEvaluate: func(crd string, done *atomic.Int64, total func() int64) func() {
			return o.progress.Start(Task{Name: "plan " + crd, Unit: "objects", Verb: "evaluated", Done: done.Load,
				TotalFunc: func() int64 {
					t := total()
					if o.Sample > 0 && (t < 0 || t > o.Sample) {
						return o.Sample
					}
					return t
				}})
		},
		Conversion: plan.ConversionOptions{Target: o.webhook, Sample: o.Sample},
		Objects:    o.objects,
		OnConvert:  conversionProgress(o.progress),
	}
}

// releaseObject is a document of the release that may make a conversion webhook
// (plan.WebhookKinds), for the runbook's deploy-webhook step; none for other documents.
func releaseObject(d Document) []plan.ReleaseObject {
	if !slices.Contains(plan.WebhookKinds, d.Kind) {
		return nil
	}
	var u unstructured.Unstructured
	if err := u.UnmarshalJSON(d.JSON); err != nil {
		return nil // not an object: nothing to name
	}
	return []plan.ReleaseObject{{APIVersion: d.APIVersion, Kind: d.Kind, Namespace: u.GetNamespace(), Name: u.GetName(), Where: d.Where(), Object: u.Object}}
}

// conversionProgress shows the round trips of a CRD's stored objects through its conversion
// webhook.
func conversionProgress(p Progress) func(crd string, done *atomic.Int64, total int64) func() {
	return func(crd string, done *atomic.Int64, total int64) func() {
		return p.Start(Task{Name: "conversion " + crd, Unit: "objects", Verb: "round-tripped", Done: done.Load, Total: total})
	}
}

// releaseClients are the cluster's clients when live; offline, ro gets the live CRDs from
// --old-file instead.
func (o *PlanOptions) releaseClients(ctx context.Context, live bool, ro *plan.ReleaseOptions, next []*apiextensionsv1.CustomResourceDefinition) (plan.ReleaseClients, error) {
	var rc plan.ReleaseClients
	var err error
	if !live {
		ro.Live, ro.Sources, err = o.liveCRDs(ctx, next)
		return rc, err
	}
	cs, err := o.g.clients()
	if err != nil {
		return rc, err
	}
	if rc.CRDs, err = cs.CRDs(); err != nil {
		return rc, err
	}
	if rc.Dynamic, err = cs.Dynamic(); err != nil {
		return rc, err
	}
	rc.Kube, err = cs.Kube()
	return rc, err
}

func (o *PlanOptions) runError(err error) error {
	var ue *ExitError
	if errors.As(err, &ue) {
		return err // its own exit code and words
	}
	if errors.Is(err, plan.ErrInterrupted) {
		return Unavailable(fmt.Errorf("%w: the plan is incomplete (nothing was written)", err))
	}
	var ie *preview.InputError
	var mie *manifest.InputError
	if errors.As(err, &ie) || errors.As(err, &mie) { // mie: an --objects file is wrong
		return Usage(err)
	}
	return clusterError("planning", err)
}

// liveCRDs, offline, finds the copy of each new CRD in --old-file (nil: a create) and the
// source of its objects in --objects.
func (o *PlanOptions) liveCRDs(ctx context.Context, next []*apiextensionsv1.CustomResourceDefinition) ([]*apiextensionsv1.CustomResourceDefinition, []plan.ObjectSource, error) {
	lives := make([]*apiextensionsv1.CustomResourceDefinition, len(next))
	sources := make([]plan.ObjectSource, len(next))
	old, _, err := o.g.readCRDFiles(ctx, o.OldFiles, "--old-file", nil)
	if err != nil {
		return nil, nil, err
	}
	byName := map[string]*apiextensionsv1.CustomResourceDefinition{}
	for _, c := range old {
		byName[c.Name] = c
	}
	withObjects := 0
	for i, c := range next {
		lives[i] = byName[c.Name]
		if lives[i] != nil && len(o.ObjectFiles) > 0 {
			if slices.Contains(o.ObjectFiles, "-") {
				return nil, nil, UsageErrorf("--objects -: read objects from files (stdin holds the CRDs)")
			}
			sources[i] = manifest.NewObjectPages(o.ObjectFiles, lives[i].Spec.Group, lives[i].Spec.Names.Kind, int(o.ChunkSize))
			withObjects++
		}
	}
	if withObjects > 1 {
		// Each CRD's objects are read from the files in turn: a pipe would be empty the second time.
		for _, f := range o.ObjectFiles {
			if expanded, err := manifest.ExpandPath(f, false); err == nil && manifest.Size(expanded) < 0 {
				return nil, nil, UsageErrorf("--objects %s: a pipe is read once, and the objects of %d CRDs are read from --objects one CRD after the other: write them to a file", f, withObjects)
			}
		}
	}
	return lives, sources, nil
}
