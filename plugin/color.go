package plugin

import (
	"io"
	"os"
	"strings"

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

const (
	ansiRed   = "\x1b[31m"
	ansiGreen = "\x1b[32m"
	ansiCyan  = "\x1b[36m"
	ansiReset = "\x1b[0m"
)

// colorDiff colours a unified diff: removed lines red, added lines green, hunk headers cyan.
func colorDiff(diff string, color bool) string {
	if !color {
		return diff
	}
	var b strings.Builder
	for _, line := range strings.SplitAfter(diff, "\n") {
		body := strings.TrimSuffix(line, "\n")
		nl := line[len(body):]
		switch {
		case body == "":
			b.WriteString(line)
			continue
		case strings.HasPrefix(body, "---") || strings.HasPrefix(body, "+++"):
			b.WriteString(line)
			continue
		case strings.HasPrefix(body, "-"):
			b.WriteString(ansiRed)
		case strings.HasPrefix(body, "+"):
			b.WriteString(ansiGreen)
		case strings.HasPrefix(body, "@@"):
			b.WriteString(ansiCyan)
		default:
			b.WriteString(line)
			continue
		}
		b.WriteString(body + ansiReset + nl)
	}
	return b.String()
}
