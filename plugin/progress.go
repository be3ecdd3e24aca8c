package plugin

import (
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"
	"golang.org/x/term"
)

// Progress is the one progress display of every long command (migrate, convert, plan,
// retire): on a terminal a bar with count, rate and ETA; otherwise a plain line every
// interval; nothing with --quiet. It writes to stderr only.
type Progress interface {
	// Start shows the progress of task until the returned function is called (which prints
	// the final state and returns once the display has stopped).
	Start(task Task) (stop func())
	// Notef prints a one-line note about the work (e.g. "storage version of x is now v1").
	Notef(format string, args ...any)
}

// Task is a long piece of work to show.
type Task struct {
	// Name is the bar's description ("rewriting").
	Name string
	// Prefix starts each plain line (default Name), e.g. the command's name ("migrate").
	Prefix string
	// Unit is what is counted, plural ("objects").
	Unit string
	// Total is the number of units expected (the bar grows when Done passes it).
	Total int64
	// TotalFunc, when set, is asked for the total at each update instead (for work whose size
	// becomes known on the way); a negative answer means unknown.
	TotalFunc func() int64
	// Verb follows the unit in plain lines ("objects evaluated").
	Verb string
	// Done returns the units done so far; it is called from another goroutine.
	Done func() int64
	// Detail, when set, adds a breakdown to plain lines ("rewritten 3, failed 0").
	Detail func() string
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

// toProgress is the display for stderr w.
func (f *progressFlags) toProgress(w io.Writer) Progress {
	return NewProgress(w, f.quiet, f.interval)
}

// NewProgress returns the display for w: a bar when w is a terminal, plain lines every
// interval otherwise, nothing when quiet.
func NewProgress(w io.Writer, quiet bool, interval time.Duration) Progress {
	if quiet {
		return quietProgress{}
	}
	if interval <= 0 {
		interval = 5 * time.Second
	}
	return &streamProgress{w: w, tty: isTerminal(w), interval: interval}
}

type quietProgress struct{}

func (quietProgress) Start(Task) func()    { return func() {} }
func (quietProgress) Notef(string, ...any) {}

type streamProgress struct {
	w        io.Writer
	tty      bool
	interval time.Duration
}

func (p *streamProgress) Notef(format string, args ...any) {
	fmt.Fprintf(p.w, format+"\n", args...)
}

func (p *streamProgress) Start(t Task) func() {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	if p.tty {
		go func() { defer wg.Done(); p.bar(t, done) }()
	} else {
		start, first := time.Now(), t.Done() // before Start returns: the work starts after it
		go func() { defer wg.Done(); p.lines(t, done, start, first) }()
	}
	return func() { close(done); wg.Wait() }
}

// total is the task's total now (negative: unknown).
func (t Task) total() int64 {
	if t.TotalFunc != nil {
		return t.TotalFunc()
	}
	return t.Total
}

// bar draws a progress bar with count, rate and ETA until done is closed.
func (p *streamProgress) bar(t Task, done <-chan struct{}) {
	bar := progressbar.NewOptions64(t.total(),
		progressbar.OptionSetWriter(p.w),
		progressbar.OptionSetDescription(t.Name),
		progressbar.OptionShowCount(),
		progressbar.OptionShowIts(),
		progressbar.OptionSetItsString(t.Unit),
		progressbar.OptionSetPredictTime(true),
		progressbar.OptionThrottle(100*time.Millisecond),
		progressbar.OptionSetWidth(30),
	)
	_ = bar.RenderBlank() // starts the bar's clock now, so the first rate is right
	update := func() {
		n := t.Done()
		if tot := t.total(); tot > bar.GetMax64() {
			bar.ChangeMax64(tot)
		}
		if n > bar.GetMax64() {
			bar.ChangeMax64(n)
		}
		_ = bar.Set64(n)
	}
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-done:
			update()
			_ = bar.Exit()
			fmt.Fprintln(p.w)
			return
		case <-tick.C:
			update()
		}
	}
}

// lines prints "<prefix>: 300/1000 objects (detail), 120 objects/s, ETA 6s" every interval
// until done is closed, and a last line then when anything was done since the previous one.
func (p *streamProgress) lines(t Task, done <-chan struct{}, start time.Time, first int64) {
	last := first
	tick := time.NewTicker(p.interval)
	defer tick.Stop()
	for {
		select {
		case <-done:
			if t.Done() != last {
				p.line(t, start, first)
			}
			return
		case <-tick.C:
			last = p.line(t, start, first)
		}
	}
}

// line prints one plain progress line and returns the count it shows.
func (p *streamProgress) line(t Task, start time.Time, first int64) int64 {
	n, total := t.Done(), t.total()
	rate := float64(n-first) / time.Since(start).Seconds()
	eta, totalText := "?", "?"
	if total >= 0 {
		totalText = fmt.Sprint(total)
	}
	if rate > 0 && total > n {
		eta = (time.Duration(float64(total-n)/rate) * time.Second).Round(time.Second).String()
	} else if total >= 0 && total <= n {
		eta = "0s"
	}
	detail := ""
	if t.Detail != nil {
		detail = " (" + t.Detail() + ")"
	}
	prefix := t.Prefix
	if prefix == "" {
		prefix = t.Name
	}
	unit := t.Unit
	if t.Verb != "" {
		unit += " " + t.Verb
	}
	fmt.Fprintf(p.w, "%s: %d/%s %s%s, %.0f %s/s, ETA %s\n", prefix, n, totalText, unit, detail, rate, t.Unit, eta)
	return n
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}
