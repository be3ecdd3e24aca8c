package plugin

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/crdver/kubectl-crdver/fleet"
	"github.com/crdver/kubectl-crdver/migrate"
	"github.com/crdver/kubectl-crdver/printers"
)

// MigrateStatusOptions are the options of `kubectl crdver migrate status`.
type MigrateStatusOptions struct {
	g       *Globals
	source  *crdSource
	out     *outputFlags
	printer ReportPrinter

	Name       string
	Checkpoint string
	fleet      *fleetFlags
}

func newCmdMigrateStatus(g *Globals) *cobra.Command {
	o := &MigrateStatusOptions{g: g, source: &crdSource{g: g, flag: "filename"}}
	cmd := &cobra.Command{
		Use:   "status CRD",
		Short: "Show status.storedVersions, the storage version and whether a trim is safe",
		Long: `Show a CRD's storage version and status.storedVersions, whether a migration is pending, and
whether trimming status.storedVersions to the storage version is safe: it is when the last run
of kubectl crdver migrate (recorded in its checkpoint file) accounted for every object with
none failed, and the CRD (storage version, generation) has not changed since.

Exit code 1 when a migration is pending and a trim is not known to be safe.`,
		Example:           "  kubectl crdver migrate status crontabs.stable.example.com",
		ValidArgsFunction: completeCRDNames(g),
		RunE:              runE(o),
	}
	o.out = addOutputFlags(cmd, outputJSON, outputYAML)
	cmd.Flags().StringVar(&o.Checkpoint, "checkpoint", "", "Checkpoint file of the last run (default: in your cache folder, per cluster and CRD)")
	o.fleet = addFleetFlags(cmd, g, o.out, fleetSpec{kind: fleet.KindMigrateStatus, timeout: 5 * time.Minute,
		refuse: map[string]string{"checkpoint": "each cluster has its own (the default, in your cache folder)"}})
	return cmd
}

// Complete takes the argument.
// Complete takes the arguments and resolves the printer.
func (o *MigrateStatusOptions) Complete(_ *cobra.Command, args []string) (err error) {
	if err := o.completeArgs(args); err != nil {
		return err
	}
	o.printer, err = o.out.toPrinter(humanOptions{})
	return err
}

func (o *MigrateStatusOptions) completeArgs(args []string) error {
	if len(args) != 1 {
		return UsageErrorf("migrate status takes one CRD name, got %d", len(args))
	}
	o.Name = args[0]
	return nil
}

// Validate checks the flags.
func (o *MigrateStatusOptions) Validate() error {
	if err := o.out.validate(); err != nil {
		return err
	}
	return o.fleet.validate()
}

// Run prints the status.
func (o *MigrateStatusOptions) Run(ctx context.Context) error {
	if o.fleet.set() {
		return o.fleet.run(ctx)
	}
	cfg, err := o.g.RESTConfig() // loaded once per run (clients.go)
	if err != nil {
		return err
	}
	crd, err := o.source.one(ctx, o.Name)
	if err != nil {
		return err
	}
	path := o.Checkpoint
	if path == "" {
		if path, err = migrate.DefaultCheckpointPath(cfg.Host, crd.Name); err != nil {
			path = ""
		}
	}
	st, err := migrate.GetStatus(crd, cfg.Host, path)
	if err != nil {
		return Unavailable(checkpointAdvice(err))
	}
	st.Reason = statusReason(st)
	census, mfNotes := clusterManagedFields(ctx, o.g, o.source.offline(), crd)
	if err := o.printer.PrintReport(o.g.Out, printers.WithCensus(printers.MigrateStatus(st), census, mfNotes)); err != nil {
		return err
	}
	if st.Pending && !st.TrimSafe {
		return ProblemsFound("%s: a migration is pending: %s", crd.Name, st.Reason)
	}
	return nil
}

// statusReason is the status's reason with what to do next, worded with this plugin's commands.
func statusReason(st *migrate.Status) string {
	switch st.Next {
	case migrate.NextMigrate:
		return fmt.Sprintf("%s; run kubectl crdver migrate %s", st.Reason, st.CRD)
	case migrate.NextResume:
		return fmt.Sprintf("%s: run kubectl crdver migrate %s to resume it", st.Reason, st.CRD)
	case migrate.NextTrim:
		return fmt.Sprintf("%s (kubectl crdver migrate %s does it after a quick re-check)", st.Reason, st.CRD)
	case migrate.NextAttach:
		return fmt.Sprintf("%s: re-attach with kubectl crdver migrate %s --engine cluster (or the upgrade that started it: the same command again; add --detach to look once and leave it running)", st.Reason, st.CRD)
	}
	return st.Reason
}
