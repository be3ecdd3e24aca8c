// Package plugin turns the explain, convert and migrate libraries into the `kubectl crdver`
// commands. It is the only package that knows about cobra: shared flags (cli-runtime's
// ConfigFlags), loading CRDs from the cluster or from files, printers and exit codes.
package plugin

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"

	"github.com/spf13/cobra"
	"golang.org/x/term"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/crdver/kubectl-crdver/kubeversion"
	"github.com/crdver/kubectl-crdver/progress"

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

	// kubeReleases give back the Kubernetes version the run judges as (useKubeVersion) when
	// the command returns.
	kubeMu       sync.Mutex
	kubeReleases []func()
}

// useKubeVersion makes the run judge as Kubernetes v: the one place a run sets the version the
// API server's code runs as (kubeversion.Use), once it is resolved (kubeversion.go's resolve
// and --kube-version's use). The libraries take the version as a value and only check it. A
// second use of the same version is accepted; of another version, an error. The version is
// held until the command returns (releaseKubeVersion).
func (g *Globals) useKubeVersion(v kubeversion.Version) error {
	release, err := kubeversion.Use(v)
	if err != nil {
		return err
	}
	g.kubeMu.Lock()
	g.kubeReleases = append(g.kubeReleases, release)
	g.kubeMu.Unlock()
	return nil
}

// releaseKubeVersion gives back the run's Kubernetes version: the process judges as the
// newest known again, so that the next run in the same process (tests) inherits nothing.
func (g *Globals) releaseKubeVersion() {
	g.kubeMu.Lock()
	releases := g.kubeReleases
	g.kubeReleases = nil
	g.kubeMu.Unlock()
	for _, release := range releases {
		release()
	}
}

// releaseKubeVersionAfterRun makes every command give back the run's Kubernetes version when
// it returns.
func releaseKubeVersionAfterRun(c *cobra.Command, g *Globals) {
	if run := c.RunE; run != nil {
		c.RunE = func(cmd *cobra.Command, args []string) error {
			defer g.releaseKubeVersion()
			return run(cmd, args)
		}
	}
	for _, sub := range c.Commands() {
		releaseKubeVersionAfterRun(sub, g)
	}
}

// Namespace returns -n or the context's namespace.
func (g *Globals) Namespace() (string, error) {
	ns, _, err := g.ConfigFlags.ToRawKubeConfigLoader().Namespace()
	if err != nil {
		return "", Usage(fmt.Errorf("cannot work out the namespace: %w", err))
	}
	return ns, nil
}

// confirm asks question on stderr and reads y/yes from stdin; anything else is no.
func (g *Globals) confirm(question string) (bool, error) {
	fmt.Fprint(g.ErrOut, "\n"+question)
	if g.answers == nil {
		g.answers = bufio.NewReader(g.In)
	}
	line, err := g.answers.ReadString('\n')
	if err != nil && err != io.EOF {
		return false, Unavailable(fmt.Errorf("reading the answer: %w", err))
	}
	if f, ok := g.In.(*os.File); !ok || !term.IsTerminal(int(f.Fd())) {
		// The answer came from a pipe: show it, so the transcript reads right.
		fmt.Fprintln(g.ErrOut, strings.TrimSpace(line))
	}
	switch strings.ToLower(strings.TrimSpace(line)) {
	case "y", "yes":
		return true, nil
	}
	return false, nil
}

// NewRootCmd builds the `kubectl crdver` command tree. Every call returns a fresh tree with
// its own flags, so tests can build as many as they like.
func NewRootCmd(streams genericiooptions.IOStreams) *cobra.Command {
	streams = progress.OnScreen(streams) // the progress bar is cleared before anything is printed to its terminal
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
		// kubectl's plugin completion (kubectl_complete-crdver) calls __complete; `completion
		// bash|zsh|fish` prints cobra's script and loads kubectl's (addCompletionCmd).
	}
	cmd.SetIn(streams.In)
	cmd.SetOut(streams.Out)
	cmd.SetErr(streams.ErrOut)
	g.ConfigFlags.AddFlags(cmd.PersistentFlags())
	cmd.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return UsageErrorf("%v (see %s --help)", err, c.CommandPath())
	})

	// --help lists the commands by what they are for, as kubectl groups its own: first what a
	// release upgrade needs (start here), then what looks at one CRD, then the storage work.
	cmd.AddGroup(
		&cobra.Group{ID: groupRelease, Title: "Upgrade an operator's release (start here):"},
		&cobra.Group{ID: groupInspect, Title: "Look at a CRD, its objects and its webhook (offline or on a cluster):"},
		&cobra.Group{ID: groupStorage, Title: "Move stored objects between versions:"},
	)
	for group, cmds := range map[string][]*cobra.Command{
		groupRelease: {NewCmdDoctor(g), NewCmdPlan(g), NewCmdUpgrade(g), NewCmdRestore(g)},
		groupInspect: {NewCmdVersions(g), NewCmdExplain(g), NewCmdPreview(g), NewCmdConvert(g)},
		groupStorage: {NewCmdMigrate(g), NewCmdRetire(g)},
	} {
		for _, c := range cmds {
			c.GroupID = group
			cmd.AddCommand(c)
		}
	}
	cmd.AddCommand(NewCmdVersion(g)) // with help and completion, under "Additional Commands"
	addCompletionCmd(cmd, streams.Out)
	flagNotesToStderr(cmd, streams.ErrOut)
	summariseWarnings(cmd, g)
	releaseKubeVersionAfterRun(cmd, g)
	return cmd
}

// The groups of commands in --help.
const (
	groupRelease = "release"
	groupInspect = "inspect"
	groupStorage = "storage"
)

// runE adapts an Options value with Complete, Validate and Run to cobra, marking whatever Run
// returns as a run-time error (exit 3 unless it carries its own code).
func runE(o interface {
	Complete(cmd *cobra.Command, args []string) error
	Validate() error
	Run(ctx context.Context) error
}) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		// Every run judges as the newest Kubernetes known until its command chooses the
		// version once it is resolved (--kube-version or the cluster's: Globals.useKubeVersion),
		// held until the command returns (releaseKubeVersionAfterRun).
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
