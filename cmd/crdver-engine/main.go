// Command crdver-engine answers every command of the kubectl plugin `kubectl crdver`. It is
// installed beside kubectl-crdver (cmd/kubectl-crdver), the small executable that kubectl finds
// and runs: that one answers the commands scripts run in loops (`versions --sort`, `version`)
// without the API server's packages, whose initialisers cost more than those commands, and
// executes this one, with the same arguments, for everything else. Its name does not start
// with kubectl- so that kubectl does not take it for a plugin.
//
// When its argv[0] is kubectl_complete-crdver (kubectl-crdver keeps its own argv[0] when it
// executes the engine, and kubectl's plugin completion runs kubectl_complete-crdver, a link to
// kubectl-crdver), it answers shell completion (__complete).
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

// gcPercent and gcLimit are the collector's settings when the user sets neither GOGC nor
// GOMEMLIMIT (initgc.Default). A command that reads every object of a CRD spends a third of
// its CPU allocating and collecting: GOGC=200 cut plan's CPU per object by 26 % and upgrade
// --dry-run's by 29 % (10,000 objects; peak RSS 104 → 132–139 MiB), and the soft limit keeps
// the heap under 256 MiB whatever the cluster's size (docs/benchmarks.md, "Less CPU per object
// in plan's evaluation").
const (
	gcPercent = 200
	gcLimit   = 256 << 20
)

func main() {
	initgc.Default(gcPercent, gcLimit)
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

	// The first Ctrl-C (or SIGTERM) cancels the command's context: every command stops within
	// a second, says what was done and exits 3. A second one stops the process at once, as a
	// kill would (which every command survives: DESIGN.md, "State that resumes a run").
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	signals := make(chan os.Signal, 2)
	signal.Notify(signals, os.Interrupt, syscall.SIGTERM)
	go func() {
		<-signals // the one that cancelled ctx
		<-signals
		fmt.Fprintln(streams.ErrOut, "error: interrupted again: stopped at once")
		os.Exit(3)
	}()

	root := plugin.NewRootCmd(streams)
	root.SetArgs(args)
	err := root.ExecuteContext(ctx)
	if err != nil {
		fmt.Fprintln(streams.ErrOut, plugin.ErrorLine(err))
	}
	return plugin.ExitCode(err)
}
