package plugin

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	"github.com/crdver/kubectl-crdver/migrate"
	"github.com/crdver/kubectl-crdver/outcome"
	"github.com/crdver/kubectl-crdver/preflight"
	"github.com/crdver/kubectl-crdver/printers"
	"github.com/crdver/kubectl-crdver/retire"
)

const retireExample = `  # What would retiring v1beta1 do? (reads only)
  kubectl crdver retire crontabs.stable.example.com v1beta1 --dry-run

  # Move everything off v1beta1, then stop serving it and remove it from the CRD
  kubectl crdver retire crontabs.stable.example.com v1beta1 --unserve --remove

  # In a runbook: no question, no progress, a JSON report
  kubectl crdver retire crontabs.stable.example.com v1beta1 --to v1 --yes --quiet -o json

  # Hand the rewrite to the cluster's StorageVersionMigration and leave it running there;
  # the same command again re-attaches, checks every object and goes on
  kubectl crdver retire crontabs.stable.example.com v1beta1 --engine cluster --detach --yes`

// RetireOptions are the options of `kubectl crdver retire`.
type RetireOptions struct {
	g       *Globals
	source  *crdSource
	out     *outputFlags
	printer ReportPrinter
	cmd     *cobra.Command

	Name, Version, To                   string
	DryRun, Yes, Unserve, Remove, Force bool
	RewriteFlags
	// Engine rewrites the objects (client or cluster); Detach leaves the cluster's
	// StorageVersionMigration running (--engine cluster).
	Engine        string
	Detach        bool
	progressFlags *progressFlags
	progress      Progress
}

// NewCmdRetire builds `kubectl crdver retire`.
func NewCmdRetire(g *Globals) *cobra.Command {
	o := &RetireOptions{g: g, source: &crdSource{g: g, flag: "filename"}}
	cmd := &cobra.Command{
		Use:   "retire CRD VERSION [--to V] [--dry-run] [--unserve] [--remove]",
		Short: "Prepare a CRD so that a version can be dropped: storage, objects, storedVersions, managedFields, then unserve/remove",
		Long: `Retire a version of a CRD, in a safe order, each step re-checked against a fresh read of the CRD:

1. make another version the storage version, if VERSION is it (--to, or the highest-priority
   served version that stays);
2. rewrite every object so that it is stored at the storage version (the migrate engine,
   resumable from its checkpoint; with --engine cluster, the cluster's StorageVersionMigration,
   checked object by object by this command, and --detach leaves it running there: exit 3, and
   the same command again re-attaches to it);
3. trim status.storedVersions (only when every object is accounted for);
4. move every metadata.managedFields entry that names VERSION to the target version, keeping
   each manager's ownership. Without this, once VERSION is removed, server-side apply of those
   objects fails with "request to convert CR to an invalid group/version" and plain updates
   drop all managedFields (kubernetes#111937). Fields the conversion renames are translated
   through the CRD's own conversion while VERSION is still served;
5. --unserve sets served: false, --remove drops VERSION from spec.versions.

It first reports which field managers still write VERSION, and does not unserve or remove it
when one has written it since the run began, when entries of it remain, or when the CRD looks
managed by Helm, Argo CD, Flux or OLM (they would put it back): --force overrides.

Running it again continues where it stopped: steps already done are found in the live state
and in migrate's checkpoint. It asks once before writing, unless --yes.

Exit codes: 0 done; 1 something keeps VERSION from being dropped safely (said why); 2 usage;
3 could not complete (forbidden, unreachable, interrupted: run it again to resume).`,
		Example:           retireExample,
		ValidArgsFunction: completeCRDNames(g),
		RunE:              runE(o),
	}
	o.cmd = cmd
	o.out = addOutputFlags(cmd, outputWide, outputJSON, outputYAML)
	f := cmd.Flags()
	f.StringVar(&o.To, "to", "", "The version to move to (default: the highest-priority served version other than VERSION)")
	registerVersionCompletion(cmd, o.source, "to")
	cmd.ValidArgsFunction = completeCRDThenVersion(g, o.source)
	f.BoolVar(&o.DryRun, "dry-run", false, "Print the steps and write nothing")
	f.BoolVarP(&o.Yes, "yes", "y", false, "Do not ask before writing")
	f.BoolVar(&o.Unserve, "unserve", false, "At the end, set served: false on VERSION")
	f.BoolVar(&o.Remove, "remove", false, "At the end, remove VERSION from spec.versions (unserving it first)")
	f.BoolVar(&o.Force, "force", false, "Unserve/remove even if a manager still writes VERSION, entries remain, or a deployment tool manages the CRD")
	o.addRewriteFlags(f, "Checkpoint file of the rewrite (default: migrate's, in your cache folder, per cluster and CRD)")
	addEngineFlag(cmd, &o.Engine, "Who rewrites the objects: client (this command) or cluster (a storagemigration.k8s.io StorageVersionMigration, checked object by object by this command)")
	addDetachFlag(cmd, &o.Detach)
	o.progressFlags = addProgressFlags(cmd)
	cmd.Flags().Lookup("quiet").Usage = "Only the result: no progress, and no plan unless a question is asked about it"
	return cmd
}

// Complete takes the arguments.
func (o *RetireOptions) Complete(_ *cobra.Command, args []string) error {
	if len(args) != 2 {
		return UsageErrorf("retire takes a CRD and a version, got %d arguments (e.g. kubectl crdver retire crontabs.stable.example.com v1beta1)", len(args))
	}
	o.Name, o.Version = args[0], args[1]
	o.progress = o.progressFlags.toProgress(o.g.ErrOut)
	var err error
	o.printer, err = o.out.toPrinter(humanOptions{})
	return err
}

// Validate checks the flags. It does no I/O.
func (o *RetireOptions) Validate() error {
	if err := o.out.validate(); err != nil {
		return err
	}
	if err := o.progressFlags.validate(); err != nil {
		return err
	}
	if err := o.validateRewriteFlags(); err != nil {
		return err
	}
	if err := validateEngineFlags(o.Engine, o.Detach, o.DryRun, o.Checkpoint); err != nil {
		return err
	}
	if o.To != "" && o.To == o.Version {
		return UsageErrorf("--to %s is the version being retired: name the version to move to", o.To)
	}
	return nil
}

// Run plans, asks, and retires.
func (o *RetireOptions) Run(ctx context.Context) error {
	c, err := o.g.migrateClients()
	if err != nil {
		return err
	}
	crd, err := o.source.one(ctx, o.Name)
	if err != nil {
		return err
	}
	printed := false // the plan was printed before the run's end
	res, err := retire.Run(ctx, c, o.retireOptions(crd, &printed))
	if _, refused := outcome.Of(err); refused {
		if printsData(o.printer) {
			_ = o.printer.PrintReport(o.g.Out, printers.Retire(res, false))
		}
		return end(res.Outcome, nil)
	}
	if res.Plan != nil {
		if !printed {
			if perr := o.printer.PrintPart(o.g.Out, printers.RetirePlan(res.Plan)); perr != nil {
				return perr
			}
		}
		// The human report leaves out the result of a dry or unconfirmed run (the plan says it all).
		if perr := o.printer.PrintReport(o.g.Out, printers.Retire(res, !o.DryRun && !errors.Is(err, retire.ErrNotConfirmed))); perr != nil {
			return perr
		}
	}
	if err != nil {
		return end(res.Outcome, o.runError(ctx, crd.Name, err))
	}
	if o.DryRun {
		return o.printer.PrintPart(o.g.Out, printers.DryRunNote())
	}
	return end(res.Outcome, nil)
}

// retireOptions are retire.Run's options from the flags, with the progress display, the
// preflight (refusing as the flags say), the printer of the plan (printed set once it is
// printed) and the question.
func (o *RetireOptions) retireOptions(crd *apiextensionsv1.CustomResourceDefinition, printed *bool) retire.Options {
	var pre *preflight.Report
	ro := retire.Options{
		CRD: crd.Name, Version: o.Version, To: o.To, DryRun: o.DryRun, Unserve: o.Unserve, Remove: o.Remove, Force: o.Force,
		Rewrite: o.rewriteOptions(), Budget: true, Engine: migrate.Engine(o.Engine),
		OnRewrite: func(r *migrate.Rewriter, total int64) func() {
			return o.progress.Start(Task{Name: "rewriting", Prefix: "retire", Unit: "objects", Total: total,
				Done: func() int64 { return r.Progress().Total() }})
		},
		OnScan: func(what string, done func() int64) func() {
			return o.progress.Start(Task{Name: "reading", Prefix: "retire", Unit: "objects", Verb: "read " + what, Done: done, Total: -1})
		},
		Notify: func(s string) { o.progress.Notef("retire: %s", s) },
		PreWrite: func(ctx context.Context, crd *apiextensionsv1.CustomResourceDefinition, target string) (any, error) {
			rep, err := o.g.runPreflight(ctx, crd, target, o.RewriteFlags, o.progress, o.printer, "retire")
			if err != nil {
				return nil, err
			}
			pre = rep
			return rep, o.refusal([]*preflight.Report{rep}, fmt.Sprintf("kubectl crdver retire %s %s", crd.Name, o.Version))
		},
		OwnershipLossConsented: func(res *migrate.Result) bool { return o.ownershipLossConsented(pre, res) },
		// --quiet leaves only the result: the plan is shown when it is the result (a dry run) or
		// when a question is asked about it.
		Planned: func(p *retire.Plan) {
			*printed = true
			if o.progressFlags.quiet && !o.DryRun && (o.Yes || !planWrites(p)) {
				return
			}
			_ = o.printer.PrintPart(o.g.Out, printers.RetirePlan(p))
		},
		Confirm: func(p *retire.Plan) (bool, error) {
			if o.Yes || !planWrites(p) {
				return true, nil
			}
			return o.g.confirm(fmt.Sprintf("Carry out the pending steps on %s? [y/N]: ", p.CRD))
		},
	}
	ro.Rewrite.Detach = o.Detach
	return ro
}

// runError words retire.Run's error with this command's flags (its exit code is the result's
// Outcome).
func (o *RetireOptions) runError(ctx context.Context, name string, err error) error {
	var de *migrate.DetachedError
	switch {
	case errors.As(err, &de):
		// Not --detach again: the command follows the migration to its end (with it, it looks once).
		return fmt.Errorf("%w; re-attach with: %s", de, sameCommand(o.cmd, []string{"kubectl", "crdver", "retire", name, o.Version}, "dry-run", "progress-interval", "detach"))
	case errors.Is(err, retire.ErrUsage):
		return errors.New(strings.TrimPrefix(err.Error(), retire.ErrUsage.Error()+": "))
	case errors.Is(err, retire.ErrNotConfirmed):
		return fmt.Errorf("%s: nothing was written: not confirmed (use --yes to skip the question)", name)
	case errors.Is(err, retire.ErrInterrupted):
		return fmt.Errorf("%w; run the same command again to resume", err)
	case ctx.Err() != nil:
		return fmt.Errorf("%s: interrupted (%v); run the same command again to resume: the steps done are found in the live state", name, err)
	default:
		return clusterText(fmt.Sprintf("retiring %s of %s", o.Version, name), err)
	}
}

func planWrites(p *retire.Plan) bool {
	for _, s := range p.Steps {
		if s.State == retire.StatePending {
			return true
		}
	}
	return false
}
