package plugin

import (
	"io"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// Rules about flags that several commands share (DESIGN.md "Flags — one meaning per flag
// across commands").

// stdinOnce refuses "-" in both -f and the CRD file flag: standard input can be read once.
func stdinOnce(objects []string, crds *crdSource) error {
	if hasStdin(objects) && hasStdin(crds.files) {
		return UsageErrorf("-f - and --%s - both read standard input, which can be read only once: give one of them as a file", crds.flag)
	}
	return nil
}

func hasStdin(paths []string) bool {
	for _, p := range paths {
		if p == "-" {
			return true
		}
	}
	return false
}

// aliasFlag makes --alias another spelling of --name on cmd (an older name kept working). The
// alias is not listed in --help.
func aliasFlag(cmd *cobra.Command, alias, name string) {
	next := cmd.Flags().GetNormalizeFunc()
	cmd.Flags().SetNormalizeFunc(func(f *pflag.FlagSet, n string) pflag.NormalizedName {
		if n == alias {
			n = name
		}
		return next(f, n)
	})
}

// flagNotesToStderr sends pflag's notes (a deprecated flag or shorthand was used) to stderr:
// cobra would print them on the command's output, mixed with the report.
func flagNotesToStderr(cmd *cobra.Command, w io.Writer) {
	cmd.Flags().SetOutput(w)
	for _, c := range cmd.Commands() {
		flagNotesToStderr(c, w)
	}
}
