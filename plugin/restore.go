package plugin

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync/atomic"

	"github.com/spf13/cobra"

	"github.com/crdver/kubectl-crdver/internal/scratch"
	"github.com/crdver/kubectl-crdver/manifest"
	"github.com/crdver/kubectl-crdver/outcome"
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
	Concurrency                  int
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
a time; --concurrency documents are restored at once (each object's documents one after another),
and the report keeps the backup's order.

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
	f.IntVar(&o.Concurrency, "concurrency", restore.DefaultConcurrency, "Backup documents restored at once (each object's one after another; the report keeps the backup's order)")
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
	case o.Concurrency < 1 || o.Concurrency > 64:
		return UsageErrorf("--concurrency must be between 1 and 64, got %d", o.Concurrency)
	}
	return nil
}

// Run restores, printing each pass's outcomes as they come.
func (o *RestoreOptions) Run(ctx context.Context) error {
	c, err := o.g.migrateClients()
	if err != nil {
		return err
	}
	p, err := o.newRestorePasses()
	if err != nil {
		return err
	}
	defer p.close()
	ro, stop := o.restoreOptions(p)
	rep, err := restore.Run(ctx, c, ro)
	stop()
	return o.finish(ctx, p, rep, err, ro.Ended(ctx, rep, err))
}

// finish completes the report of the pass the run ended in and ends with restore's outcome
// out (its exit code), the errors worded with this command's flags.
func (o *RestoreOptions) finish(ctx context.Context, p *restorePasses, rep *restore.Report, err error, out outcome.Outcome) error {
	if errors.Is(err, restore.ErrNotConfirmed) && rep != nil && rep.Writes() == 0 {
		// Nothing to write: the dry run is the answer.
		if err := p.endDryRun(rep, true); err != nil {
			return err
		}
		return end(out, nil)
	}
	if err != nil {
		if rep != nil && rep.DryRun {
			_ = p.endDryRun(rep, true)
		} else if rep != nil {
			_ = p.write.Finish(rep) // interrupted: what was written so far
		}
		return end(out, o.runError(ctx, rep, err))
	}
	if rep.DryRun {
		if err := p.endDryRun(rep, true); err != nil {
			return err
		}
	} else if err := p.endWrite(rep); err != nil {
		return err
	}
	if o.DryRun && !printsData(o.printer) {
		if err := o.printer.PrintPart(o.g.Out, printers.DryRunNote()); err != nil {
			return err
		}
	}
	return end(out, nil)
}

// restorePasses print the two passes of a restore as their outcomes come. The dry run's go to
// stdout when they are the answer or come before the question (--dry-run; for people, without
// --yes), else to a temporary file, shown only when the run ends after the dry run (nothing to
// write, a refusal, an error): one report on stdout either way, and memory bounded by a chunk.
type restorePasses struct {
	o     *RestoreOptions
	dry   *printers.RestoreStream
	spool *scratch.File // the dry run's output, when it is not shown at once
	write *printers.RestoreStream
	// dryDone: the dry run's report is complete; wrote: the write pass printed its first line.
	dryDone, wrote bool
}

func (o *RestoreOptions) newRestorePasses() (*restorePasses, error) {
	p := &restorePasses{o: o, write: printers.NewRestoreStream(o.g.Out, o.printer)}
	if o.DryRun || (!o.Yes && !printsData(o.printer)) {
		p.dry = printers.NewRestoreStream(o.g.Out, o.printer)
		return p, nil
	}
	f, err := scratch.New("crdver-restore-dry-run-*.txt")
	if err != nil {
		return nil, Unavailable(fmt.Errorf("a temporary file for the dry run's report: %w", err))
	}
	p.spool, p.dry = f, printers.NewRestoreStream(f, o.printer)
	return p, nil
}

// each prints one outcome (restore.Options.Each).
func (p *restorePasses) each(pass *restore.Report, x restore.Outcome) error {
	if pass.DryRun {
		return p.dry.Outcome(pass, x)
	}
	if !p.wrote && p.spool == nil && !printsData(p.o.printer) {
		// Under the dry run's report and the question.
		fmt.Fprintln(p.o.g.Out)
		fmt.Fprintln(p.o.g.Out, "Written:")
	}
	p.wrote = true
	return p.write.Outcome(pass, x)
}

// endDryRun completes the dry run's report; shown: it is the run's answer (a spooled report
// is copied to stdout).
func (p *restorePasses) endDryRun(rep *restore.Report, shown bool) error {
	if !p.dryDone {
		p.dryDone = true
		if err := p.dry.Finish(rep); err != nil {
			return err
		}
	}
	if !shown || p.spool == nil {
		return nil
	}
	if _, err := p.spool.Seek(0, io.SeekStart); err != nil {
		return err
	}
	_, err := io.Copy(p.o.g.Out, p.spool)
	p.close()
	return err
}

// endWrite completes the write pass's report (the header of an empty one included).
func (p *restorePasses) endWrite(rep *restore.Report) error {
	if !p.wrote && p.spool == nil && !printsData(p.o.printer) {
		fmt.Fprintln(p.o.g.Out)
		fmt.Fprintln(p.o.g.Out, "Written:")
	}
	return p.write.Finish(rep)
}

func (p *restorePasses) close() {
	if p.spool != nil {
		_ = p.spool.Close()
		p.spool = nil
	}
}

// restoreOptions are restore.Run's options from the flags, with a progress display per pass
// (stop ends the current one), the outcomes printed as they come, and the question after the
// dry run.
func (o *RestoreOptions) restoreOptions(p *restorePasses) (ro restore.Options, stop func()) {
	var done, total atomic.Int64
	total.Store(-1)
	end := func() {}
	started := false
	ro = restore.Options{
		Files: o.Files, Stdin: o.g.In, DryRun: o.DryRun, Force: o.Force, Recreate: o.Recreate, AnyCluster: o.AnyCluster, FieldManager: o.FieldManager,
		AllowOwnershipLoss: o.AllowOwnershipLoss, Concurrency: o.Concurrency,
		Each:    p.each,
		OnTotal: total.Store,
		OnObject: func(restore.Outcome) {
			if !started {
				started = true
				e := o.progress.Start(Task{Name: "restoring", Prefix: "restore", Unit: "objects", Verb: "compared", Done: done.Load, TotalFunc: total.Load})
				end = func() { e(); end = func() {} }
			}
			done.Add(1)
		},
	}
	ro.Confirm = func(r *restore.Report) (bool, error) {
		end() // the dry-run pass's display
		started = false
		done.Store(0)
		nothing := r.Writes() == 0
		if err := p.endDryRun(r, false); err != nil {
			return false, err
		}
		if o.Yes {
			return true, nil // the report of the writes follows
		}
		if nothing {
			return false, nil // nothing to write: the dry run is the answer
		}
		return o.g.confirm("Write these restores (the dry run above)? [y/N]: ")
	}
	return ro, func() { end() }
}

// runError words what stopped the restore with this command's flags (its exit code is
// restore's outcome).
func (o *RestoreOptions) runError(ctx context.Context, rep *restore.Report, err error) error {
	var ie *manifest.InputError
	var ue *manifest.UnavailableError
	var oe *restore.OwnershipLossError
	switch {
	case errors.As(err, &oe):
		return fmt.Errorf("nothing was written: %v (listed above): accept it with --allow-ownership-loss and re-apply from each manager's source afterwards, or first fix what the API server cannot type at the version written (values of another type: the plan's fix-values step)", oe)
	case errors.Is(err, restore.ErrNotConfirmed):
		return errors.New("nothing was written: not confirmed (use --yes to skip the question)")
	case errors.Is(err, restore.ErrOtherCluster):
		return fmt.Errorf("%v; check --kubeconfig and --context, or, to put its objects into this cluster, add --from-another-cluster", err)
	case ctx.Err() != nil && (rep == nil || rep.DryRun):
		what := "before the first backup document"
		if rep != nil {
			what = "after " + plural(rep.Documents, "backup document") + " of the dry run"
		}
		return fmt.Errorf("interrupted %s: nothing was written", what)
	case ctx.Err() != nil:
		return fmt.Errorf("interrupted after %s of the pass that writes (the report above): objects restored so far stay restored, run the same command again to restore the rest", plural(rep.Documents, "backup document"))
	case errors.As(err, &ie):
		return fmt.Errorf("reading the backup: %v", ie)
	case errors.As(err, &ue):
		return fmt.Errorf("reading the backup: %w", ue)
	}
	return clusterText("restoring", err)
}
