// Package plugin turns the explain, convert and migrate libraries into the `kubectl crdver`
// commands. It is the only package that knows about cobra: shared flags (cli-runtime's
// ConfigFlags), loading CRDs from the cluster or from files, printers and exit codes.
package plugin

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/crdver/kubectl-crdver/kubeversion"

	// Auth plugins (exec, OIDC) so that every kubeconfig kubectl accepts works here too.
	_ "k8s.io/client-go/plugin/pkg/client/auth"
)

// Globals are what every subcommand shares: the streams and cli-runtime's connection flags.
type Globals struct {
	genericiooptions.IOStreams
	ConfigFlags *genericclioptions.ConfigFlags

	clientsMu sync.Mutex
	clientSet *clientSet // built once per run (clients.go)
	warnings  warningCounter
	answers   *bufio.Reader // g.In, buffered once: a run may ask twice (upgrade)
}

// Namespace returns -n or the context's namespace.
func (g *Globals) Namespace() (string, error) {
	ns, _, err := g.ConfigFlags.ToRawKubeConfigLoader().Namespace()
	if err != nil {
		return "", Usage(fmt.Errorf("cannot work out the namespace: %w", err))
	}
	return ns, nil
}

// NewRootCmd builds the `kubectl crdver` command tree. Every call returns a fresh tree with
// its own flags, so tests can build as many as they like.
func NewRootCmd(streams genericiooptions.IOStreams) *cobra.Command {
	streams = onScreen(streams) // the progress bar is cleared before anything is printed to its terminal
	g := &Globals{IOStreams: streams, ConfigFlags: genericclioptions.NewConfigFlags(true)}
	cmd := &cobra.Command{
		Use:   "kubectl-crdver",
		Short: "Work with the versions of CustomResourceDefinitions",
		Long: `kubectl crdver helps the owners of CustomResourceDefinitions with more than one version:
which version wins, whether the conversion webhook really works, what the API server will do
to an object, and how to get rid of an old version safely.`,
		Annotations: map[string]string{
			cobra.CommandDisplayNameAnnotation: "kubectl crdver",
		},
		SilenceErrors: true,
		SilenceUsage:  true,
		// `completion bash|zsh|fish|powershell` (cobra's generator) serves the binary run
		// directly; kubectl's plugin completion (kubectl_complete-crdver) calls __complete.
	}
	cmd.SetIn(streams.In)
	cmd.SetOut(streams.Out)
	cmd.SetErr(streams.ErrOut)
	g.ConfigFlags.AddFlags(cmd.PersistentFlags())
	cmd.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return UsageErrorf("%v (see %s --help)", err, c.CommandPath())
	})

	cmd.AddCommand(
		NewCmdVersions(g),
		NewCmdVersion(g),
		NewCmdConvert(g),
		NewCmdMigrate(g),
		NewCmdPreview(g),
		NewCmdExplain(g),
		NewCmdPlan(g),
		NewCmdRetire(g),
		NewCmdUpgrade(g),
		NewCmdRestore(g),
		NewCmdDoctor(g),
	)
	flagNotesToStderr(cmd, streams.ErrOut)
	summariseWarnings(cmd, g)
	return cmd
}

// runE adapts an Options value with Complete, Validate and Run to cobra, marking whatever Run
// returns as a run-time error (exit 3 unless it carries its own code).
func runE(o interface {
	Complete(cmd *cobra.Command, args []string) error
	Validate() error
	Run(ctx context.Context) error
}) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		// Every run starts as the newest Kubernetes known; commands that judge choose theirs
		// (--kube-version or the cluster's). In-process runs (tests) inherit nothing.
		if err := kubeversion.Emulate(kubeversion.Newest); err != nil {
			return markRun(err, ExitUnavailable)
		}
		if err := o.Complete(cmd, args); err != nil {
			return markRun(err, ExitUsage)
		}
		if err := o.Validate(); err != nil {
			return markRun(err, ExitUsage)
		}
		return markRun(o.Run(cmd.Context()), ExitUnavailable)
	}
}

func markRun(err error, code int) error {
	var ee *ExitError
	if err == nil || errors.As(err, &ee) {
		return err
	}
	return &ExitError{Code: code, Err: err}
}
