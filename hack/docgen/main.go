// Command docgen writes kubectl-crdver's CLI reference from the commands themselves, with
// cobra's own generator (github.com/spf13/cobra/doc):
//
//	go run ./hack/docgen                          # docs/reference/*.md (make docs)
//	go run ./hack/docgen -front-help FILE         # the --help texts kubectl-crdver answers by itself (make docs)
//	go run ./hack/docgen -release-files DIR -date UNIX  # DIR/man/*.1, DIR/completions/* (goreleaser)
//
// The output is deterministic: no "Auto generated" dates in the Markdown, and the man pages'
// date is -date (goreleaser passes the commit's time), so a test
// (TestReferenceIsCurrent) can compare the checked-in reference with what the commands give.
package main

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/cobra/doc"
	"github.com/spf13/pflag"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/crdver/kubectl-crdver/plugin"
)

func main() {
	out := flag.String("out", "docs/reference", "directory for the Markdown reference")
	release := flag.String("release-files", "", "instead, write man pages (man/) and completion scripts (completions/) into this directory")
	date := flag.Int64("date", 0, "with -release-files: the man pages' date, in seconds since 1970 (default: now)")
	frontHelp := flag.String("front-help", "", "instead, write the Go file of the --help texts that cmd/kubectl-crdver answers by itself")
	flag.Parse()
	var err error
	if *frontHelp != "" {
		err = writeFrontHelp(*frontHelp)
	} else if *release != "" {
		when := time.Now()
		if *date != 0 {
			when = time.Unix(*date, 0).UTC()
		}
		err = writeReleaseFiles(*release, when)
	} else {
		err = writeMarkdown(*out)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}

// root is the real root command, with cobra's completion command, and nothing that depends on
// where or when it is generated.
func root() *cobra.Command {
	cmd := plugin.NewRootCmd(genericiooptions.NewTestIOStreamsDiscard())
	cmd.InitDefaultCompletionCmd()
	machineFree(cmd)
	return cmd
}

// machineFree drops what depends on the machine that generates the pages: cobra's
// "Auto generated ... on <date>" line, the home directory in defaults (--cache-dir) and the
// number of CPUs (preview --workers).
func machineFree(c *cobra.Command) {
	c.DisableAutoGenTag = true
	home, _ := os.UserHomeDir()
	cpus := strconv.Itoa(runtime.GOMAXPROCS(0))
	fix := func(f *pflag.Flag) {
		if home != "" && strings.HasPrefix(f.DefValue, home+string(filepath.Separator)) {
			f.DefValue = "$HOME" + strings.TrimPrefix(f.DefValue, home)
		}
		if f.Name == "workers" && f.DefValue == cpus {
			f.DefValue = "the number of CPUs"
		}
	}
	c.PersistentFlags().VisitAll(fix)
	c.Flags().VisitAll(fix)
	for _, s := range c.Commands() {
		machineFree(s)
	}
}

// writeMarkdown writes one page per command into dir, after removing the pages a command no
// longer has.
func writeMarkdown(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	old, _ := filepath.Glob(filepath.Join(dir, "*.md"))
	for _, f := range old {
		if err := os.Remove(f); err != nil {
			return err
		}
	}
	return doc.GenMarkdownTree(root(), dir)
}

// writeReleaseFiles writes the man pages (section 1) and the bash, zsh and fish completion
// scripts that the release archives ship.
func writeReleaseFiles(dir string, date time.Time) error {
	man := filepath.Join(dir, "man")
	comp := filepath.Join(dir, "completions")
	for _, d := range []string{man, comp} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	header := &doc.GenManHeader{Title: "KUBECTL-CRDVER", Section: "1", Source: "kubectl-crdver", Manual: "kubectl crdver", Date: &date}
	if err := doc.GenManTree(root(), header, man); err != nil {
		return err
	}
	for shell, file := range map[string]string{"bash": "kubectl-crdver.bash", "zsh": "_kubectl-crdver", "fish": "kubectl-crdver.fish"} {
		var out bytes.Buffer
		cmd := plugin.NewRootCmd(genericiooptions.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: os.Stderr})
		cmd.SetOut(&out)
		cmd.SetArgs([]string{"completion", shell})
		if err := cmd.Execute(); err != nil {
			return fmt.Errorf("completion %s: %w", shell, err)
		}
		if err := os.WriteFile(filepath.Join(comp, file), out.Bytes(), 0o644); err != nil {
			return err
		}
	}
	return nil
}
