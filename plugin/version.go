package plugin

import (
	"context"
	"github.com/spf13/cobra"

	"github.com/crdver/kubectl-crdver/internal/buildinfo"
	"github.com/crdver/kubectl-crdver/printers"
)

// BuildInfo is what `kubectl crdver version` prints (internal/buildinfo, shared with the
// kubectl-crdver front binary, which answers `version` itself; Version and Commit are stamped
// there at build time).
type BuildInfo = buildinfo.Info

type versionOptions struct {
	g       *Globals
	out     *outputFlags
	printer ReportPrinter
}

// NewCmdVersion builds `kubectl crdver version`.
func NewCmdVersion(g *Globals) *cobra.Command {
	o := &versionOptions{g: g}
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print the version of kubectl-crdver",
		Args:  cobra.NoArgs,
		RunE:  runE(o),
	}
	o.out = addOutputFlags(cmd, outputJSON, outputYAML)
	_ = cmd.Flags().MarkHidden("no-headers") // no table here: refused in Validate
	return cmd
}

func (o *versionOptions) Complete(*cobra.Command, []string) (err error) {
	o.printer, err = o.out.toPrinter(humanOptions{})
	return err
}
func (o *versionOptions) Validate() error {
	if o.out.noHeaders {
		return UsageErrorf("version prints no table: --no-headers does not apply")
	}
	return nil
}
func (o *versionOptions) Run(context.Context) error {
	return o.printer.PrintReport(o.g.Out, printers.BuildInfo(buildinfo.Get()))
}
