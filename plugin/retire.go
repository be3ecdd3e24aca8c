package plugin

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/crdver/kubectl-crdver/migrate"
	"github.com/crdver/kubectl-crdver/ownership"
	"github.com/crdver/kubectl-crdver/retire"
)

const retireExample = `  # What would retiring v1beta1 do? (reads only)
  kubectl crdver retire crontabs.stable.example.com v1beta1 --dry-run

  # Move everything off v1beta1, then stop serving it and remove it from the CRD
  kubectl crdver retire crontabs.stable.example.com v1beta1 --unserve --remove

  # In a runbook: no question, no progress, a JSON report
  kubectl crdver retire crontabs.stable.example.com v1beta1 --to v1 --yes --quiet -o json`

// RetireOptions are the options of `kubectl crdver retire`.
type RetireOptions struct {
	g      *Globals
	source *crdSource
	out    *outputFlags

	Name, Version, To                   string
	DryRun, Yes, Unserve, Remove, Force bool
	Quiet                               bool
	Concurrency                         int
	QPS                                 float64
	ChunkSize                           int64
	Checkpoint                          string
	ProgressInterval                    time.Duration
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
   resumable from its checkpoint);
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
	o.out = addOutputFlags(cmd, outputJSON, outputYAML)
	f := cmd.Flags()
	f.StringVar(&o.To, "to", "", "The version to move to (default: the highest-priority served version other than VERSION)")
	f.BoolVar(&o.DryRun, "dry-run", false, "Print the steps and write nothing")
	f.BoolVarP(&o.Yes, "yes", "y", false, "Do not ask before writing")
	f.BoolVar(&o.Unserve, "unserve", false, "At the end, set served: false on VERSION")
	f.BoolVar(&o.Remove, "remove", false, "At the end, remove VERSION from spec.versions (unserving it first)")
	f.BoolVar(&o.Force, "force", false, "Unserve/remove even if a manager still writes VERSION, entries remain, or a deployment tool manages the CRD")
	f.BoolVarP(&o.Quiet, "quiet", "q", false, "No progress on stderr")
	f.IntVar(&o.Concurrency, "concurrency", 16, "Concurrent writers")
	f.Float64Var(&o.QPS, "qps", 0, "Limit the rewrite's requests per second (0: no client-side limit)")
	f.Int64Var(&o.ChunkSize, "chunk-size", 500, "Objects per list page (memory is bounded by it)")
	f.StringVar(&o.Checkpoint, "checkpoint", "", "Checkpoint file of the rewrite (default: migrate's, in your cache folder, per cluster and CRD)")
	f.DurationVar(&o.ProgressInterval, "progress-interval", 5*time.Second, "How often to print a progress line when stderr is not a terminal")
	_ = f.MarkHidden("progress-interval")
	return cmd
}

// Complete takes the arguments.
func (o *RetireOptions) Complete(_ *cobra.Command, args []string) error {
	if len(args) != 2 {
		return UsageErrorf("retire takes a CRD and a version, got %d arguments (e.g. kubectl crdver retire crontabs.stable.example.com v1beta1)", len(args))
	}
	o.Name, o.Version = args[0], args[1]
	return nil
}

// Validate checks the flags. It does no I/O.
func (o *RetireOptions) Validate() error {
	if err := o.out.validate(); err != nil {
		return err
	}
	switch {
	case o.Concurrency < 1:
		return UsageErrorf("--concurrency must be at least 1, got %d", o.Concurrency)
	case o.QPS < 0:
		return UsageErrorf("--qps must be 0 (no limit) or more, got %v", o.QPS)
	case o.ChunkSize < 1:
		return UsageErrorf("--chunk-size must be at least 1, got %d", o.ChunkSize)
	case o.ProgressInterval <= 0:
		return UsageErrorf("--progress-interval must be positive, got %v", o.ProgressInterval)
	case o.To != "" && o.To == o.Version:
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
	mo := &MigrateOptions{g: o.g, Quiet: o.Quiet, ProgressInterval: o.ProgressInterval}
	ro := retire.Options{
		CRD: crd.Name, Version: o.Version, To: o.To, DryRun: o.DryRun, Unserve: o.Unserve, Remove: o.Remove, Force: o.Force,
		Rewrite:   migrate.RewriteOptions{Concurrency: o.Concurrency, QPS: o.QPS, ChunkSize: o.ChunkSize, Checkpoint: o.Checkpoint},
		OnRewrite: func(r *migrate.Rewriter, total int64) func() { return mo.startProgress(r, total) },
		Notify:    func(s string) { mo.progressf("retire: %s\n", s) },
	}
	printed := false
	ro.Confirm = func(p *retire.Plan) (bool, error) {
		if !o.out.structured() {
			printed = true
			if err := printRetirePlan(o.g.Out, p, o.out.noHeaders); err != nil {
				return false, err
			}
		}
		if o.Yes || !planWrites(p) {
			return true, nil
		}
		return mo.confirm(fmt.Sprintf("Carry out the pending steps on %s? [y/N]: ", p.CRD))
	}
	res, err := retire.Run(ctx, c, ro)
	if res != nil && !printed && !o.out.structured() {
		if perr := printRetirePlan(o.g.Out, res.Plan, o.out.noHeaders); perr != nil {
			return perr
		}
	}
	if res != nil && o.out.structured() {
		if perr := o.out.printStructured(o.g.Out, res); perr != nil {
			return perr
		}
	} else if res != nil && !o.DryRun && !errors.Is(err, retire.ErrNotConfirmed) {
		printRetireResult(o.g.Out, res, o.out.noHeaders)
	}
	switch {
	case err == nil:
	case errors.Is(err, retire.ErrUsage):
		return Usage(errors.New(strings.TrimPrefix(err.Error(), retire.ErrUsage.Error()+": ")))
	case errors.Is(err, retire.ErrNotConfirmed):
		return Unavailable(fmt.Errorf("%s: nothing was written: not confirmed (use --yes to skip the question)", crd.Name))
	case errors.Is(err, retire.ErrInterrupted):
		return Unavailable(fmt.Errorf("%w; run the same command again to resume", err))
	case ctx.Err() != nil:
		return Unavailable(fmt.Errorf("%s: interrupted (%v); run the same command again to resume: the steps done are found in the live state", crd.Name, err))
	default:
		return clusterError(fmt.Sprintf("retiring %s of %s", o.Version, crd.Name), err)
	}
	if o.DryRun {
		if !o.out.structured() {
			fmt.Fprintln(o.g.Out, "\nDry run: nothing was written.")
		}
		return nil
	}
	if len(res.Problems) > 0 {
		return ProblemsFound("%s: %s cannot be dropped safely yet: %s", crd.Name, o.Version, strings.Join(res.Problems, "; "))
	}
	return nil
}

func planWrites(p *retire.Plan) bool {
	for _, s := range p.Steps {
		if s.State == retire.StatePending {
			return true
		}
	}
	return false
}

func printRetirePlan(w io.Writer, p *retire.Plan, noHeaders bool) error {
	fmt.Fprintf(w, "Retire %s of %s\n", p.Version, p.CRD)
	fmt.Fprintf(w, "  target version:   %s\n", p.Target)
	fmt.Fprintf(w, "  storage version:  %s\n", p.StorageVersion)
	fmt.Fprintf(w, "  storedVersions:   [%s]\n", strings.Join(p.StoredVersions, " "))
	fmt.Fprintf(w, "  objects:          %d, %d with managedFields entries of %s\n", p.Objects, p.EntryObjects, p.Version)
	if p.ManagedBy != "" {
		fmt.Fprintf(w, "  managed by:       %s\n", p.ManagedBy)
	}
	if len(p.Writers) > 0 {
		fmt.Fprintf(w, "\nField managers holding entries of %s (most recent first):\n", p.Version)
		if err := writersTable(p.Writers).print(w, noHeaders); err != nil {
			return err
		}
	}
	fmt.Fprintln(w, "\nSteps:")
	t := &table{header: []string{"step", "state", "detail"}}
	for i, s := range p.Steps {
		t.add(fmt.Sprintf("%d. %s", i+1, s.Name), s.State, s.Detail)
	}
	return t.print(w, noHeaders)
}

func writersTable(ws []ownership.Writer) *table {
	t := &table{header: []string{"manager", "operation", "objects", "last write"}}
	for _, m := range ws {
		op := m.Operation
		if m.Subresource != "" {
			op += " (" + m.Subresource + ")"
		}
		last := "-"
		if m.LastWrite != nil {
			last = m.LastWrite.UTC().Format(time.RFC3339)
		}
		t.add(m.Manager, op, strconv.FormatInt(m.Objects, 10), last)
	}
	return t
}

func printRetireResult(w io.Writer, r *retire.Result, noHeaders bool) {
	fmt.Fprintln(w, "\nResult:")
	t := &table{header: []string{"step", "state", "detail"}}
	for i, s := range r.Plan.Steps {
		t.add(fmt.Sprintf("%d. %s", i+1, s.Name), s.State, s.Detail)
	}
	_ = t.print(w, noHeaders)
	if len(r.WritersSinceStart) > 0 {
		fmt.Fprintf(w, "\nManagers that wrote %s after this run began:\n", r.Plan.Version)
		_ = writersTable(r.WritersSinceStart).print(w, noHeaders)
	}
	for _, p := range r.Problems {
		fmt.Fprintf(w, "problem: %s\n", p)
	}
}
