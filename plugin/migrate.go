package plugin

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	"github.com/crdver/kubectl-crdver/migrate"
	"github.com/crdver/kubectl-crdver/outcome"
	"github.com/crdver/kubectl-crdver/preflight"
	"github.com/crdver/kubectl-crdver/printers"
	"github.com/crdver/kubectl-crdver/upgrade"
)

const migrateExample = `  # See what a migration would do, writing nothing
  kubectl crdver migrate crontabs.stable.example.com --dry-run

  # Make v1 the storage version, rewrite every object, then trim status.storedVersions to [v1]
  kubectl crdver migrate crontabs.stable.example.com --to v1

  # In a runbook: no question, no progress, a JSON summary
  kubectl crdver migrate crontabs.stable.example.com --to v1 --yes --quiet -o json

  # Hand the rewrite to the cluster's StorageVersionMigration controller
  kubectl crdver migrate crontabs.stable.example.com --engine cluster

  # Is it safe to remove the old version yet?
  kubectl crdver migrate status crontabs.stable.example.com`

// Engines.
const (
	engineClient  = "client"
	engineCluster = "cluster"
)

// MigrateOptions are the options of `kubectl crdver migrate`.
type MigrateOptions struct {
	g       *Globals
	source  *crdSource
	out     *outputFlags
	printer ReportPrinter
	cmd     *cobra.Command

	Name   string
	To     string
	DryRun bool
	RewriteFlags
	NoTrim bool
	Engine string
	// Detach leaves the StorageVersionMigration running in the cluster (--engine cluster).
	Detach bool
	Yes    bool
	All    bool // every CRD with a pending migration (migrate_all.go)
	// FixValues converts the values that do not fit the storage version's typed schema before
	// the rewrite (migrate_fixvalues.go).
	FixValues bool
	// ClusterStartTimeout bounds the wait for a controller to pick up a StorageVersionMigration.
	ClusterStartTimeout time.Duration

	progressFlags *progressFlags
	progress      Progress
}

// MigrateReport is the -o json|yaml shape of `kubectl crdver migrate`: the library's report.
type MigrateReport = migrate.Report

// NewCmdMigrate builds `kubectl crdver migrate` and `kubectl crdver migrate status`.
func NewCmdMigrate(g *Globals) *cobra.Command {
	o := &MigrateOptions{g: g, source: &crdSource{g: g, flag: "filename"}}
	cmd := &cobra.Command{
		Use:   "migrate CRD [--to VERSION] [--dry-run]",
		Short: "Rewrite every object of a CRD at the storage version, then trim status.storedVersions",
		Long: `Upgrade the stored objects of a CRD to its storage version, safely: the manual procedure of the
Kubernetes documentation ("upgrade existing objects to a new stored version"), resumable and
verified.

1. Plan (always printed; all that --dry-run does): the storage version, status.storedVersions,
   the objects per namespace, and what will change.
2. --to VERSION first makes VERSION the storage version (it must exist and be served; asks
   unless --yes) and waits until the API server uses it.
3. Rewrite: every object is listed (in pages of --chunk-size) and written back unchanged, so
   the API server stores it again at the storage version. Conflicts are re-read and retried,
   deleted objects are fine, throttling and server errors are retried with back-off. Objects
   that cannot be written (an admission webhook or validation says no) are listed; the run
   still finishes the rest. Progress is saved to a checkpoint file as pages complete: Ctrl-C
   lets the writes in flight finish, saves, and a re-run resumes.
4. Trim: only when every object was accounted for (rewritten, already current or deleted;
   none failed) since the storage version became what it is, and it still is, status.storedVersions
   is set to [storage version] through the /status subresource, with the CRD's resourceVersion
   as precondition. Otherwise it says why. After that the old version can be removed from
   spec.versions.

Your rights are checked first (list, get and update on the resource; update on the CRD and on
customresourcedefinitions/status as needed): nothing is written if one is missing.

Preflight (before anything is written, also on --dry-run): every object is read at each
version that may hold its data (status.storedVersions) and at the target version, under the
live CRD: fields the rewrite would drop (conversion None: fields the target's schema lacks;
a webhook: a round trip through it) and writes the API server would reject (required fields,
validation). If any, it refuses before switching the storage version, lists the objects and
fields and says how to keep them (the backup commands read at the version holding the data).
--allow-data-loss rewrites anyway; --skip-invalid lets the rejected objects fail (they keep
status.storedVersions untrimmed). managedFields entries naming other versions are moved to the
target within each object's rewrite, and each object's field managers are compared before and
after its write. The preflight's dry-run writes adapt to the API server like the rewrite's
(--concurrency and --qps apply to both); what is proven needless is skipped and said ("not
needed": same schemas, no admission webhook or policy matching, objects valid as the API
server's validation judges them; nothing pending), and a resumed run does not check again the
objects already rewritten nor those an earlier preflight accepted and that have not changed
since (recorded next to the checkpoint). --fix-values converts, before the rewrite, the values
whose type does not fit the storage version's typed schema (text where it expects an object, as
a release that changes a field's type leaves them), keeping every field manager; without it such
objects keep the old value, on which server-side apply fails.

Exit codes: 0 done; 1 some objects could not be rewritten, lost field managers, or the
preflight refused; 2 usage; 3 could not complete (forbidden, unreachable, interrupted: the
message says how to resume).`,
		Example:           migrateExample,
		ValidArgsFunction: completeCRDNames(g),
		RunE:              runE(o),
	}
	o.cmd = cmd
	o.out = addOutputFlags(cmd, outputWide, outputJSON, outputYAML)
	f := cmd.Flags()
	f.StringVar(&o.To, "to", "", "Make this version the storage version first (it must exist and be served)")
	registerVersionCompletion(cmd, o.source, "to")
	f.BoolVar(&o.DryRun, "dry-run", false, "Print the plan and write nothing")
	o.addRewriteFlags(f, "Checkpoint file (default: in your cache folder, per cluster and CRD)")
	f.BoolVar(&o.NoTrim, "no-trim", false, "Do not trim status.storedVersions after the rewrite")
	f.BoolVar(&o.FixValues, "fix-values", false, "Before the rewrite, convert each value whose type does not fit the storage version's typed schema where the conversion is lossless (YAML text to the object or list it spells, a scalar to a one-element list, a number to its string), keeping every field manager (their managedFields entries moved to the new values' paths)")
	addEngineFlag(cmd, &o.Engine, "Who rewrites the objects: client (this command) or cluster (a storagemigration.k8s.io StorageVersionMigration, checked object by object by this command)")
	addDetachFlag(cmd, &o.Detach)
	f.BoolVarP(&o.Yes, "yes", "y", false, "Do not ask before switching the storage version")
	f.BoolVar(&o.All, "all", false, "Migrate every CRD whose status.storedVersions lists a version other than its storage version: one plan, one question, one progress display")
	o.progressFlags = addProgressFlags(cmd)
	cmd.Flags().Lookup("quiet").Usage = "No progress on stderr; with --all, only the result (no plan unless a question is asked about it)"
	cmd.AddCommand(newCmdMigrateStatus(g))
	return cmd
}

// Complete takes the argument.
func (o *MigrateOptions) Complete(_ *cobra.Command, args []string) (err error) {
	switch {
	case o.All:
		err = o.completeAll(args)
	case len(args) != 1:
		err = UsageErrorf("migrate takes one CRD name, got %d (e.g. kubectl crdver migrate crontabs.stable.example.com)", len(args))
	default:
		o.Name = args[0]
	}
	if err != nil {
		return err
	}
	o.progress = o.progressFlags.toProgress(o.g.ErrOut)
	o.printer, err = o.out.toPrinter(humanOptions{})
	return err
}

// Validate checks the flags. It does no I/O.
func (o *MigrateOptions) Validate() error {
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
	switch {
	case o.FixValues && o.All:
		return UsageErrorf("--fix-values is for one CRD: run kubectl crdver migrate CRD --fix-values for each")
	case o.Detach && o.All:
		return UsageErrorf("--detach is for one CRD: run kubectl crdver migrate CRD --engine cluster --detach for each")
	}
	return nil
}

// Run builds the Migrator from the flags, runs it, prints its report and words how it ended.
func (o *MigrateOptions) Run(ctx context.Context) error {
	if o.All {
		return o.runAll(ctx)
	}
	c, err := o.g.migrateClients()
	if err != nil {
		return err
	}
	crd, err := o.source.one(ctx, o.Name)
	if err != nil {
		return err
	}
	report, err := o.newMigrator(c).Run(ctx, crd)
	return o.migrateOutcome(crd.Name, report, err)
}

// newMigrator is migrate.Migrator as the flags say, with the printer, the preflight and its
// refusal, the consent to ownership loss, the prompt (unless --yes), the progress display and
// its notes.
func (o *MigrateOptions) newMigrator(c *migrate.Clients) *migrate.Migrator {
	var pre *preflight.Report
	m := &migrate.Migrator{
		Clients: c,
		Options: migrate.Options{
			To: o.To, DryRun: o.DryRun, NoTrim: o.NoTrim, Engine: migrate.Engine(o.Engine),
			Rewrite:             o.rewriteOptions(),
			ClusterStartTimeout: o.ClusterStartTimeout,
			Budget:              true,
		},
		Planned:  func(p *migrate.Plan) { _ = o.printer.PrintPart(o.g.Out, printers.MigratePlan(p)) },
		Progress: o.rewriteProgress("migrate"),
		Event: func(e migrate.Event) {
			switch e.Kind {
			case migrate.EventStorageSwitched:
				o.progress.Notef("storage version of %s is now %s", e.CRD, e.Version)
			case migrate.EventClusterCondition:
				line := fmt.Sprintf("StorageVersionMigration: %s after %s", e.Condition, e.Elapsed.Round(100*time.Millisecond))
				if e.Message != "" {
					line += ": " + e.Message
				}
				o.progress.Notef("%s", line)
			case migrate.EventNote:
				o.progress.Notef("note: %s", e.Message)
			}
		},
	}
	m.PreWrite = func(ctx context.Context, crd *apiextensionsv1.CustomResourceDefinition, target string) (any, error) {
		rep, err := o.g.runPreflight(ctx, crd, target, o.RewriteFlags, o.progress, o.printer, "migrate")
		if err != nil {
			return nil, err
		}
		pre = rep
		cmd := "kubectl crdver migrate " + crd.Name
		if o.To != "" {
			cmd += " --to " + o.To
		}
		if o.FixValues {
			if err := o.checkValues(ctx, c, crd, target, rep); err != nil {
				return rep, err
			}
			cmd += " --fix-values"
		}
		return rep, o.refusal([]*preflight.Report{rep}, cmd)
	}
	m.Options.Rewrite.Detach = o.Detach
	m.OwnershipLossConsented = func(res *migrate.Result) bool { return o.ownershipLossConsented(pre, res) }
	if o.FixValues {
		m.BeforeRewrite = func(ctx context.Context, crd *apiextensionsv1.CustomResourceDefinition) error {
			return o.fixValues(ctx, c, crd)
		}
	}
	if !o.Yes {
		m.Confirm = func(_ context.Context, p *migrate.Plan) (bool, error) {
			return o.confirm(fmt.Sprintf("Make %s the storage version of %s (now %s)? [y/N]: ", p.TargetVersion, p.CRD, p.StorageVersion))
		}
	}
	return m
}

// migrateOutcome prints the Migrator's report (as far as it goes) and ends the migration of
// name as the report's Outcome says, wording its error with this command's flags.
func (o *MigrateOptions) migrateOutcome(name string, report *migrate.Report, err error) error {
	var se *migrate.StepError
	var ie *migrate.InterruptedError
	var de *migrate.DetachedError
	switch {
	case errors.As(err, &de):
		_ = o.printer.PrintReport(o.g.Out, migrateView(report))
		return end(report.Outcome, fmt.Errorf("%w; re-attach with: %s", de, o.resumeCommand(name, "")))
	case errors.As(err, &se) && se.Step == migrate.StepPreWrite && report.Outcome.Kind() == outcome.Findings:
		// Refused before any write: the findings are printed; the report when it is the answer.
		if report.DryRun || printsData(o.printer) {
			_ = o.printer.PrintReport(o.g.Out, migrateView(report))
		}
		return end(report.Outcome, nil)
	case errors.As(err, &ie):
		_ = o.printer.PrintReport(o.g.Out, migrateView(report))
		return end(report.Outcome, fmt.Errorf("interrupted: %d objects done, progress saved in %s; resume with: %s", ie.Done, ie.Checkpoint, o.resumeCommand(name, ie.Checkpoint)))
	case err != nil:
		return end(report.Outcome, migrateError(name, err))
	}
	if err := o.printer.PrintReport(o.g.Out, migrateView(report)); err != nil {
		return err
	}
	return end(report.Outcome, nil)
}

// migrateView is migrate's report for the printer.
func migrateView(r *migrate.Report) printers.Report {
	return printers.Migrate(r, "status.storedVersions left as it is (--no-trim)")
}

// rewriteProgress shows the rewrite of total objects on the progress display.
func (o *MigrateOptions) rewriteProgress(prefix string) func(total int64, counts func() migrate.Counts) func() {
	return func(total int64, counts func() migrate.Counts) func() {
		return o.progress.Start(Task{Name: "rewriting", Prefix: prefix, Unit: "objects", Total: total,
			Done: func() int64 { return counts().Total() },
			Detail: func() string {
				p := counts()
				return fmt.Sprintf("rewritten %d, already current %d, deleted %d, failed %d", p.Rewritten, p.Current, p.Deleted, p.Failed)
			}})
	}
}

// migrateError words an error of the Migrator for the command line: which step failed and
// what to do with this command's flags (its exit code is the report's Outcome).
func migrateError(name string, err error) error {
	var se *migrate.StepError
	if !errors.As(err, &se) {
		return err
	}
	switch se.Step {
	case migrate.StepPlan:
		return clusterText(fmt.Sprintf("planning the migration of %s", name), se.Err)
	case migrate.StepAccess:
		if errors.Is(se.Err, migrate.ErrAccessDenied) {
			return fmt.Errorf("%s: %w, or use --as", name, se.Err)
		}
		return clusterText("checking your rights", se.Err)
	case migrate.StepLease, migrate.StepWaitStorage:
		return se.Err
	case migrate.StepClusterAPI:
		return fmt.Errorf("%w; or use --engine client", se.Err)
	case migrate.StepConfirm:
		if errors.Is(se.Err, migrate.ErrNotConfirmed) {
			return fmt.Errorf("%s: %w (use --yes to skip the question)", name, se.Err)
		}
		return se.Err
	case migrate.StepSwitchStorage:
		return clusterText(fmt.Sprintf("making %s the storage version of %s", se.Version, name), se.Err)
	case migrate.StepGetCRD:
		return clusterText(fmt.Sprintf("getting %s", name), se.Err)
	case migrate.StepCheckpoint:
		return checkpointAdvice(se.Err)
	case migrate.StepBeforeRewrite:
		if errors.Is(se.Err, upgrade.ErrValuesForPerson) {
			return fmt.Errorf("--fix-values: %v", se.Err)
		}
		return clusterText(fmt.Sprintf("converting the values of %s (--fix-values)", name), se.Err)
	case migrate.StepCluster:
		if errors.Is(se.Err, migrate.ErrClusterEngineUnavailable) {
			return fmt.Errorf("%w; or use --engine client", se.Err)
		}
		if errors.Is(se.Err, context.Canceled) || errors.Is(se.Err, context.DeadlineExceeded) {
			return se.Err
		}
		return clusterText(fmt.Sprintf("migrating %s with a StorageVersionMigration", name), se.Err)
	case migrate.StepTrim:
		return clusterText(fmt.Sprintf("trimming status.storedVersions of %s", name), se.Err)
	}
	return clusterText(fmt.Sprintf("rewriting the objects of %s", name), se.Err)
}

// checkpointAdvice adds what to do about a checkpoint file that cannot be used.
func checkpointAdvice(err error) error {
	var ce *migrate.CheckpointError
	if !errors.As(err, &ce) {
		return err
	}
	switch ce.Op {
	case migrate.CheckpointLocate:
		return fmt.Errorf("%w: give one with --checkpoint", err)
	case migrate.CheckpointRead:
		return fmt.Errorf("%w (give another file with --checkpoint)", err)
	case migrate.CheckpointParse:
		return fmt.Errorf("%w: remove it or give another --checkpoint", err)
	}
	return fmt.Errorf("%w (give a writable file with --checkpoint)", err)
}

// confirm asks on stderr and reads the answer from stdin.
func (o *MigrateOptions) confirm(question string) (bool, error) { return o.g.confirm(question) }

// resumeCommand is the command line that resumes an interrupted run: the same flags (but
// --to, --yes and --dry-run: the storage switch is done), the same checkpoint.
func (o *MigrateOptions) resumeCommand(name, checkpoint string) string {
	line := sameCommand(o.cmd, []string{"kubectl", "crdver", "migrate", name}, "to", "yes", "dry-run", "checkpoint", "progress-interval", "detach")
	if checkpoint != "" {
		line += " --checkpoint=" + shellQuote(checkpoint)
	}
	return line
}

// sameCommand is the command line words followed by the flags set on cmd (nil: none), but
// those named in skip, each as --name=value (a bool as --name, or --name=false), quoted for a
// shell: the command that runs again what cmd ran.
func sameCommand(cmd *cobra.Command, words []string, skip ...string) string {
	parts := append([]string{}, words...)
	if cmd != nil {
		cmd.Flags().Visit(func(f *pflag.Flag) {
			if slices.Contains(skip, f.Name) {
				return
			}
			if f.Value.Type() == "bool" {
				if f.Value.String() == "true" {
					parts = append(parts, "--"+f.Name)
				} else {
					parts = append(parts, "--"+f.Name+"=false")
				}
				return
			}
			parts = append(parts, "--"+f.Name+"="+shellQuote(f.Value.String()))
		})
	}
	return strings.Join(parts, " ")
}

func shellQuote(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_./:=,@", r))
	}) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// consentedLosses reports whether every object that lost field managers through the rewrite
// was listed by the preflight as losing them (what --allow-ownership-loss consented to).
func consentedLosses(pre *preflight.Report, res *migrate.Result) bool {
	if pre == nil || res.ManagedFieldsLost > int64(len(res.ManagedFieldsLosses)) {
		return false
	}
	listed := map[string]bool{}
	for _, l := range pre.OwnershipLosses {
		listed[l.Namespace+"/"+l.Name] = true
	}
	for _, l := range res.ManagedFieldsLosses {
		if !listed[l.Namespace+"/"+l.Name] {
			return false
		}
	}
	return true
}
