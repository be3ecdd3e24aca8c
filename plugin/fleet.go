package plugin

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/crdver/kubectl-crdver/fleet"
	"github.com/crdver/kubectl-crdver/printers"
)

// fleetSpec says how a command runs on a fleet: the report each cluster's run prints, and what
// the fleet adds (a plan's waves; an upgrade's rollout).
type fleetSpec struct {
	// kind is the report of each cluster's run (-o json); pathKind when --via/--releases
	// are given.
	kind, pathKind fleet.Kind
	// waves: --waves, --canary and --wave-label shape the waves the report gives (plan).
	waves bool
	// rollout: the command writes, wave after wave (upgrade): --waves, --canary,
	// --keep-going, --backup-dir.
	rollout bool
	// refuse are the command's flags a fleet run cannot take, with why.
	refuse map[string]string
	// timeout is --cluster-timeout's default.
	timeout time.Duration
}

// fleetFlags are the flags that run a command on many clusters (--contexts, --all-contexts,
// --kubeconfigs) and shape that run.
type fleetFlags struct {
	cmd  *cobra.Command
	g    *Globals
	out  *outputFlags
	spec fleetSpec

	contexts    []string
	allContexts bool
	kubeconfigs string
	parallel    int
	timeout     time.Duration
	wavesSpec   string
	canary      int
	keepGoing   bool
	waveLabel   string
	backupDir   string

	waves fleet.Waves
}

// defaultParallel is --parallel's default: a few clusters at once, each a process of its own.
const defaultParallel = 4

// addFleetFlags adds the fleet flags to cmd, whose report is printed as out says.
func addFleetFlags(cmd *cobra.Command, g *Globals, out *outputFlags, spec fleetSpec) *fleetFlags {
	f := &fleetFlags{cmd: cmd, g: g, out: out, spec: spec}
	fs := cmd.Flags()
	fs.StringSliceVar(&f.contexts, "contexts", nil, "Run on each of these kubeconfig contexts (comma-separated; patterns like prod-* allowed) and print one report for the fleet")
	fs.BoolVar(&f.allContexts, "all-contexts", false, "Run on every context of the kubeconfig (KUBECONFIG merged, as kubectl loads it) and print one report for the fleet")
	fs.StringVar(&f.kubeconfigs, "kubeconfigs", "", "Run on the cluster of each kubeconfig file in this folder (as Cluster API writes them; each file's current context) and print one report for the fleet")
	fs.IntVar(&f.parallel, "parallel", defaultParallel, "With a fleet: clusters run at once (each in a process of its own)")
	fs.DurationVar(&f.timeout, "cluster-timeout", spec.timeout, "With a fleet: stop a cluster's run after this long (it is reported as timed out; 0: no limit)")
	if spec.waves || spec.rollout {
		fs.StringVar(&f.wavesSpec, "waves", "", "With a fleet: clusters per wave, in order, e.g. 1,3,rest (rest: every cluster left; without it the last size repeats) (default 1,rest)")
		fs.IntVar(&f.canary, "canary", 0, "With a fleet: a first wave of this many clusters, then the rest (--waves N,rest)")
	}
	if spec.waves {
		fs.StringVar(&f.waveLabel, "wave-label", fleet.DefaultWaveLabel, "With a fleet: the label of the Argo CD Applications that names their cluster, which the RollingSync steps select on")
	}
	if spec.rollout {
		fs.BoolVar(&f.keepGoing, "keep-going", false, "With a fleet: go on with the other clusters and waves when a cluster refuses or fails")
		fs.StringVar(&f.backupDir, "backup-dir", "", "With a fleet: the folder of the backups, one file per cluster named after it (default: the current folder)")
	}
	return f
}

// set reports whether the command runs on a fleet.
func (f *fleetFlags) set() bool {
	return f != nil && (len(f.contexts) > 0 || f.allContexts || f.kubeconfigs != "")
}

func (f *fleetFlags) changed(name string) bool {
	fl := f.cmd.Flags().Lookup(name)
	return fl != nil && fl.Changed
}

// fleetOnly are the flags that shape a fleet run.
var fleetOnly = []string{"parallel", "cluster-timeout", "waves", "canary", "wave-label", "keep-going", "backup-dir"}

// validate checks the fleet flags and what the command's other flags allow with them (no I/O).
func (f *fleetFlags) validate() error {
	n := 0
	for _, given := range []bool{len(f.contexts) > 0, f.allContexts, f.kubeconfigs != ""} {
		if given {
			n++
		}
	}
	switch {
	case n > 1:
		return UsageErrorf("choose the clusters with one of --contexts, --all-contexts or --kubeconfigs")
	case n == 0:
		for _, name := range fleetOnly {
			if f.changed(name) {
				return UsageErrorf("--%s is for a fleet: choose the clusters with --contexts, --all-contexts or --kubeconfigs", name)
			}
		}
		return nil
	case f.changed("context"):
		return UsageErrorf("--context names one cluster: with --contexts, --all-contexts or --kubeconfigs leave it out")
	case f.kubeconfigs != "" && f.changed("kubeconfig"):
		return UsageErrorf("--kubeconfigs gives a kubeconfig per cluster: leave out --kubeconfig")
	case f.parallel < 1:
		return UsageErrorf("--parallel must be at least 1, got %d", f.parallel)
	case f.timeout < 0:
		return UsageErrorf("--cluster-timeout must be 0 (no limit) or more, got %v", f.timeout)
	case f.wavesSpec != "" && f.changed("canary"):
		return UsageErrorf("give the waves with --waves or --canary, not both")
	case f.canary < 0 || f.changed("canary") && f.canary == 0:
		return UsageErrorf("--canary must be at least 1, got %d", f.canary)
	}
	for _, name := range slices.Sorted(maps.Keys(f.spec.refuse)) {
		if f.changed(name) {
			return UsageErrorf("--%s cannot be used on a fleet: %s", name, f.spec.refuse[name])
		}
	}
	if f.waveLabel != "" {
		if errs := validation.IsQualifiedName(f.waveLabel); len(errs) > 0 {
			return UsageErrorf("--wave-label %q is not a label key: %s", f.waveLabel, strings.Join(errs, "; "))
		}
	}
	f.waves = fleet.DefaultWaves
	switch {
	case f.wavesSpec != "":
		w, err := fleet.ParseWaves(f.wavesSpec)
		if err != nil {
			return UsageErrorf("--waves %v", err)
		}
		f.waves = w
	case f.canary > 0:
		f.waves = fleet.Canary(f.canary)
	}
	return nil
}

// run runs the command on the fleet and prints the fleet's report; its exit status is the
// worst cluster's.
func (f *fleetFlags) run(ctx context.Context) error {
	clusters, notes, err := f.clusters()
	if err != nil {
		return err
	}
	r, err := f.newRunner(ctx)
	if err != nil {
		return err
	}
	defer r.close()
	printer, err := f.out.toPrinter(humanOptions{})
	if err != nil {
		return err
	}
	if f.spec.rollout && !r.dryRun {
		return f.rollout(ctx, r, clusters, notes, printer)
	}
	rows, _ := fleet.Run(ctx, clusters, f.options(r, len(clusters), r.run))
	rep := fleet.NewReport(r.display, rows, ctx.Err() != nil)
	rep.Notes = notes
	switch {
	case f.spec.waves:
		rep.PlanWaves(f.waves, f.waveLabel)
	case f.spec.rollout:
		rep.RolloutWaves(f.waves)
	}
	return f.finish(printer, rep)
}

// clusters are the clusters the flags choose, and notes on the files of --kubeconfigs left out.
func (f *fleetFlags) clusters() ([]fleet.Cluster, []string, error) {
	if f.kubeconfigs != "" {
		cs, notes, err := fleet.KubeconfigDir(f.kubeconfigs)
		if err != nil {
			return nil, notes, Usage(fmt.Errorf("--kubeconfigs %s: %w", f.kubeconfigs, err))
		}
		return cs, notes, nil
	}
	cfg, err := f.g.ConfigFlags.ToRawKubeConfigLoader().RawConfig()
	if err != nil {
		return nil, nil, Usage(fmt.Errorf("cannot load the kubeconfig: %w (check --kubeconfig and KUBECONFIG)", err))
	}
	file := ""
	if f.changed("kubeconfig") {
		file = *f.g.ConfigFlags.KubeConfig
	}
	var cs []fleet.Cluster
	if f.allContexts {
		cs, err = fleet.AllContexts(&cfg, file)
	} else {
		cs, err = fleet.Contexts(&cfg, f.contexts, file)
	}
	if err != nil {
		return nil, nil, Usage(fmt.Errorf("--contexts: %w", err))
	}
	return cs, nil, nil
}

// options are fleet.Run's: --parallel, --cluster-timeout, and a progress line per cluster.
func (f *fleetFlags) options(r *fleetRunner, total int, run fleet.RunFunc) fleet.Options {
	quiet, _ := f.cmd.Flags().GetBool("quiet")
	p := NewProgress(f.g.ErrOut, quiet, 5*time.Second)
	var done atomic.Int64
	var once sync.Once
	stop := func() {}
	return fleet.Options{
		Parallel: f.parallel, Timeout: f.timeout, Run: run,
		Started: func(fleet.Cluster) {
			once.Do(func() {
				stop = p.Start(Task{Name: "clusters", Prefix: "fleet", Unit: "clusters", Verb: "finished", Total: int64(total), Done: done.Load})
			})
		},
		Done: func(row fleet.Row) {
			n := done.Add(1)
			verdict, _ := row.Shown()
			p.Notef("fleet: %s: %s, exit %d (%.1fs; %d of %d)", row.Name, verdict, row.ExitCode, row.Seconds, n, total)
			if n == int64(total) {
				stop()
			}
		},
	}
}

// rollout upgrades the fleet wave after wave, after one question for the whole fleet.
func (f *fleetFlags) rollout(ctx context.Context, r *fleetRunner, clusters []fleet.Cluster, notes []string, printer ReportPrinter) error {
	o := fleet.RolloutOptions{Waves: f.waves, KeepGoing: f.keepGoing, Probe: r.probe}
	o.Options = f.options(r, len(clusters), r.upgrade)
	o.Options.Started, o.Options.Done = nil, nil
	ro := fleet.PlanRollout(ctx, clusters, o)
	preview := ro.Preview(r.display)
	if err := printer.PrintPart(f.g.Out, printers.FleetWaves(preview, "--waves "+f.waves.String())); err != nil {
		return err
	}
	if yes, _ := f.cmd.Flags().GetBool("yes"); !yes {
		ok, err := f.g.confirm(fmt.Sprintf("Upgrade the %s, wave after wave? [y/N]: ", printers.Plural(len(ro.Waves), "wave")))
		if err != nil {
			return err
		}
		if !ok {
			return Unavailable(errors.New("nothing was written: the rollout was not confirmed (use --yes to skip the question)"))
		}
	}
	o.Options = f.options(r, len(clusters), r.upgrade)
	rep := ro.Run(ctx, o)
	rep.Command, rep.Notes = r.display, notes
	return f.finish(printer, rep)
}

// finish prints the fleet's report; the exit status is the worst cluster's, the last line
// what the clusters need (or which finished, when interrupted).
func (f *fleetFlags) finish(printer ReportPrinter, rep *fleet.Report) error {
	if bad := fleet.BadLabelValues(rep.Waves); len(bad) > 0 && rep.ArgoCD != nil {
		rep.Notes = append(rep.Notes, fmt.Sprintf("a label value cannot hold these cluster names, so the RollingSync steps cannot select them: %s (label the Applications with other names and map them)", strings.Join(bad, ", ")))
	}
	if err := printer.PrintReport(f.g.Out, printers.Fleet(rep)); err != nil {
		return err
	}
	if rep.ExitCode == 0 {
		return nil
	}
	msg := rep.Summary()
	if msg == "" {
		msg = fmt.Sprintf("the worst cluster's run exited %d (see above)", rep.ExitCode)
	}
	return &ExitError{Code: rep.ExitCode, Err: errors.New(msg)}
}

// backupFile is the upgrade's backup file of a cluster: named after it, in --backup-dir.
func (f *fleetFlags) backupFile(c fleet.Cluster, stamp string) string {
	dir := f.backupDir
	if dir == "" {
		dir = "."
	}
	p := filepath.Join(dir, "crdver-backup-"+fileSafe(c.Name)+"-"+stamp+".yaml")
	if abs, err := filepath.Abs(p); err == nil {
		return abs
	}
	return p
}

// fileSafe is name with every character but letters, digits, '.', '-' and '_' replaced by '_'
// (context names hold ':' and '/': arn:aws:eks:…:cluster/prod).
func fileSafe(name string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '.', r == '-', r == '_':
			return r
		}
		return '_'
	}, name)
}

// engine is the executable each cluster's run is: this one (crdver-engine, which
// kubectl-crdver executes).
func engine() (string, error) {
	exe, err := os.Executable()
	if err != nil {
		return "", fmt.Errorf("cannot find crdver-engine to run on each cluster: %w", err)
	}
	return exe, nil
}

// visitChanged calls fn for each flag given on the command line, slice flags once per value.
func visitChanged(fs *pflag.FlagSet, fn func(fl *pflag.Flag, value string)) {
	fs.Visit(func(fl *pflag.Flag) {
		if sv, ok := fl.Value.(pflag.SliceValue); ok {
			for _, v := range sv.GetSlice() {
				fn(fl, v)
			}
			return
		}
		fn(fl, fl.Value.String())
	})
}

// shownFlag is a flag as people write it: -f FILE, --via DIR, --dry-run.
func shownFlag(fl *pflag.Flag, value string) []string {
	name := "--" + fl.Name
	if fl.Shorthand != "" && fl.ShorthandDeprecated == "" {
		name = "-" + fl.Shorthand
	}
	if fl.Value.Type() == "bool" && value == "true" {
		return []string{name}
	}
	if strings.ContainsAny(value, " '\"$`\\") || value == "" {
		value = "'" + strings.ReplaceAll(value, "'", `'\''`) + "'"
	}
	return []string{name, value}
}
