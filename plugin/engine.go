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

// validateEngineFlags checks --engine, and --detach and --checkpoint against it (and
// --dry-run): the flags migrate and retire share. It does no I/O.
func validateEngineFlags(engine string, detach, dryRun bool, checkpoint string) error {
	if err := validateEngine(engine); err != nil {
		return err
	}
	if engine == engineCluster && checkpoint != "" {
		// The migration is recorded in migrate's own checkpoint, where every command looks.
		return UsageErrorf("--checkpoint is for --engine client: the cluster's StorageVersionMigration keeps its own progress")
	}
	return validateDetach(detach, engine, dryRun)
}

// addDetachFlag adds --detach (leave the StorageVersionMigration running in the cluster) to
// cmd, stored in detach.
func addDetachFlag(cmd *cobra.Command, detach *bool) {
	cmd.Flags().BoolVar(detach, "detach", false, "With --engine cluster: once the StorageVersionMigration is created (after the preflight and, in an upgrade, the backup) and recorded in the checkpoint, leave it rewriting the objects in the cluster and exit (code 3: not done); the same command run again re-attaches to it, checks every object and goes on (if it has not ended, --detach leaves it again)")
}

// validateDetach checks --detach against --engine and --dry-run.
func validateDetach(detach bool, engine string, dryRun bool) error {
	switch {
	case detach && engine != engineCluster:
		return UsageErrorf("--detach is for --engine cluster: the client engine rewrites the objects itself (Ctrl-C saves its progress; the same command resumes it)")
	case detach && dryRun:
		return UsageErrorf("--detach does not apply to --dry-run: nothing is created to leave running")
	}
	return nil
}
