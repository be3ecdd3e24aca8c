// Command kubectl-crdver is the kubectl plugin `kubectl crdver`. Installed on PATH as
// kubectl-crdver it is found by kubectl; installed (or linked) as kubectl_complete-crdver it
// answers kubectl's plugin shell completion.
//
// It is the small half of two executables. Every command of the full tree links the API
// server's packages (validation, CEL, registry), client-go and cli-runtime, whose ~480 package
// initialisers run before main and cost more than the commands scripts run in loops. This
// binary links none of them: it answers by itself `versions --sort VERSION... [-o json|yaml]`,
// `version [-o json|yaml]` and `--help` (texts generated from the engine's command tree, in
// help_texts.go), byte for byte as the full command does (the same sort, crd/priority, and the
// same printers, internal/textout and internal/buildinfo; a differential test runs both), and
// executes crdver-engine (cmd/crdver-engine), shipped beside it, with
// the same arguments for everything else — including any form of those commands it does not
// recognise with certainty. See engine.go for how the engine is found and run.
package main

import (
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/crdver/kubectl-crdver/crd/priority"
	"github.com/crdver/kubectl-crdver/internal/buildinfo"
	"github.com/crdver/kubectl-crdver/internal/textout"
)

func main() {
	if answer := light(os.Args); answer != nil {
		os.Exit(report(os.Stderr, answer(os.Stdout)))
	}
	os.Exit(runEngine(os.Args))
}

// light returns how this binary answers argv by itself, or nil when the engine must: only for
// argument vectors whose every element it recognises, with the meaning the full command gives
// it — `versions --sort`, `version` and help (help.go). Anything else (another command, a flag
// it does not know, `--`, a wrong -o, a missing argument, completion) goes to the engine
// unchanged, which also prints its errors.
func light(argv []string) func(stdout io.Writer) error {
	if len(argv) == 0 || isCompletion(argv[0]) {
		return nil
	}
	if help := helpAnswer(argv); help != nil {
		return help
	}
	if len(argv) < 2 {
		return nil
	}
	var (
		sort       bool
		format     *string // nil: no -o
		positional []string
	)
	for i := 2; i < len(argv); i++ {
		a := argv[i]
		switch {
		case a == "--sort":
			sort = true
		case a == "-o" || a == "--output":
			if i+1 == len(argv) {
				return nil
			}
			i++
			format = &argv[i]
		case strings.HasPrefix(a, "--output="):
			f := strings.TrimPrefix(a, "--output=")
			format = &f
		case strings.HasPrefix(a, "-o"): // -ojson, -o=json (pflag's shorthand forms)
			f := strings.TrimPrefix(strings.TrimPrefix(a, "-o"), "=")
			format = &f
		case strings.HasPrefix(a, "-"): // any other flag, "-" and "--"
			return nil
		default:
			positional = append(positional, a)
		}
	}
	data, asYAML := format != nil, false
	if data {
		switch *format {
		case "json":
		case "yaml":
			asYAML = true
		default:
			return nil // -o "", -o wide, …: the engine says what it makes of them
		}
	}
	switch argv[1] {
	case "versions":
		if !sort || len(positional) == 0 {
			return nil
		}
		return func(w io.Writer) error {
			sorted := append([]string{}, positional...)
			priority.Sort(sorted)
			if data {
				return textout.Data(w, sorted, asYAML)
			}
			return textout.Lines(w, sorted)
		}
	case "version":
		if sort || len(positional) > 0 {
			return nil
		}
		return func(w io.Writer) error {
			if data {
				return textout.Data(w, buildinfo.Get(), asYAML)
			}
			return buildinfo.PrintHuman(w, buildinfo.Get())
		}
	}
	return nil
}

// report prints err as the full command prints a run-time error (one "error:" line, the
// message's lines joined by "; ") and returns the exit code: 0, or 3 (could not complete).
func report(stderr io.Writer, err error) int {
	if err == nil {
		return 0
	}
	var parts []string
	for _, line := range strings.Split(strings.TrimSpace(err.Error()), "\n") {
		if line = strings.TrimSpace(line); line != "" {
			parts = append(parts, line)
		}
	}
	fmt.Fprintln(stderr, "error: "+strings.Join(parts, "; "))
	return exitUnavailable
}

// exitUnavailable is DESIGN.md's "could not complete" (plugin.ExitUnavailable).
const exitUnavailable = 3
