package plugin

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"

	"github.com/spf13/cobra"

	"github.com/crdver/kubectl-crdver/manifest"
	"github.com/crdver/kubectl-crdver/printers"
	"github.com/crdver/kubectl-crdver/restore"
)

const restoreExample = `  # What would the restore put back? (every write sent as a server-side dry run; nothing changes)
  kubectl crdver restore -f crdver-backup-20261125-151500.yaml --dry-run

  # Put back what the upgrade dropped: asks once after the dry run
  kubectl crdver restore -f crdver-backup-20261125-151500.yaml

  # In a pipeline, overwriting fields changed since the backup and re-creating deleted objects
  kubectl crdver restore -f backup.yaml --yes --force --recreate -o json`

// RestoreOptions are the options of `kubectl crdver restore`.
type RestoreOptions struct {
	g       *Globals
	out     *outputFlags
	printer ReportPrinter

	Files                        []string
	DryRun, Yes, Force, Recreate bool
	AnyCluster                   bool
	AllowOwnershipLoss           bool
	FieldManager                 string
	progressFlags                *progressFlags
	progress                     Progress
}

// NewCmdRestore builds `kubectl crdver restore`.
func NewCmdRestore(g *Globals) *cobra.Command {
	o := &RestoreOptions{g: g}
	cmd := &cobra.Command{
		Use:   "restore -f BACKUP [--dry-run] [--yes] [--force] [--recreate]",
		Short: "Put back from an upgrade's backup the objects and fields the upgrade dropped, onto the CRDs in place now",
		Long: `Restore from the backup file an upgrade wrote (every object at every version that held its
data) what the cluster no longer has: fields the upgrade dropped with your consent, once a release
whose CRDs hold them again is applied (an upgrade to the old release), and objects deleted since
(with --recreate).

For each object of the backup:
1. Pick the served version of the live CRD that keeps the most of it. Conversion None: the object
   is relabelled to each served version and the API server's own create path (pruning in that
   version and in the storage version) says what the version keeps. Webhook: the backup's own
   version, when it is still served (the API server converts through the webhook).
2. Compare every field of the backup (spec and the other top-level fields, each label and
   annotation; never status or server-set metadata) with the live object at that version: a
   missing field is restored, an equal one is unchanged, one whose value changed since the
   backup is a conflict and the object is left alone (--force overwrites it).
3. Write the missing fields as a merge patch with the live resourceVersion, as field manager
   --field-manager (default kubectl-crdver-restore): no other manager's entries are touched.

Every write is first sent as a server-side dry run over the whole backup and shown; --dry-run
stops there; without --yes it asks before writing. Fields no served version holds are listed by
path, never dropped silently. An object deleted since the backup is re-created only with
--recreate (without status, ownerReferences and finalizers). The backup is read one document at
a time.

Exit codes: 0 everything in the backup is in the cluster (restored, re-created or unchanged);
1 something is not (conflict, deleted and not re-created, fields no version holds, a write
rejected or forbidden for the object); 2 usage; 3 could not complete (unreachable, unauthorized,
interrupted, not confirmed).`,
		Example: restoreExample,
		Args:    cobra.NoArgs,
		RunE:    runE(o),
	}
	f := cmd.Flags()
	f.StringSliceVarP(&o.Files, "filename", "f", nil, "The backup file of kubectl crdver upgrade (- for stdin)")
	f.BoolVar(&o.DryRun, "dry-run", false, "Send every write as a server-side dry run only; write nothing")
	f.BoolVarP(&o.Yes, "yes", "y", false, "Do not ask before writing")
	f.BoolVar(&o.Force, "force", false, "Overwrite fields whose live value changed since the backup")
	f.BoolVar(&o.Recreate, "recreate", false, "Re-create objects deleted since the backup")
	f.BoolVar(&o.AnyCluster, "from-another-cluster", false, "Restore a backup taken on another cluster than the one reached (refused by default)")
	f.StringVar(&o.FieldManager, "field-manager", restore.FieldManager, "Field manager of the restore's writes")
	f.BoolVar(&o.AllowOwnershipLoss, "allow-ownership-loss", false, "Write even when the API server's dry run of a write drops field managers of the object (listed per object; refused by default, nothing written)")
	o.out = addOutputFlags(cmd, outputJSON, outputYAML)
	o.progressFlags = addProgressFlags(cmd)
	return cmd
}

// Complete resolves the printer and the progress display.
func (o *RestoreOptions) Complete(_ *cobra.Command, _ []string) (err error) {
	o.progress = o.progressFlags.toProgress(o.g.ErrOut)
	o.printer, err = o.out.toPrinter(humanOptions{})
	return err
}

// Validate checks the flags. It does no I/O.
func (o *RestoreOptions) Validate() error {
	if err := o.out.validate(); err != nil {
		return err
	}
	if err := o.progressFlags.validate(); err != nil {
		return err
	}
	switch {
	case len(o.Files) == 0:
		return UsageErrorf("give the backup with -f FILE (the file kubectl crdver upgrade wrote, or - for stdin)")
	case o.FieldManager == "":
		return UsageErrorf("--field-manager must not be empty")
	case o.DryRun && o.Yes:
		return UsageErrorf("--dry-run writes nothing: it takes no --yes")
	}
	return nil
}

// Run restores.
func (o *RestoreOptions) Run(ctx context.Context) error {
	c, err := o.g.migrateClients()
	if err != nil {
		return err
	}
	printed := false // the dry run was printed with the question
	ro, stop := o.restoreOptions(&printed)
	rep, err := restore.Run(ctx, c, ro)
	stop()
	if errors.Is(err, restore.ErrNotConfirmed) && rep != nil && rep.Counts[restore.StateRestored]+rep.Counts[restore.StateRecreated] == 0 {
		// Nothing to write: the dry run is the answer.
		return o.finish(rep, true)
	}
	if err != nil {
		if rep != nil && !printed {
			_ = o.printer.PrintReport(o.g.Out, printers.Restore(rep))
		}
		return o.runError(ctx, err)
	}
	if printed && !printsData(o.printer) {
		fmt.Fprintln(o.g.Out)
		fmt.Fprintln(o.g.Out, "Written:")
	}
	return o.finish(rep, false)
}

// restoreOptions are restore.Run's options from the flags, with a progress display per pass
// (stop ends the current one) and the question after the dry run (printed set when it prints
// the dry run's report).
func (o *RestoreOptions) restoreOptions(printed *bool) (ro restore.Options, stop func()) {
	var done atomic.Int64
	end := func() {}
	started := false
	ro = restore.Options{
		Files: o.Files, Stdin: o.g.In, DryRun: o.DryRun, Force: o.Force, Recreate: o.Recreate, AnyCluster: o.AnyCluster, FieldManager: o.FieldManager,
		AllowOwnershipLoss: o.AllowOwnershipLoss,
		OnObject: func(restore.Outcome) {
			if !started {
				started = true
				e := o.progress.Start(Task{Name: "restoring", Prefix: "restore", Unit: "objects", Verb: "compared", Done: done.Load, TotalFunc: func() int64 { return -1 }})
				end = func() { e(); end = func() {} }
			}
			done.Add(1)
		},
	}
	ro.Confirm = func(r *restore.Report) (bool, error) {
		end() // the dry-run pass's display
		started = false
		done.Store(0)
		if o.Yes {
			return true, nil // the report of the writes follows
		}
		*printed = true
		if err := o.printer.PrintPart(o.g.Out, printers.Restore(r)); err != nil {
			return false, err
		}
		if r.Counts[restore.StateRestored]+r.Counts[restore.StateRecreated] == 0 {
			return false, nil // nothing to write: the dry run is the answer
		}
		return o.g.confirm("Write these restores (the dry run above)? [y/N]: ")
	}
	return ro, func() { end() }
}

// finish prints the report and maps it to the exit code.
func (o *RestoreOptions) finish(rep *restore.Report, nothingToWrite bool) error {
	if !nothingToWrite || printsData(o.printer) {
		if err := o.printer.PrintReport(o.g.Out, printers.Restore(rep)); err != nil {
			return err
		}
	}
	if o.DryRun && !printsData(o.printer) {
		if err := o.printer.PrintPart(o.g.Out, printers.DryRunNote()); err != nil {
			return err
		}
	}
	if n := rep.Incomplete(); n > 0 {
		return ProblemsFound("%s", o.advice(rep, n))
	}
	if l := rep.OwnershipLosses(); o.DryRun && len(l) > 0 && !o.AllowOwnershipLoss {
		return ProblemsFound("%v (listed above); the restore refuses this without --allow-ownership-loss: re-apply them from each manager's source afterwards, or fix what the API server cannot type first", &restore.OwnershipLossError{Objects: l})
	}
	return nil
}

// advice words what is left with this command's flags.
func (o *RestoreOptions) advice(rep *restore.Report, n int) error {
	var parts []string
	if k := rep.Counts[restore.StateConflict]; k > 0 {
		parts = append(parts, fmt.Sprintf("%s changed since the backup (look at them; --force overwrites their fields)", plural(k, "object")))
	}
	if k := rep.Counts[restore.StateMissing]; k > 0 {
		parts = append(parts, fmt.Sprintf("%s deleted since the backup (--recreate re-creates them)", plural(k, "object")))
	}
	notHeld := 0
	for _, x := range rep.Objects {
		if len(x.NotHeld) > 0 {
			notHeld++
		}
	}
	if notHeld > 0 {
		parts = append(parts, fmt.Sprintf("%s with fields no served version holds (apply a release whose CRDs hold them, e.g. kubectl crdver upgrade -f OLD-RELEASE, then restore again)", plural(notHeld, "object")))
	}
	if k := rep.Counts[restore.StateFailed]; k > 0 {
		parts = append(parts, fmt.Sprintf("%s failed (reasons above)", plural(k, "object")))
	}
	what := "the restore is not complete"
	if rep.DryRun {
		what = "the restore would not be complete"
	}
	return fmt.Errorf("%s: %s", what, strings.Join(parts, "; "))
}

func (o *RestoreOptions) runError(ctx context.Context, err error) error {
	var ie *manifest.InputError
	var ue *manifest.UnavailableError
	var oe *restore.OwnershipLossError
	switch {
	case errors.As(err, &oe):
		return ProblemsFound("nothing was written: %v (listed above): accept it with --allow-ownership-loss and re-apply from each manager's source afterwards, or first fix what the API server cannot type at the version written (values of another type: the plan's fix-values step)", oe)
	case errors.Is(err, restore.ErrNotConfirmed):
		return Unavailable(errors.New("nothing was written: not confirmed (use --yes to skip the question)"))
	case errors.Is(err, restore.ErrOtherCluster):
		return ProblemsFound("%v; check --kubeconfig and --context, or, to put its objects into this cluster, add --from-another-cluster", err)
	case ctx.Err() != nil:
		return Unavailable(fmt.Errorf("interrupted: %w; objects restored so far stay restored, run the same command again to restore the rest", err))
	case errors.As(err, &ie):
		return UsageErrorf("reading the backup: %v", ie)
	case errors.As(err, &ue):
		return Unavailable(fmt.Errorf("reading the backup: %w", ue))
	}
	return clusterError("restoring", err)
}
