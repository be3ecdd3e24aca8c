package plugin

import (
	"context"
	"errors"
	"strings"

	"github.com/spf13/cobra"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	crdinfo "github.com/crdver/kubectl-crdver/crd"
	"github.com/crdver/kubectl-crdver/migrate"
	"github.com/crdver/kubectl-crdver/plan"
	"github.com/crdver/kubectl-crdver/printers"
	"github.com/crdver/kubectl-crdver/upgrade"
)

// pathFlags are --via and --releases of plan and upgrade: the releases between the cluster
// and the target (-f), in order.
type pathFlags struct {
	via      []string
	releases string
}

func addPathFlags(cmd *cobra.Command) *pathFlags {
	p := &pathFlags{}
	cmd.Flags().StringArrayVar(&p.via, "via", nil, "A release between the cluster and -f (repeat, oldest first): a file, directory, URL or - as -f takes; the path skips every release it can")
	cmd.Flags().StringVar(&p.releases, "releases", "", "A directory with one sub-directory per release, taken in version order as --via (sub-directories whose name carries no version are skipped; -f and any newer release are left out)")
	return p
}

func (p *pathFlags) set() bool { return len(p.via) > 0 || p.releases != "" }

func (p *pathFlags) validate() error {
	if len(p.via) > 0 && p.releases != "" {
		return UsageErrorf("give the releases between the cluster and -f with --via or with --releases, not both")
	}
	return nil
}

// read reads the releases of the path, oldest first (plan.ReadReleases), with what -f names
// (target, to leave it out of --releases), and the notes on sub-directories skipped.
func (p *pathFlags) read(ctx context.Context, g *Globals, target []string) ([]plan.PathRelease, []string, error) {
	rels, notes, err := plan.ReadReleases(p.via, p.releases, target, func(path string, optional bool) ([]*apiextensionsv1.CustomResourceDefinition, error) {
		if optional && !holdsCRDs(path) {
			return nil, nil
		}
		crds, _, err := g.readCRDFiles(ctx, []string{path}, "--via", nil)
		return crds, err
	})
	for i, n := range notes {
		notes[i] = "--releases: " + n
	}
	if errors.Is(err, plan.ErrReleases) {
		return nil, notes, UsageErrorf("--releases %s", strings.TrimPrefix(err.Error(), plan.ErrReleases.Error()+": "))
	}
	return rels, notes, err
}

// releaseName names a release by its path (plan.ReleaseName).
func releaseName(path string) string { return plan.ReleaseName(path) }

// runPath plans the release path to the target (next, -f) through --via/--releases and prints
// it: the path table and every hop's runbook, -o json|yaml the report, -o markdown for a pull
// request.
func (o *PlanOptions) runPath(ctx context.Context, rc plan.ReleaseClients, ro plan.ReleaseOptions, next []*apiextensionsv1.CustomResourceDefinition) error {
	via, notes, err := o.path.read(ctx, o.g, o.Files)
	if err != nil {
		return err
	}
	for _, n := range notes {
		o.progress.Notef("%s", n)
	}
	ro.Next = nil
	rep, err := plan.Path(ctx, rc, plan.PathOptions{Via: via, Target: plan.PathRelease{Name: releaseName(o.Files[0]), File: plan.JoinFiles(o.Files), CRDs: next}, Release: ro})
	if err != nil {
		return o.runError(err)
	}
	if err := o.printer.PrintReport(o.g.Out, printers.PlanPath(rep)); err != nil {
		return err
	}
	return end(rep.Outcome(), nil)
}

// holdsCRDs reports whether a release folder of --releases holds a CRD (a folder of samples
// named by version does not).
func holdsCRDs(dir string) bool {
	docs, err := ReadDocuments([]string{dir}, nil)
	if err != nil {
		return true // readCRDFiles says what is wrong
	}
	for _, d := range docs {
		if crdinfo.IsCRD(d.APIVersion, d.Kind) {
			return true
		}
	}
	return false
}

// runPath upgrades along the release path to -f through --via/--releases: the path, then
// each hop's steps, then the last line (the last hop's outcome, or what to do first).
func (o *UpgradeOptions) runPath(ctx context.Context, c *migrate.Clients, uo upgrade.Options) error {
	via, notes, err := o.path.read(ctx, o.g, o.Files)
	if err != nil {
		return err
	}
	for _, n := range notes {
		o.progress.Notef("%s", n)
	}
	target := plan.PathRelease{Name: releaseName(o.Files[0]), File: uo.ApplyFile, CRDs: uo.Next}
	rep, err := upgrade.RunPath(ctx, c, upgrade.PathOptions{Options: uo, Via: via, Target: target})
	o.g.warnings.Summary(o.g.ErrOut)
	if rep != nil && rep.Path != nil {
		if perr := o.printer.PrintReport(o.g.Out, printers.UpgradePath(rep)); perr != nil {
			return perr
		}
	}
	switch {
	case rep == nil:
		return o.runError(ctx, err, nil)
	case errors.Is(err, upgrade.ErrNeedsPerson):
		return end(rep.Outcome.Outcome, nil) // the instruction
	case err != nil:
		var last *upgrade.Report
		if len(rep.Hops) > 0 {
			last = rep.Hops[len(rep.Hops)-1]
		}
		return end(rep.Outcome.Outcome, o.runError(ctx, err, last)) // the words with the flags; the code, the outcome's
	}
	if o.DryRun && rep.Outcome.ExitCode == 0 {
		return o.printer.PrintPart(o.g.Out, printers.DryRunNote())
	}
	return end(rep.Outcome.Outcome, nil)
}
