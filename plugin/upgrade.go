package plugin

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/spf13/cobra"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	"github.com/crdver/kubectl-crdver/fleet"
	"github.com/crdver/kubectl-crdver/migrate"
	"github.com/crdver/kubectl-crdver/plan"
	"github.com/crdver/kubectl-crdver/printers"
	"github.com/crdver/kubectl-crdver/upgrade"
	"github.com/crdver/kubectl-crdver/webhookcheck"
)

const upgradeExample = `  # What would the upgrade do? (the runbook and the preflight; nothing is written)
  kubectl crdver upgrade -f release-1.0/crds/ --dry-run

  # Carry it out: asks once before the first write; the backup goes to ./crdver-backup-<time>.yaml
  kubectl crdver upgrade -f release-1.0/crds/

  # In a pipeline: no question, a JSON report, the backup where you want it
  kubectl crdver upgrade -f release-1.0/crds/ --yes --backup /backups/before-1.0.yaml -o json

  # Follow the runbook by hand: write the intermediate CRDs it names
  kubectl crdver upgrade -f release-1.0/crds/ --intermediate-crds > crdver-intermediate.yaml`

// UpgradeOptions are the options of `kubectl crdver upgrade`.
type UpgradeOptions struct {
	g       *Globals
	out     *outputFlags
	printer ReportPrinter

	Files                                  []string
	DryRun, Yes, AllowDataLoss             bool
	AllowOwnershipLoss, FixValues          bool
	SkipInvalid, NoApply, IntermediateCRDs bool
	Backup, FieldManager, Checkpoint       string
	Engine                                 string
	Detach                                 bool
	ChunkSize                              int64
	Webhook                                string
	webhook                                *webhookcheck.Target
	progressFlags                          *progressFlags
	progress                               Progress
	kube                                   *kubeVersionFlag
	path                                   *pathFlags
	fleet                                  *fleetFlags
}

// NewCmdUpgrade builds `kubectl crdver upgrade`.
func NewCmdUpgrade(g *Globals) *cobra.Command {
	o := &UpgradeOptions{g: g}
	cmd := &cobra.Command{
		Use:   "upgrade -f NEW-CRDS [--dry-run] [--yes] [--allow-data-loss] [--no-apply]",
		Short: "Upgrade a cluster to a release's CRDs, losing nothing: preflight, backup, storage steps per CRD, one apply, verify",
		Long: `Carry out the runbook that plan prints for the same input, for the whole release at once:

1. Plan every CRD of the release against the cluster and preflight every object under the new
   CRDs: fields the re-encoding at the new storage version drops, writes that would be rejected.
   If any, stop before writing anything, list the objects and fields, and say how to keep them
   (--allow-data-loss goes on past the fields dropped; --skip-invalid past objects whose next
   write would be rejected, which then keep their CRD's status.storedVersions untrimmed;
   --fix-values past values of another type than the new storage version's schema: it converts
   them after the backup, keeping every field manager, and stops for you at those with no
   lossless conversion). Objects stored at a
   version the live CRD no longer serves can be read as stored only at it: the upgrade first
   serves it again (asked for like any write; --dry-run does not, and says the preflight is not
   complete) and serves it no longer if the upgrade is then refused or not confirmed. Where the
   release makes stored objects read or written at another version, every one is round-tripped
   through the conversion webhook the new CRDs name (or --webhook) first: when that webhook is not
   running, not reachable or fails on objects, it stops before writing anything, says what to do
   (deploy the release's webhook and wait until it answers), and no option goes on; run it again
   once the webhook answers.
2. Back up every object at every version that holds its data (--backup FILE, default
   ./crdver-backup-<time>.yaml): a read at the preferred version may already drop those fields.
3. Per CRD: where the live CRD lacks the new storage version, apply an intermediate CRD (the new
   one with the removed versions kept, served); switch the storage version, rewrite every object,
   trim status.storedVersions and move managedFields entries off removed versions (the migrate and
   retire engines, resumable).
4. One server-side apply of the whole release, conflicts forced (the storage steps changed
   .spec.versions as field manager kubectl-crdver), as --field-manager (default kubectl: your next
   server-side kubectl apply of the release does not conflict). --no-apply stops before it.
   When Helm, Flux, Argo CD or OLM manage the CRDs, it stops here: let that tool apply them.
5. Verify: status.storedVersions is the storage version only, server-side apply works on the
   objects, and plan of the same release finds nothing breaking.

It asks once before the first write unless --yes; --dry-run prints the runbook and the preflight
only. Interrupted (Ctrl-C), it is resumed by running the same command again: steps found done in
the live state or in its checkpoint are not done again, and the first backup is kept.

Objects the new CRDs reject on re-create although their writes are accepted (the API server
ratchets unchanged fields) do not stop it: they are listed before the first write and again at
the end, as left for you (the runbook's fix-invalid-on-recreate step says how to fix them).

Exit codes (docs/decision-table.md): 0 the release is applied and verified, nothing left (or
--dry-run: nothing would be refused or left); 1 refused by the preflight (nothing written), the
release is not complete (said why), or the release is applied and verified and objects are
left for you to fix (the last line says which); 2 usage; 3 could not complete (forbidden,
unreachable, interrupted: run it again to resume).`,
		Example: upgradeExample,
		Args:    cobra.NoArgs,
		RunE:    runE(o),
	}
	f := cmd.Flags()
	f.StringSliceVarP(&o.Files, "filename", "f", nil, "The release's CRDs: files, directories (- for stdin); documents that are not CRDs are skipped")
	f.BoolVar(&o.DryRun, "dry-run", false, "Print the runbook and the preflight; write nothing")
	f.BoolVarP(&o.Yes, "yes", "y", false, "Do not ask before writing")
	f.BoolVar(&o.AllowDataLoss, "allow-data-loss", false, "Go on when objects would lose fields (the backup keeps them)")
	f.BoolVar(&o.AllowOwnershipLoss, "allow-ownership-loss", false, "Go on when the API server's dry run of a rewrite drops field managers of objects (the preflight lists them; --allow-data-loss does not allow this)")
	f.BoolVar(&o.FixValues, "fix-values", false, "Go on when objects hold values whose type does not fit the new storage version's typed schema: after the backup, convert those that convert without loss (YAML text to the object or list it spells, a scalar to a one-element list, a number to its string), keeping every field manager; stop for you at the others")
	f.BoolVar(&o.SkipInvalid, "skip-invalid", false, "Go on when objects' next write would be rejected (their CRD keeps status.storedVersions untrimmed)")
	f.BoolVar(&o.NoApply, "no-apply", false, "Do every step but the release's apply (and the verification after it)")
	f.BoolVar(&o.IntermediateCRDs, "intermediate-crds", false, "Print the intermediate CRDs the runbook applies (YAML) and exit")
	f.StringVar(&o.Backup, "backup", "", "Backup file (default ./crdver-backup-<time>.yaml; never overwritten)")
	f.StringVar(&o.FieldManager, "field-manager", plan.FieldManager, "Field manager of the release's server-side apply")
	f.StringVar(&o.Checkpoint, "checkpoint", "", "The upgrade's checkpoint file (default: in your cache folder, per cluster and release)")
	f.Int64Var(&o.ChunkSize, "chunk-size", 500, "Objects per list page")
	addEngineFlag(cmd, &o.Engine, "Who rewrites the objects of each CRD: client (this command) or cluster (a storagemigration.k8s.io StorageVersionMigration per CRD, in the runbook's order, each checked object by object by this command)")
	addDetachFlag(cmd, &o.Detach)
	f.StringVar(&o.Webhook, "webhook", "", "Judge the conversion the release's CRDs rely on through this webhook instead of the one they name (as plan --webhook): https://HOST:PORT[/PATH] or NAMESPACE/SERVICE[:PORT]")
	o.out = addOutputFlags(cmd, outputJSON, outputYAML)
	o.progressFlags = addProgressFlags(cmd)
	o.kube = addKubeVersionFlag(cmd)
	o.path = addPathFlags(cmd)
	o.fleet = addFleetFlags(cmd, g, o.out, fleetSpec{kind: fleet.KindUpgrade, pathKind: fleet.KindUpgradePath, rollout: true, refuse: map[string]string{
		"backup":            "each cluster has its own backup file, named after it (--backup-dir)",
		"checkpoint":        "each cluster has its own (the default, in your cache folder)",
		"intermediate-crds": "it prints the CRDs of one cluster",
		"detach":            "a wave goes on only after its clusters are upgraded",
	}})
	cmd.AddCommand(newCmdUpgradeStatus(g))
	return cmd
}

// Complete resolves the printer and the progress display.
func (o *UpgradeOptions) Complete(_ *cobra.Command, _ []string) (err error) {
	o.progress = o.progressFlags.toProgress(o.g.ErrOut)
	o.printer, err = o.out.toPrinter(humanOptions{})
	return err
}

// Validate checks the flags. It does no I/O.
func (o *UpgradeOptions) Validate() error {
	if err := o.out.validate(); err != nil {
		return err
	}
	if err := o.progressFlags.validate(); err != nil {
		return err
	}
	if err := validateEngine(o.Engine); err != nil {
		return err
	}
	if err := validateDetach(o.Detach, o.Engine, o.DryRun); err != nil {
		return err
	}
	switch {
	case len(o.Files) == 0:
		return UsageErrorf("give the release's CRDs with -f FILE (a file, a directory, or - for stdin)")
	case o.ChunkSize < 1:
		return UsageErrorf("--chunk-size must be at least 1, got %d", o.ChunkSize)
	case o.FieldManager == "":
		return UsageErrorf("--field-manager must not be empty")
	case o.IntermediateCRDs && (o.DryRun || o.Yes || o.out.format != ""):
		return UsageErrorf("--intermediate-crds prints YAML and writes nothing: it takes no --dry-run, --yes or -o")
	case o.IntermediateCRDs && o.path.set():
		return UsageErrorf("--intermediate-crds is for one release: run it with -f of each hop instead of --via/--releases")
	case o.Webhook != "" && o.path.set():
		return UsageErrorf("--webhook is for one release: a path asks each hop's own webhook before the hop")
	}
	if o.Webhook != "" {
		t, err := webhookcheck.ParseTarget(o.Webhook)
		if err != nil {
			return UsageErrorf("--webhook %v", err)
		}
		o.webhook = t
	}
	if err := o.path.validate(); err != nil {
		return err
	}
	if err := o.fleet.validate(); err != nil {
		return err
	}
	return o.kube.validate()
}

// Run plans, preflights, asks, and upgrades.
func (o *UpgradeOptions) Run(ctx context.Context) error {
	if o.fleet.set() {
		return o.fleet.run(ctx)
	}
	var objects []plan.ReleaseObject
	next, skipped, err := o.g.readCRDFiles(ctx, o.Files, "-f", func(d Document) { objects = append(objects, releaseObject(d)...) })
	if err != nil {
		return err
	}
	if skipped > 0 {
		o.progress.Notef("skipped %d documents that are not CustomResourceDefinitions", skipped)
	}
	c, err := o.g.migrateClients()
	if err != nil {
		return err
	}
	// The release is judged as the cluster's version (or --kube-version), with the server's
	// dry-run of each CRD's apply when it is the cluster's, as plan judges it.
	// (The version is in the JSON report's plan.kubernetesVersion; no note after the last
	// line, which is the decision table's.)
	judged, err := o.kube.resolve(ctx, o.g, true, false)
	if err != nil {
		return err
	}
	uo := o.upgradeOptions(next, judged)
	uo.Objects = objects
	if o.IntermediateCRDs {
		return o.printIntermediates(ctx, c, uo)
	}
	printed := false // the plan was shown and confirmed (a release found in place needs no confirmation: it only verifies)
	o.confirmations(&uo, &printed)
	if o.path.set() {
		return o.runPath(ctx, c, uo)
	}
	rep, err := upgrade.Run(ctx, c, uo)
	// The API server's warnings of the run (e.g. a deprecated version the rewrite writes at)
	// come before the report: its last line is the decision table's.
	o.g.warnings.Summary(o.g.ErrOut)
	return o.finish(ctx, rep, err, printed)
}

// upgradeOptions are upgrade.Run's options from the flags: next judged as judged, the apply
// file named as given, the backup file (by default one named by the time, not on a dry run),
// the progress display and notes.
func (o *UpgradeOptions) upgradeOptions(next []*apiextensionsv1.CustomResourceDefinition, judged judgedAs) upgrade.Options {
	applyFile := plan.JoinFiles(o.Files)
	if applyFile == "-" {
		applyFile = "NEW-CRDS.yaml"
	}
	backup := o.Backup
	if backup == "" && !o.DryRun && !o.IntermediateCRDs {
		backup = "crdver-backup-" + time.Now().UTC().Format("20060102-150405") + ".yaml"
	}
	if backup != "" {
		if abs, err := filepath.Abs(backup); err == nil {
			backup = abs
		}
	}
	return upgrade.Options{
		Next: next, ApplyFile: applyFile, DryRun: o.DryRun, AllowDataLoss: o.AllowDataLoss, SkipInvalid: o.SkipInvalid, AllowOwnershipLoss: o.AllowOwnershipLoss, FixValues: o.FixValues,
		NoApply: o.NoApply, FieldManager: o.FieldManager, BackupFile: backup, Checkpoint: o.Checkpoint, ChunkSize: o.ChunkSize,
		KubeVersion: judged.Version, ServerDryRun: o.kube.v.IsZero(), Engine: migrate.Engine(o.Engine),
		Rewrite: migrate.RewriteOptions{Detach: o.Detach},
		OnEvaluate: func(crd string, done *atomic.Int64, total func() int64) func() {
			return o.progress.Start(Task{Name: "preflight " + crd, Prefix: "upgrade", Unit: "objects", Verb: "evaluated", Done: done.Load, TotalFunc: total})
		},
		OnCheck: func(crd string, done, total func() int64) func() {
			return o.progress.Start(Task{Name: "checking " + crd, Prefix: "upgrade preflight", Unit: "objects", Verb: "checked", Done: done, TotalFunc: total})
		},
		OnScan: func(crd, what string, done func() int64) func() {
			return o.progress.Start(Task{Name: "reading " + crd, Prefix: "upgrade", Unit: "objects", Verb: "read " + what, Done: done, Total: -1})
		},
		OnBackup: func(done func() int64) func() {
			return o.progress.Start(Task{Name: "backup", Prefix: "upgrade backup", Unit: "objects", Verb: "backed up", Done: done, Total: -1})
		},
		OnRewrite: func(crd string, total int64, done func() int64) func() {
			return o.progress.Start(Task{Name: "rewriting " + crd, Prefix: "upgrade", Unit: "objects", Verb: "rewritten", Total: total, Done: done})
		},
		Notify:    func(s string) { o.progress.Notef("upgrade: %s", s) },
		Webhook:   o.webhook,
		OnConvert: conversionProgress(o.progress),
	}
}

// printIntermediates (--intermediate-crds) prints the release's intermediate CRDs
// (upgrade.Intermediates) as one manifest, from a dry-run plan.
func (o *UpgradeOptions) printIntermediates(ctx context.Context, c *migrate.Clients, uo upgrade.Options) error {
	uo.DryRun = true
	p, err := upgrade.PlanRelease(ctx, c, uo)
	if err != nil {
		return o.runError(ctx, err, nil)
	}
	inter := upgrade.Intermediates(p)
	if len(inter) == 0 {
		o.progress.Notef("no CRD of %s needs an intermediate CRD: the live ones have the new storage versions", uo.ApplyFile)
	}
	m, err := upgrade.Manifest(inter)
	if err != nil {
		return err
	}
	_, err = o.g.Out.Write(m)
	return err
}

// confirmations plug the questions into uo: the plan printed and confirmed (printed set), and
// versions served again for the preflight; --yes answers both.
func (o *UpgradeOptions) confirmations(uo *upgrade.Options, printed *bool) {
	uo.Confirm = func(r *upgrade.Report) (bool, error) {
		*printed = true
		if err := o.printer.PrintPart(o.g.Out, printers.UpgradePlan(r)); err != nil {
			return false, err
		}
		if o.Yes {
			return true, nil
		}
		return o.g.confirm("Carry out the upgrade (the steps above)? [y/N]: ")
	}
	uo.ConfirmServe = func(r *upgrade.Report) (bool, error) {
		what := servedAgainText(r.ServedAgain)
		if o.Yes {
			o.progress.Notef("upgrade: serving again %s to read the objects stored at them (unserved again if the upgrade is refused)", what)
			return true, nil
		}
		printers.WriteWrapped(o.g.ErrOut, fmt.Sprintf("Objects may be stored at versions the live CRDs do not serve: %s. They can be read as stored only once served, so the preflight and the backup need them served again: a change of the CRDs, undone if the upgrade is then refused or not confirmed.", what), "", 120)
		return o.g.confirm("Serve them again and run the preflight? [y/N]: ")
	}
}

// finish prints the plan (unless printed when confirmed) and the result of upgrade.Run, and
// returns its exit status: the decision table's (upgrade.Report.Outcome).
func (o *UpgradeOptions) finish(ctx context.Context, rep *upgrade.Report, err error, printed bool) error {
	if rep != nil && rep.Plan != nil {
		if !printed {
			if perr := o.printer.PrintPart(o.g.Out, printers.UpgradePlan(rep)); perr != nil {
				return perr
			}
		}
		if perr := o.printer.PrintReport(o.g.Out, printers.UpgradeResult(rep, (printed || rep.AlreadyInPlace != "") && !errors.Is(err, upgrade.ErrNotConfirmed))); perr != nil {
			return perr
		}
	}
	if err != nil && rep == nil {
		return o.runError(ctx, err, rep)
	}
	if err != nil {
		return end(rep.Outcome.Outcome, o.runError(ctx, err, rep)) // the words with the flags; the code, the outcome's
	}
	out := rep.Outcome
	if o.DryRun && out.ExitCode == 0 {
		return o.printer.PrintPart(o.g.Out, printers.DryRunNote())
	}
	return end(out.Outcome, nil)
}

func (o *UpgradeOptions) runError(ctx context.Context, err error, rep *upgrade.Report) error {
	var de *migrate.DetachedError
	switch {
	case errors.As(err, &de):
		return Unavailable(fmt.Errorf("%w; re-attach by running the same command again: it follows the migration to its end (with --detach, it looks once and goes on only if the migration has ended)", de))
	case errors.Is(err, upgrade.ErrRefused) && rep != nil && rep.Preflight.Incomplete && ctx.Err() != nil:
		return Unavailable(fmt.Errorf("%w: %w; run the same command again", upgrade.ErrInterrupted, err))
	case errors.Is(err, upgrade.ErrRefused) && rep != nil && rep.Preflight.Incomplete:
		// No answer: no flag accepts it. Run again once the cause is gone.
		return Unavailable(fmt.Errorf("%w; run the same command again once the cause is fixed", err))
	case errors.Is(err, upgrade.ErrRefused):
		if flags := o.refusalFlags(rep); len(flags) > 0 {
			return ProblemsFound("%v (%s to go on anyway)", err, strings.Join(flags, ", "))
		}
		return ProblemsFound("%v", err)
	case errors.Is(err, upgrade.ErrValuesForPerson):
		// Stopped after the backup for a person: exit 1 with what to do (the decision table).
		return ProblemsFound("%v", err)
	case errors.Is(err, upgrade.ErrNotConfirmed):
		return Unavailable(fmt.Errorf("nothing was written: %v (use --yes to skip the question)", err))
	case errors.Is(err, upgrade.ErrInterrupted), ctx.Err() != nil:
		return Unavailable(fmt.Errorf("%w; run the same command again to resume", err))
	case errors.Is(err, migrate.ErrAccessDenied):
		return Unavailable(err)
	}
	if rep != nil && (rep.Resumed || slices.ContainsFunc(rep.Steps, func(s upgrade.StepResult) bool {
		return s.State == upgrade.StateDone || s.State == upgrade.StateAlready
	})) {
		// Cut off after it wrote, in this run or an earlier one (the network, the server): what
		// is done is in the checkpoint and the live state.
		return Unavailable(fmt.Errorf("%w; the steps done are kept: run the same command again to resume", clusterError("upgrading", err)))
	}
	return clusterError("upgrading", err)
}

// refusalFlags are the flags that would let a refused upgrade go on: --allow-data-loss only
// when objects would lose fields or what they lose is unknown, --skip-invalid only when
// objects' rewrites would be rejected, and neither when they are given already or when a CRD
// of the release would be rejected (no flag helps there).
func (o *UpgradeOptions) refusalFlags(rep *upgrade.Report) []string {
	if rep == nil {
		return nil
	}
	// A CRD the API server would reject, a version that could not be read, a conversion that
	// cannot convert: no flag helps.
	if len(rep.Preflight.BlockedCRDs) > 0 || len(rep.Preflight.Unread) > 0 || len(rep.Preflight.Conversion) > 0 {
		return nil
	}
	// Only the flags that make this refusal go on (the decision table's overrides); those
	// already given refuse nothing (plan.Consent leaves their findings out).
	consent := plan.Consent{AllowDataLoss: o.AllowDataLoss, SkipInvalid: o.SkipInvalid, AllowOwnershipLoss: o.AllowOwnershipLoss, FixValues: o.FixValues}
	return plan.OverrideFlags(consent.Refusals(rep.Preflight.Kinds()))
}

// servedAgainText names the versions served again: "widgets.example.com v1alpha1, …".
func servedAgainText(s []upgrade.ServedAgain) string {
	var out []string
	for _, x := range s {
		out = append(out, x.CRD+" "+x.Version)
	}
	return strings.Join(out, ", ")
}
