package plugin

import (
	"github.com/spf13/cobra"
)

// inputFlags are the flags about reading inputs that several commands share: -R, -v and
// --strict-kinds.
type inputFlags struct {
	Recursive   bool
	Verbose     bool
	StrictKinds bool
}

func addInputFlags(cmd *cobra.Command, strictKindsHelp string) *inputFlags {
	f := &inputFlags{}
	cmd.Flags().BoolVarP(&f.Recursive, "recursive", "R", false, "Read the directories given with -f recursively, like kubectl -R")
	cmd.Flags().BoolVarP(&f.Verbose, "verbose", "v", false, "List the skipped documents on stderr")
	cmd.Flags().BoolVar(&f.StrictKinds, "strict-kinds", false, strictKindsHelp)
	return f
}
