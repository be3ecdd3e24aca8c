package plugin

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/spf13/cobra"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	"github.com/crdver/kubectl-crdver/crdsource"
	"github.com/crdver/kubectl-crdver/doctor"
	"github.com/crdver/kubectl-crdver/fleet"
	"github.com/crdver/kubectl-crdver/printers"
)

const doctorExample = `  # Every CRD of the cluster: one line each, the worst finding first
  kubectl crdver doctor

  # Two CRDs, every finding with the command that fixes it
  kubectl crdver doctor crontabs.stable.example.com widgets.example.org -o wide

  # In CI or cron: JSON, and fail on warnings too
  kubectl crdver doctor -o json --fail-on warning`

// DoctorOptions are the options of `kubectl crdver doctor`.
type DoctorOptions struct {
	g       *Globals
	out     *outputFlags
	printer ReportPrinter

	Names          []string
	FailOn         string
	Concurrency    int
	WebhookTimeout time.Duration
	NoRoundTrip    bool
	progressFlags  *progressFlags
	kube           *kubeVersionFlag
	judged         judgedAs
	fleet          *fleetFlags
	// Now is the clock for certificate expiry (tests).
	Now func() time.Time
}

// NewCmdDoctor builds `kubectl crdver doctor`.
func NewCmdDoctor(g *Globals) *cobra.Command {
	o := &DoctorOptions{g: g}
	cmd := &cobra.Command{
		Use:   "doctor [CRD...]",
		Short: "Check every CRD of the cluster (read-only): storage, conversion webhooks, schemas, versions",
		Long: `Check CRDs (all of the cluster by default) for the states that bite at upgrade time, and say
for each finding how bad it is (error, warning, info) and the command that fixes it:

  storage   migration pending, deprecated storage version, stored but unserved versions,
            objects whose managedFields name a version unserved or gone (kubernetes#111937)
  webhook   the conversion webhook's Service and endpoints (or url), its caBundle and serving
            certificate (chain, name, expiry), reads through the API server, a real
            ConversionReview round trip of one live object per served version pair, and what
            breaks if it is down
  schema    legacy preserveUnknownFields, non-structural schemas, versions without a schema,
            x-kubernetes-preserve-unknown-fields at the root, CEL rules whose estimated cost
            (the API server's own estimator) is near its limit
  versions  deprecated versions still written by field managers, preferred version other than
            the storage version

Nothing is written to the cluster. The round trip sends ConversionReview requests to the
webhooks (--no-round-trip leaves it out). Exit code 1 when any error is found (or any warning,
with --fail-on warning), 3 when a check could not be completed.`,
		Example:           doctorExample,
		ValidArgsFunction: completeCRDNames(g),
		RunE:              runE(o),
	}
	o.out = addOutputFlags(cmd, outputWide, outputJSON, outputYAML, outputMarkdown)
	f := cmd.Flags()
	f.StringVar(&o.FailOn, "fail-on", doctor.SeverityError, "Exit 1 when a finding of this severity or worse is found: error or warning")
	f.IntVar(&o.Concurrency, "concurrency", 8, "CRDs checked at once")
	f.DurationVar(&o.WebhookTimeout, "webhook-timeout", 10*time.Second, "Timeout of each call to a conversion webhook")
	f.BoolVar(&o.NoRoundTrip, "no-round-trip", false, "Send no ConversionReview to the webhooks (the other webhook checks still run)")
	o.progressFlags = addProgressFlags(cmd)
	o.kube = addKubeVersionFlag(cmd)
	o.fleet = addFleetFlags(cmd, g, o.out, fleetSpec{kind: fleet.KindDoctor, timeout: 10 * time.Minute})
	return cmd
}

// Complete takes the arguments.
func (o *DoctorOptions) Complete(_ *cobra.Command, args []string) (err error) {
	o.Names = args
	o.printer, err = o.out.toPrinter(humanOptions{})
	return err
}

// Validate checks the flags.
func (o *DoctorOptions) Validate() error {
	if err := o.out.validate(); err != nil {
		return err
	}
	if err := o.progressFlags.validate(); err != nil {
		return err
	}
	if o.FailOn != doctor.SeverityError && o.FailOn != doctor.SeverityWarning {
		return UsageErrorf("--fail-on %q: use error or warning", o.FailOn)
	}
	if o.Concurrency < 1 || o.Concurrency > 64 {
		return UsageErrorf("--concurrency must be between 1 and 64, got %d", o.Concurrency)
	}
	if o.WebhookTimeout <= 0 {
		return UsageErrorf("--webhook-timeout must be positive, got %v", o.WebhookTimeout)
	}
	if err := o.fleet.validate(); err != nil {
		return err
	}
	return o.kube.validate()
}

// Run checks the CRDs and prints the report.
func (o *DoctorOptions) Run(ctx context.Context) error {
	if o.fleet.set() {
		return o.fleet.run(ctx)
	}
	opts, crds, err := o.options(ctx)
	if err != nil {
		return err
	}
	// The objects read, as plan and the preflight count theirs (their total is not known
	// before the CRDs' lists end); the CRDs done beside them.
	var done, read atomic.Int64
	opts.Progress = func(n, _ int) { done.Store(int64(n)) }
	opts.Read = func(n int64) { read.Add(n) }
	stop := o.progressFlags.toProgress(o.g.ErrOut).Start(Task{Name: "checking", Prefix: "doctor", Unit: "objects", Verb: "read",
		Total: -1, Done: read.Load, Detail: func() string { return fmt.Sprintf("%d/%d CRDs checked", done.Load(), len(crds)) }})
	report, err := doctor.Run(ctx, opts, crds)
	stop()
	if err != nil {
		if ctx.Err() != nil {
			return Unavailable(fmt.Errorf("interrupted: no report (nothing was changed)"))
		}
		return clusterError("checking CRDs", err)
	}
	report.KubernetesVersion = o.judged.String()
	if err := o.print(report); err != nil {
		return err
	}
	o.judged.printNote(o.g.ErrOut)
	return o.exit(report)
}

// options are doctor's options for the cluster's CRDs, the version judged as (o.judged) and
// the CRDs named (all of them when none is).
func (o *DoctorOptions) options(ctx context.Context) (doctor.Options, []*apiextensionsv1.CustomResourceDefinition, error) {
	cfg, err := o.g.RESTConfig()
	if err != nil {
		return doctor.Options{}, nil, err
	}
	c, err := o.g.crdClient()
	if err != nil {
		return doctor.Options{}, nil, err
	}
	all, err := listCRDs(ctx, c)
	if err != nil {
		return doctor.Options{}, nil, err
	}
	if o.judged, err = o.kube.resolve(ctx, o.g, true, true); err != nil {
		return doctor.Options{}, nil, err
	}
	crds, err := doctor.Select(all, o.Names)
	if errors.Is(err, crdsource.ErrNoMatch) {
		return doctor.Options{}, nil, Usage(fmt.Errorf("%w (kubectl get crds lists them)", err))
	}
	if err != nil {
		return doctor.Options{}, nil, Usage(err)
	}
	return doctor.Options{Config: cfg, AllCRDs: all, Concurrency: o.Concurrency, WebhookTimeout: o.WebhookTimeout,
		SkipRoundTrip: o.NoRoundTrip, Now: o.Now, KubeVersion: o.judged.Version}, crds, nil
}

// exit is the exit status of a printed report: 3 when a check could not be completed, 1 when
// --fail-on's severity was found.
func (o *DoctorOptions) exit(report *doctor.Report) error {
	if n := len(report.Summary.Incomplete); n > 0 {
		first := report.Summary.Incomplete[0]
		return Unavailable(fmt.Errorf("%d check(s) could not be completed, their answer is unknown (first: %s %s: %s)", n, first.CRD, first.Check, first.Error))
	}
	if report.Failed(o.FailOn) {
		what := strconv.Itoa(report.Summary.Errors) + " error(s)"
		if o.FailOn == doctor.SeverityWarning {
			what += fmt.Sprintf(", %d warning(s)", report.Summary.Warnings)
		}
		return ProblemsFound("%s found in %d CRD(s)", what, report.Summary.CRDs)
	}
	return nil
}

func (o *DoctorOptions) print(r *doctor.Report) error {
	if err := o.printer.PrintReport(o.g.Out, printers.Doctor(r)); err != nil {
		return err
	}
	for _, in := range r.Summary.Incomplete {
		fmt.Fprintf(o.g.ErrOut, "unknown: %s %s: %s\n", in.CRD, in.Check, in.Error)
	}
	return nil
}
