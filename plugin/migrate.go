package plugin

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"golang.org/x/term"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/crdver/kubectl-crdver/migrate"
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
	g      *Globals
	source *crdSource
	out    *outputFlags
	cmd    *cobra.Command

	Name        string
	To          string
	DryRun      bool
	Concurrency int
	QPS         float64
	ChunkSize   int64
	Checkpoint  string
	NoTrim      bool
	Engine      string
	Yes         bool
	Quiet       bool
	All         bool // every CRD with a pending migration (migrate_all.go)
	// ClusterStartTimeout bounds the wait for a controller to pick up a StorageVersionMigration.
	ClusterStartTimeout time.Duration
	// ProgressInterval is how often plain progress lines are printed when stderr is not a terminal.
	ProgressInterval time.Duration
}

// MigrateReport is the -o json|yaml shape of `kubectl crdver migrate`.
type MigrateReport struct {
	Plan    *migrate.Plan          `json:"plan"`
	DryRun  bool                   `json:"dryRun"`
	Engine  string                 `json:"engine"`
	Result  *migrate.Result        `json:"result,omitempty"`
	Cluster *migrate.ClusterResult `json:"clusterMigration,omitempty"`
	Trim    *migrate.TrimResult    `json:"trim,omitempty"`
}

// NewCmdMigrate builds `kubectl crdver migrate` and `kubectl crdver migrate status`.
func NewCmdMigrate(g *Globals) *cobra.Command {
	o := &MigrateOptions{g: g, source: &crdSource{g: g, flag: "filename"}, ProgressInterval: 5 * time.Second}
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

Exit codes: 0 done; 1 some objects could not be rewritten; 2 usage; 3 could not complete
(forbidden, unreachable, interrupted: the message says how to resume).`,
		Example:           migrateExample,
		ValidArgsFunction: completeCRDNames(g),
		RunE:              runE(o),
	}
	o.cmd = cmd
	o.out = addOutputFlags(cmd, outputJSON, outputYAML)
	f := cmd.Flags()
	f.StringVar(&o.To, "to", "", "Make this version the storage version first (it must exist and be served)")
	f.BoolVar(&o.DryRun, "dry-run", false, "Print the plan and write nothing")
	f.IntVar(&o.Concurrency, "concurrency", 16, "Concurrent writers")
	f.Float64Var(&o.QPS, "qps", 0, "Limit requests per second (0: no client-side limit; the API server's priority and fairness still applies)")
	f.Int64Var(&o.ChunkSize, "chunk-size", 500, "Objects per list page (memory is bounded by it)")
	f.StringVar(&o.Checkpoint, "checkpoint", "", "Checkpoint file (default: in your cache folder, per cluster and CRD)")
	f.BoolVar(&o.NoTrim, "no-trim", false, "Do not trim status.storedVersions after the rewrite")
	f.StringVar(&o.Engine, "engine", engineClient, "Who rewrites the objects: client (this command) or cluster (a storagemigration.k8s.io StorageVersionMigration)")
	f.BoolVarP(&o.Yes, "yes", "y", false, "Do not ask before switching the storage version")
	f.BoolVarP(&o.Quiet, "quiet", "q", false, "No progress on stderr")
	f.BoolVar(&o.All, "all", false, "Migrate every CRD whose status.storedVersions lists a version other than its storage version: one plan, one question, one progress display")
	f.DurationVar(&o.ProgressInterval, "progress-interval", 5*time.Second, "How often to print a progress line when stderr is not a terminal")
	_ = f.MarkHidden("progress-interval")
	_ = cmd.RegisterFlagCompletionFunc("engine", func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
		return []string{engineClient, engineCluster}, cobra.ShellCompDirectiveNoFileComp
	})
	cmd.AddCommand(newCmdMigrateStatus(g))
	return cmd
}

// Complete takes the argument.
func (o *MigrateOptions) Complete(_ *cobra.Command, args []string) error {
	if o.All {
		return o.completeAll(args)
	}
	if len(args) != 1 {
		return UsageErrorf("migrate takes one CRD name, got %d (e.g. kubectl crdver migrate crontabs.stable.example.com)", len(args))
	}
	o.Name = args[0]
	return nil
}

// Validate checks the flags. It does no I/O.
func (o *MigrateOptions) Validate() error {
	if err := o.out.validate(); err != nil {
		return err
	}
	switch {
	case o.Engine != engineClient && o.Engine != engineCluster:
		return UsageErrorf("--engine %q is not supported: use client or cluster", o.Engine)
	case o.Concurrency < 1:
		return UsageErrorf("--concurrency must be at least 1, got %d", o.Concurrency)
	case o.QPS < 0:
		return UsageErrorf("--qps must be 0 (no limit) or more, got %v", o.QPS)
	case o.ProgressInterval <= 0:
		return UsageErrorf("--progress-interval must be positive, got %v", o.ProgressInterval)
	case o.ChunkSize < 1:
		return UsageErrorf("--chunk-size must be at least 1, got %d", o.ChunkSize)
	case o.Engine == engineCluster && o.Checkpoint != "":
		return UsageErrorf("--checkpoint is for --engine client: the cluster's StorageVersionMigration keeps its own progress")
	}
	return nil
}

// Run plans, and unless --dry-run, migrates.
func (o *MigrateOptions) Run(ctx context.Context) error {
	if o.All {
		return o.runAll(ctx)
	}
	cfg, err := o.g.RESTConfig()
	if err != nil {
		return err
	}
	c, err := migrate.NewClients(cfg)
	if err != nil {
		return Unavailable(fmt.Errorf("cannot build a client: %w", err))
	}
	crd, err := o.source.one(ctx, o.Name)
	if err != nil {
		return err
	}
	if o.To != "" {
		if err := migrate.CheckTarget(crd, o.To); err != nil {
			return Usage(err)
		}
	}
	trim := !o.NoTrim
	plan, err := migrate.BuildPlan(ctx, c, crd, o.To, o.ChunkSize, trim)
	if err != nil {
		return clusterError(fmt.Sprintf("planning the migration of %s", crd.Name), err)
	}
	report := &MigrateReport{Plan: plan, DryRun: o.DryRun, Engine: o.Engine}
	if !o.out.structured() {
		if err := printPlan(o.g.Out, plan, o.out.noHeaders); err != nil {
			return err
		}
	}
	if o.DryRun {
		if o.out.structured() {
			return o.out.printStructured(o.g.Out, report)
		}
		_, err := fmt.Fprintln(o.g.Out, "\nDry run: nothing was written.")
		return err
	}

	needed := migrate.NeededAccess(crd, plan.SwitchStorage, trim)
	if o.Engine == engineCluster {
		needed = append(needed, migrate.ClusterEngineAccess()...)
	}
	if err := migrate.CheckAccess(ctx, c, needed); err != nil {
		if errors.Is(err, migrate.ErrAccessDenied) {
			return Unavailable(fmt.Errorf("%s: %w", crd.Name, err))
		}
		return clusterError("checking your rights", err)
	}
	var clusterAPI string
	if o.Engine == engineCluster {
		// Before the storage switch: fail early when the API is not there.
		if clusterAPI, err = migrate.ServedClusterMigrationVersion(c); err != nil {
			return Unavailable(err)
		}
	}

	if plan.SwitchStorage {
		if !o.Yes {
			ok, err := o.confirm(fmt.Sprintf("Make %s the storage version of %s (now %s)? [y/N]: ", plan.TargetVersion, crd.Name, plan.StorageVersion))
			if err != nil {
				return err
			}
			if !ok {
				return Unavailable(fmt.Errorf("%s: storage version not changed: not confirmed (use --yes to skip the question)", crd.Name))
			}
		}
		if crd, err = migrate.SwitchStorage(ctx, c, crd.Name, plan.TargetVersion); err != nil {
			return clusterError(fmt.Sprintf("making %s the storage version of %s", plan.TargetVersion, crd.Name), err)
		}
		o.progressf("storage version of %s is now %s\n", crd.Name, plan.TargetVersion)
	} else {
		if crd, err = c.CRDs.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, crd.Name, metav1.GetOptions{}); err != nil {
			return clusterError(fmt.Sprintf("getting %s", crd.Name), err)
		}
		// Someone may just have switched it: writes must be encoded at the new version.
		if err := migrate.WaitStorageVersion(ctx, c, crd, 30*time.Second); err != nil {
			return Unavailable(err)
		}
	}

	var ev migrate.Evidence
	var failed int64
	if o.Engine == engineCluster {
		cr, err := o.runCluster(ctx, c, crd, clusterAPI)
		report.Cluster = cr
		if err != nil {
			return err
		}
		ev = cr.Evidence
	} else {
		res, err := o.runClient(ctx, c, crd, plan.Objects)
		report.Result = res
		if err != nil {
			return err
		}
		if res.Interrupted {
			if o.out.structured() {
				_ = o.out.printStructured(o.g.Out, report)
			} else {
				_ = printResult(o.g.Out, res, o.out.noHeaders)
			}
			return Unavailable(fmt.Errorf("interrupted: %d objects done, progress saved in %s; resume with: %s", res.Total(), res.Checkpoint, o.resumeCommand(crd.Name, res.Checkpoint)))
		}
		ev = migrate.EvidenceOf(res)
		failed = res.Failed
	}

	if trim {
		tr, err := migrate.Trim(ctx, c, ev)
		if err != nil {
			return clusterError(fmt.Sprintf("trimming status.storedVersions of %s", crd.Name), err)
		}
		report.Trim = tr
	}
	if o.out.structured() {
		if err := o.out.printStructured(o.g.Out, report); err != nil {
			return err
		}
	} else {
		if report.Result != nil {
			if err := printResult(o.g.Out, report.Result, o.out.noHeaders); err != nil {
				return err
			}
		}
		if report.Cluster != nil {
			printClusterResult(o.g.Out, report.Cluster)
		}
		printTrim(o.g.Out, report.Trim, ev.StorageVersion)
	}
	if failed > 0 {
		return ProblemsFound("%s: %d objects could not be rewritten (listed above); status.storedVersions was not trimmed", crd.Name, failed)
	}
	if report.Cluster != nil && !report.Cluster.Succeeded {
		return ProblemsFound("%s: the StorageVersionMigration %s failed: %s", crd.Name, report.Cluster.Name, report.Cluster.Message)
	}
	if report.Trim != nil && !report.Trim.Safe {
		return ProblemsFound("%s: status.storedVersions was not trimmed: %s", crd.Name, report.Trim.Reason)
	}
	return nil
}

func (o *MigrateOptions) runClient(ctx context.Context, c *migrate.Clients, crd *apiextensionsv1.CustomResourceDefinition, total int64) (*migrate.Result, error) {
	path := o.Checkpoint
	if path == "" {
		p, err := migrate.DefaultCheckpointPath(c.Server, crd.Name)
		if err != nil {
			return nil, Unavailable(err)
		}
		path = p
	}
	r, err := migrate.NewRewriter(c, crd, migrate.RewriteOptions{Concurrency: o.Concurrency, QPS: o.QPS, ChunkSize: o.ChunkSize, Checkpoint: path})
	if err != nil {
		return nil, Unavailable(err)
	}
	cp, note, err := r.Resuming()
	if err != nil {
		return nil, Unavailable(err)
	}
	if note != "" {
		o.progressf("%s\n", note)
	}
	if cp != nil {
		o.progressf("resuming from %s: %d objects already done\n", path, cp.Counts.Total())
	}
	stop := o.startProgress(r, total)
	res, err := r.Run(ctx)
	stop()
	if err != nil {
		return res, clusterError(fmt.Sprintf("rewriting the objects of %s", crd.Name), err)
	}
	return res, nil
}

// startProgress shows the rewrite's progress on stderr until the returned function is called:
// a bar with count, rate and ETA on a terminal, a plain line every ProgressInterval otherwise,
// nothing with --quiet.
func (o *MigrateOptions) startProgress(r interface{ Progress() migrate.Counts }, total int64) func() {
	if o.Quiet {
		return func() {}
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	if isTerminal(o.g.ErrOut) {
		bar := progressbar.NewOptions64(total,
			progressbar.OptionSetWriter(o.g.ErrOut),
			progressbar.OptionSetDescription("rewriting"),
			progressbar.OptionShowCount(),
			progressbar.OptionShowIts(),
			progressbar.OptionSetItsString("objects"),
			progressbar.OptionSetPredictTime(true),
			progressbar.OptionThrottle(100*time.Millisecond),
			progressbar.OptionSetWidth(30),
		)
		_ = bar.RenderBlank() // starts the bar's clock now, so the first rate is right
		go func() {
			defer wg.Done()
			t := time.NewTicker(200 * time.Millisecond)
			defer t.Stop()
			for {
				select {
				case <-done:
					n := r.Progress().Total()
					if n > bar.GetMax64() {
						bar.ChangeMax64(n)
					}
					_ = bar.Set64(n)
					_ = bar.Exit()
					fmt.Fprintln(o.g.ErrOut)
					return
				case <-t.C:
					n := r.Progress().Total()
					if n > bar.GetMax64() {
						bar.ChangeMax64(n)
					}
					_ = bar.Set64(n)
				}
			}
		}()
	} else {
		go func() {
			defer wg.Done()
			start := time.Now()
			first := r.Progress().Total()
			t := time.NewTicker(o.ProgressInterval)
			defer t.Stop()
			for {
				select {
				case <-done:
					return
				case <-t.C:
					p := r.Progress()
					n := p.Total()
					rate := float64(n-first) / time.Since(start).Seconds()
					eta := "?"
					if rate > 0 && total > n {
						eta = (time.Duration(float64(total-n)/rate) * time.Second).Round(time.Second).String()
					} else if total <= n {
						eta = "0s"
					}
					fmt.Fprintf(o.g.ErrOut, "migrate: %d/%d objects (rewritten %d, already current %d, deleted %d, failed %d), %.0f objects/s, ETA %s\n",
						n, total, p.Rewritten, p.Current, p.Deleted, p.Failed, rate, eta)
				}
			}
		}()
	}
	return func() { close(done); wg.Wait() }
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// progressf prints a progress note on stderr (not with --quiet).
func (o *MigrateOptions) progressf(format string, args ...any) {
	if !o.Quiet {
		fmt.Fprintf(o.g.ErrOut, format, args...)
	}
}

// confirm asks on stderr and reads the answer from stdin.
func (o *MigrateOptions) confirm(question string) (bool, error) {
	fmt.Fprint(o.g.ErrOut, "\n"+question)
	line, err := bufio.NewReader(o.g.In).ReadString('\n')
	if err != nil && err != io.EOF {
		return false, Unavailable(fmt.Errorf("reading the answer: %w", err))
	}
	if f, ok := o.g.In.(*os.File); !ok || !term.IsTerminal(int(f.Fd())) {
		// The answer came from a pipe: show it, so the transcript reads right.
		fmt.Fprintln(o.g.ErrOut, strings.TrimSpace(line))
	}
	switch strings.ToLower(strings.TrimSpace(line)) {
	case "y", "yes":
		return true, nil
	}
	return false, nil
}

// resumeCommand is the command line that resumes an interrupted run: the same flags (but
// --to, --yes and --dry-run: the storage switch is done), the same checkpoint.
func (o *MigrateOptions) resumeCommand(name, checkpoint string) string {
	parts := []string{"kubectl", "crdver", "migrate", name}
	skip := map[string]bool{"to": true, "yes": true, "dry-run": true, "checkpoint": true, "progress-interval": true}
	if o.cmd != nil {
		o.cmd.Flags().Visit(func(f *pflag.Flag) {
			if skip[f.Name] {
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
	parts = append(parts, "--checkpoint="+shellQuote(checkpoint))
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

func printPlan(w io.Writer, p *migrate.Plan, noHeaders bool) error {
	scope := "cluster-scoped"
	if p.Namespaced {
		scope = "namespaced"
	}
	target := p.TargetVersion
	if p.SwitchStorage {
		target += " (switching from " + p.StorageVersion + ")"
	}
	fmt.Fprintf(w, "Plan for %s (%s)\n", p.CRD, scope)
	fmt.Fprintf(w, "  storage version:  %s\n", p.StorageVersion)
	fmt.Fprintf(w, "  storedVersions:   [%s]\n", strings.Join(p.StoredVersions, " "))
	fmt.Fprintf(w, "  target version:   %s\n", target)
	if p.Namespaced {
		fmt.Fprintf(w, "  objects:          %d in %d namespaces\n", p.Objects, len(p.Namespaces))
	} else {
		fmt.Fprintf(w, "  objects:          %d\n", p.Objects)
	}
	for i, s := range p.Steps {
		fmt.Fprintf(w, "  %d. %s\n", i+1, s)
	}
	if p.Namespaced && len(p.Namespaces) > 0 {
		fmt.Fprintln(w)
		t := &table{header: []string{"namespace", "objects"}}
		for _, n := range p.Namespaces {
			t.add(n.Namespace, strconv.FormatInt(n.Objects, 10))
		}
		return t.print(w, noHeaders)
	}
	return nil
}

func printResult(w io.Writer, r *migrate.Result, noHeaders bool) error {
	fmt.Fprintln(w)
	for _, n := range r.Notes {
		fmt.Fprintf(w, "Note: %s\n", n)
	}
	t := &table{header: []string{"result", "objects"}}
	t.add("rewritten", strconv.FormatInt(r.Rewritten, 10))
	t.add("already current", strconv.FormatInt(r.Current, 10))
	t.add("deleted meanwhile", strconv.FormatInt(r.Deleted, 10))
	t.add("failed", strconv.FormatInt(r.Failed, 10))
	t.add("total", strconv.FormatInt(r.Total(), 10))
	if err := t.print(w, noHeaders); err != nil {
		return err
	}
	fmt.Fprintf(w, "\n%s at %s: %d objects accounted for in %s (%.0f objects/s this run)\n",
		r.CRD, r.StorageVersion, r.Total(), (time.Duration(r.ElapsedSeconds * float64(time.Second))).Round(10*time.Millisecond), r.ObjectsPerSecond)
	if len(r.Failures) > 0 {
		fmt.Fprintln(w, "\nObjects that could not be rewritten:")
		ft := &table{header: []string{"namespace", "name", "reason"}}
		for _, f := range r.Failures {
			ft.add(f.Namespace, f.Name, f.Reason)
		}
		return ft.print(w, noHeaders)
	}
	return nil
}

func printTrim(w io.Writer, tr *migrate.TrimResult, storage string) {
	switch {
	case tr == nil:
		fmt.Fprintln(w, "status.storedVersions left as it is (--no-trim)")
	case tr.Trimmed:
		fmt.Fprintf(w, "status.storedVersions: [%s] -> [%s]; the other versions can now be removed from spec.versions\n", strings.Join(tr.Before, " "), strings.Join(tr.After, " "))
	case tr.Safe:
		fmt.Fprintf(w, "status.storedVersions: %s\n", tr.Reason)
	default:
		fmt.Fprintf(w, "status.storedVersions not trimmed (still [%s]): %s\n", strings.Join(tr.Before, " "), tr.Reason)
	}
}

func (o *MigrateOptions) runCluster(ctx context.Context, c *migrate.Clients, crd *apiextensionsv1.CustomResourceDefinition, version string) (*migrate.ClusterResult, error) {
	start := time.Now()
	res, err := migrate.RunCluster(ctx, c, crd, version, o.ClusterStartTimeout, func(cond, msg string) {
		line := fmt.Sprintf("StorageVersionMigration: %s after %s", cond, time.Since(start).Round(100*time.Millisecond))
		if msg != "" {
			line += ": " + msg
		}
		o.progressf("%s\n", line)
	})
	if err != nil {
		if ctx.Err() != nil {
			return res, Unavailable(err)
		}
		return res, clusterError(fmt.Sprintf("migrating %s with a StorageVersionMigration", crd.Name), err)
	}
	return res, nil
}

func printClusterResult(w io.Writer, r *migrate.ClusterResult) {
	state := "Failed"
	if r.Succeeded {
		state = "Succeeded"
	}
	fmt.Fprintf(w, "\nStorageVersionMigration %s (%s): %s in %s", r.Name, r.APIVersion, state, (time.Duration(r.ElapsedSeconds * float64(time.Second))).Round(10*time.Millisecond))
	if r.Message != "" {
		fmt.Fprintf(w, ": %s", r.Message)
	}
	fmt.Fprintln(w)
}
