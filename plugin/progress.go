package plugin

import (
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/crdver/kubectl-crdver/progress"
)

type (
	// Progress is the progress display (package progress).
	Progress = progress.Progress
	// Task is a long piece of work to show (progress.Task).
	Task = progress.Task
)

// NewProgress is progress.New.
func NewProgress(w io.Writer, quiet bool, interval time.Duration) Progress {
	return progress.New(w, quiet, interval)
}

// progressFlags are --quiet and the hidden --progress-interval.
type progressFlags struct {
	quiet    bool
	interval time.Duration
}

func addProgressFlags(cmd *cobra.Command) *progressFlags {
	return addProgressFlagsEvery(cmd, 5*time.Second)
}

// addProgressFlagsEvery is addProgressFlags with another default interval.
func addProgressFlagsEvery(cmd *cobra.Command, interval time.Duration) *progressFlags {
	p := &progressFlags{interval: interval}
	cmd.Flags().BoolVarP(&p.quiet, "quiet", "q", false, "No progress on stderr")
	cmd.Flags().DurationVar(&p.interval, "progress-interval", p.interval, "How often to print a progress line when stderr is not a terminal")
	_ = cmd.Flags().MarkHidden("progress-interval")
	return p
}

func (f *progressFlags) validate() error {
	if f.interval <= 0 {
		return UsageErrorf("--progress-interval must be positive, got %v", f.interval)
	}
	return nil
}

// toProgress is the display for stderr w (Globals.ErrOut: when it is a terminal, the screen
// that NewRootCmd set up, shared with stdout).
func (f *progressFlags) toProgress(w io.Writer) Progress {
	return NewProgress(w, f.quiet, f.interval)
}
