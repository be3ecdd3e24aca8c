package plugin

import (
	"io"
	"os"

	"github.com/spf13/cobra"

	"github.com/crdver/kubectl-crdver/progress"
)

// colorFlag is --color=auto|always|never. auto colours only when stdout is a terminal and
// NO_COLOR (https://no-color.org) is unset or empty; always and never override NO_COLOR.
type colorFlag struct {
	cmd  *cobra.Command
	mode string
}

func addColorFlag(cmd *cobra.Command) *colorFlag {
	c := &colorFlag{cmd: cmd}
	cmd.Flags().StringVar(&c.mode, "color", "auto", "Colour the diff: auto (when stdout is a terminal and NO_COLOR is not set), always or never")
	_ = cmd.RegisterFlagCompletionFunc("color", func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
		return []string{"auto", "always", "never"}, cobra.ShellCompDirectiveNoFileComp
	})
	return c
}

// enabled resolves --color for output going to out; applies says whether colour has a use
// (given explicitly where it does not is a usage error).
func (c *colorFlag) enabled(out io.Writer, applies bool) (bool, error) {
	switch c.mode {
	case "auto", "always", "never":
	default:
		return false, UsageErrorf("--color %q is not supported: use auto, always or never", c.mode)
	}
	if !applies {
		if c.cmd.Flags().Changed("color") {
			return false, UsageErrorf("--color colours the --diff output: give it with --diff")
		}
		return false, nil
	}
	switch c.mode {
	case "always":
		return true, nil
	case "never":
		return false, nil
	}
	return os.Getenv("NO_COLOR") == "" && progress.IsTerminal(out), nil
}
