package plugin

import (
	"context"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/crdver/kubectl-crdver/fleet"
	"github.com/crdver/kubectl-crdver/plan"
	"github.com/crdver/kubectl-crdver/printers"
	"github.com/crdver/kubectl-crdver/upgrade"
)

// UpgradeStatusOptions are the options of `kubectl crdver upgrade status`.
type UpgradeStatusOptions struct {
	g       *Globals
	out     *outputFlags
	printer ReportPrinter

	Files        []string
	Checkpoint   string
	FieldManager string
	path         *pathFlags
	fleet        *fleetFlags
}

func newCmdUpgradeStatus(g *Globals) *cobra.Command {
	o := &UpgradeStatusOptions{g: g}
	cmd := &cobra.Command{
		Use:   "status -f NEW-CRDS",
		Short: "Show what an earlier upgrade of a release did on this cluster and what is left",
		Long: `Show, for the person who comes back after a crash, what an earlier kubectl crdver upgrade of
the release did on this cluster: the release's CRDs as the cluster has them now, the steps its
checkpoint records (only when it was written for this cluster and these CRD objects), its
backup and whether the file is still the one it took, the run that holds the CRDs now if any,
and the command that continues. Writes nothing.

With --via or --releases, as given to an upgrade along a release path: the hops the recorded
run chose, the hop it is at and, as above, that hop's release and the step it is at.

Exit code 0 when the release is in place, 1 when something is left to do.`,
		Example: "  kubectl crdver upgrade status -f new-release/\n  kubectl crdver upgrade status --releases releases/ -f releases/v1.7.3",
		RunE:    runE(o),
	}
	f := cmd.Flags()
	f.StringSliceVarP(&o.Files, "filename", "f", nil, "The release's CRDs, as given to upgrade")
	f.StringVar(&o.Checkpoint, "checkpoint", "", "The upgrade's checkpoint file, as given to upgrade (default: in your cache folder, per cluster and release)")
	f.StringVar(&o.FieldManager, "field-manager", plan.FieldManager, "Field manager of the release's server-side apply, as given to upgrade")
	o.path = addPathFlags(cmd)
	o.out = addOutputFlags(cmd, outputJSON, outputYAML)
	o.fleet = addFleetFlags(cmd, g, o.out, fleetSpec{kind: fleet.KindUpgradeStatus, timeout: 5 * time.Minute,
		refuse: map[string]string{"checkpoint": "each cluster has its own (the default, in your cache folder)"}})
	return cmd
}

// Complete resolves the printer.
func (o *UpgradeStatusOptions) Complete(_ *cobra.Command, _ []string) (err error) {
	o.printer, err = o.out.toPrinter(humanOptions{})
	return err
}

// Validate checks the flags. It does no I/O.
func (o *UpgradeStatusOptions) Validate() error {
	if err := o.out.validate(); err != nil {
		return err
	}
	if len(o.Files) == 0 {
		return UsageErrorf("give the release's CRDs with -f FILE, as given to upgrade")
	}
	if err := o.fleet.validate(); err != nil {
		return err
	}
	return o.path.validate()
}

// Run reads the status and prints it.
func (o *UpgradeStatusOptions) Run(ctx context.Context) error {
	if o.fleet.set() {
		return o.fleet.run(ctx)
	}
	next, _, err := o.g.readCRDFiles(ctx, o.Files, "-f", nil)
	if err != nil {
		return err
	}
	c, err := o.g.migrateClients()
	if err != nil {
		return err
	}
	var st *upgrade.Status
	if o.path.set() {
		via, _, err := o.path.read(ctx, o.g, o.Files)
		if err != nil {
			return err
		}
		target := plan.PathRelease{Name: releaseName(o.Files[0]), File: plan.JoinFiles(o.Files), CRDs: next}
		st, err = upgrade.GetPathStatus(ctx, c, via, target, o.Checkpoint, o.FieldManager)
		if err != nil {
			return Unavailable(err)
		}
	} else if st, err = upgrade.GetStatus(ctx, c, next, o.Checkpoint, o.FieldManager); err != nil {
		return Unavailable(err)
	}
	st.Command = o.nextCommand(st)
	if err := o.printer.PrintReport(o.g.Out, printers.UpgradeStatus(st)); err != nil {
		return err
	}
	return notInPlace(strings.Join(o.Files, ", "), st)
}

// notInPlace is the exit status of upgrade status: nil when the release is in place, else
// what is left, said as the next step.
func notInPlace(release string, st *upgrade.Status) error {
	switch st.Next {
	case upgrade.NextNothing:
		return nil
	case upgrade.NextStart:
		return ProblemsFound("the release %s is not in place and nothing has run yet: no upgrade of it is recorded on this cluster; start with %s", release, st.Command)
	case upgrade.NextContinue:
		if len(st.InCluster) > 0 {
			return ProblemsFound("the release %s is not in place: the StorageVersionMigration %s rewrites the objects of %s in the cluster; re-attach and continue with %s", release, st.InCluster[0].Name, st.InCluster[0].CRD, st.Command)
		}
		return ProblemsFound("the release %s is not in place: an upgrade of it stopped before its end; continue it with %s", release, st.Command)
	case upgrade.NextWait:
		return ProblemsFound("the release %s is not in place: another run holds its CRDs now; wait for it to end", release)
	}
	return ProblemsFound("the release %s is not in place (next: %s)", release, st.Next)
}

// nextCommand is the upgrade command line that takes the release on from st, with this
// command's flags ("" when nothing is to be run).
func (o *UpgradeStatusOptions) nextCommand(st *upgrade.Status) string {
	cmd := "kubectl crdver upgrade -f " + plan.JoinFiles(o.Files)
	if o.path.set() {
		for _, v := range o.path.via {
			cmd += " --via " + v
		}
		if o.path.releases != "" {
			cmd += " --releases " + o.path.releases
		}
	}
	if o.Checkpoint != "" {
		cmd += " --checkpoint " + o.Checkpoint
	}
	if o.FieldManager != plan.FieldManager {
		cmd += " --field-manager " + o.FieldManager
	}
	switch st.Next {
	case upgrade.NextContinue:
		if st.DataLossAccepted {
			cmd += " --allow-data-loss"
		}
		if st.FixValues {
			cmd += " --fix-values"
		}
		if len(st.InCluster) > 0 {
			cmd += " --engine cluster" // re-attaches (--detach: looks once, leaves it running)
		}
		switch {
		case st.Backup != nil && st.BackupProblem == "":
			cmd += " --backup " + st.Backup.File
		case st.Backup == nil && st.BackupFile != "":
			cmd += " --backup " + st.BackupFile // given, not taken yet
		}
		return cmd + " --yes"
	case upgrade.NextStart:
		return cmd + " --dry-run"
	}
	return st.Command
}
