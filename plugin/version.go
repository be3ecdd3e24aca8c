package plugin

import (
	"context"
	"runtime"
	"runtime/debug"

	"github.com/spf13/cobra"
)

// Version and Commit are stamped at build time:
//
//	go build -ldflags "-X github.com/crdver/kubectl-crdver/plugin.Version=v0.1.0 -X github.com/crdver/kubectl-crdver/plugin.Commit=$(git rev-parse HEAD)"
var (
	Version = "dev"
	Commit  = ""
)

// BuildInfo is what `kubectl crdver version` prints.
type BuildInfo struct {
	Version           string `json:"version"`
	Commit            string `json:"commit,omitempty"`
	GoVersion         string `json:"goVersion"`
	Platform          string `json:"platform"`
	KubernetesLibrary string `json:"kubernetesLibraries"`
}

func buildInfo() BuildInfo {
	bi := BuildInfo{Version: Version, Commit: Commit, GoVersion: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH}
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, d := range info.Deps {
			if d.Path == "k8s.io/client-go" {
				bi.KubernetesLibrary = d.Version
			}
		}
	}
	return bi
}

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
	return o.printer.PrintReport(o.g.Out, buildInfo())
}
