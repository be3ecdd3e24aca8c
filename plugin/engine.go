package plugin

import (
	"github.com/spf13/cobra"
)

// addEngineFlag adds --engine (client or cluster: who rewrites the objects) to cmd, stored in
// engine, with its completion.
func addEngineFlag(cmd *cobra.Command, engine *string, usage string) {
	cmd.Flags().StringVar(engine, "engine", engineClient, usage)
	_ = cmd.RegisterFlagCompletionFunc("engine", func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
		return []string{engineClient, engineCluster}, cobra.ShellCompDirectiveNoFileComp
	})
}

// validateEngine checks --engine's value.
func validateEngine(engine string) error {
	if engine != engineClient && engine != engineCluster {
		return UsageErrorf("--engine %q is not supported: use client or cluster", engine)
	}
	return nil
}
