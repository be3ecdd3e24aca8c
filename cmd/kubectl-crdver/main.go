// Command kubectl-crdver is the kubectl plugin `kubectl crdver`. Installed on PATH as
// kubectl-crdver it is found by kubectl; installed (or linked) as kubectl_complete-crdver it
// answers kubectl's plugin shell completion.
package main

import (
	// Initialised before the API server's packages (see its doc): the garbage collector is
	// off while they initialise.
	"github.com/crdver/kubectl-crdver/internal/initgc"

	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/klog/v2"

	"github.com/crdver/kubectl-crdver/plugin"
)

// gcHeadroom is how much more memory a command may use, beyond what the packages'
// initialisation left, before the garbage collector's first cycle (internal/initgc): enough
// for `versions --sort`, a CRD file or one CRD read from the cluster, so that the commands
// scripts run in loops finish without one. From that cycle on the collector runs as GOGC asks.
const gcHeadroom = 16 << 20

func main() {
	initgc.Resume(gcHeadroom)
	os.Exit(run(os.Args))
}

func run(argv []string) int {
	streams := genericiooptions.IOStreams{In: os.Stdin, Out: os.Stdout, ErrOut: os.Stderr}
	args := argv[1:]
	if name := strings.TrimSuffix(filepath.Base(argv[0]), ".exe"); name == "kubectl_complete-crdver" {
		args = append([]string{"__complete"}, args...)
	}
	// The API server's libraries log through klog (e.g. "Found duplicate validation error"
	// while previewing); what the user needs is in the command's own output, so klog is quiet.
	klog.LogToStderr(false)
	klog.SetOutput(io.Discard)

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	root := plugin.NewRootCmd(streams)
	root.SetArgs(args)
	err := root.ExecuteContext(ctx)
	if err != nil {
		fmt.Fprintln(streams.ErrOut, plugin.ErrorLine(err))
	}
	return plugin.ExitCode(err)
}
