// Package progress is the one progress display of the long commands: on a terminal a bar with
// count, rate and ETA, drawn after a second of work on a screen that stdout and stderr share
// (OnScreen) and cleared before anything else is printed there; plain lines every interval
// otherwise; nothing when quiet. The clock is injected for tests.
package progress

import (
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"golang.org/x/term"
	"k8s.io/cli-runtime/pkg/genericiooptions"
)

// Progress is the display of every long command (preview, plan, doctor, migrate, convert,
// retire): on a terminal a bar with count, rate and ETA, drawn only once the work has
// run for about a second (progressDelay) and cleared before anything else is printed to the
// terminal and when the work ends; otherwise a plain line every interval, so only runs longer
// than the interval print any; nothing with --quiet. It writes to stderr only.
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
	// Total is the number of units expected (the bar grows when Done passes it); negative:
	// unknown.
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

// progressDelay is how long work runs before a bar is drawn on a terminal: shorter runs show
// none, so their output is never preceded by a flash of progress.
const progressDelay = time.Second

// barRefresh is how often a bar is redrawn.
const barRefresh = 200 * time.Millisecond

// New returns the display for w: a bar when w is a terminal, plain lines every
// interval otherwise, nothing when quiet.
func New(w io.Writer, quiet bool, interval time.Duration) Progress {
	if quiet {
		return quietProgress{}
	}
	if interval <= 0 {
		interval = 5 * time.Second
	}
	p := &streamProgress{w: w, interval: interval, clock: realClock}
	if sw, ok := w.(*screenWriter); ok {
		p.w, p.screen = sw.s.w, sw.s
	} else if IsTerminal(w) {
		p.screen = &screen{w: w}
	}
	return p
}

type quietProgress struct{}

func (quietProgress) Start(Task) func()    { return func() {} }
func (quietProgress) Notef(string, ...any) {}

// clock is the time source of the display (tests drive it by hand).
type clock struct {
	now func() time.Time
	// ticker returns a channel ticking every d and the function that stops it.
	ticker func(d time.Duration) (<-chan time.Time, func())
}

var realClock = clock{
	now: time.Now,
	ticker: func(d time.Duration) (<-chan time.Time, func()) {
		t := time.NewTicker(d)
		return t.C, t.Stop
	},
}

type streamProgress struct {
	w        io.Writer
	screen   *screen // nil when w is not a terminal
	interval time.Duration
	clock    clock
}

func (p *streamProgress) Notef(format string, args ...any) {
	line := fmt.Sprintf(format+"\n", args...)
	if p.screen != nil {
		_, _ = p.screen.write(p.w, []byte(line))
		return
	}
	_, _ = io.WriteString(p.w, line)
}

func (p *streamProgress) Start(t Task) func() {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	start, first := p.clock.now(), t.Done() // before Start returns: the work starts after it
	if p.screen != nil {
		go func() { defer wg.Done(); p.bar(t, done, start, first) }()
	} else {
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

// bar draws the task's bar on the terminal every barRefresh once progressDelay has passed, and
// clears it when done is closed: what the command prints next starts on a clean line.
func (p *streamProgress) bar(t Task, done <-chan struct{}, start time.Time, first int64) {
	tick, stop := p.clock.ticker(barRefresh)
	defer stop()
	for {
		select {
		case <-done:
			p.screen.clear()
			return
		case now := <-tick:
			if now.Sub(start) < progressDelay {
				continue
			}
			p.screen.draw(barLine(t, t.Done(), t.total(), first, now.Sub(start), p.screen.width()))
		}
	}
}

// barLine is the bar of t at n of total units after elapsed, fitted into width columns:
// "rewriting  40% |██████████               | (120/300, 148 objects/s) [1s:1s]" (elapsed
// and ETA in brackets); with an unknown total "previewing (120, 148 objects/s) [1s]".
func barLine(t Task, n, total, first int64, elapsed time.Duration, width int) string {
	if n > total && total >= 0 {
		total = n
	}
	rate := 0.0
	if elapsed > 0 {
		rate = float64(n-first) / elapsed.Seconds()
	}
	var line string
	if total < 0 {
		line = fmt.Sprintf("%s (%d, %s) [%s]", t.Name, n, rateText(rate, t.Unit), roundSeconds(elapsed))
	} else {
		const cells = 25
		pct, filled := 100, cells
		if total > 0 {
			pct, filled = int(n*100/total), int(n*cells/total)
		}
		eta := "?"
		if rate > 0 {
			eta = roundSeconds(time.Duration(float64(total-n) / rate * float64(time.Second)))
		}
		line = fmt.Sprintf("%s %3d%% |%s%s| (%d/%d, %s) [%s:%s]", t.Name, pct, strings.Repeat("█", filled), strings.Repeat(" ", cells-filled),
			n, total, rateText(rate, t.Unit), roundSeconds(elapsed), eta)
	}
	if width > 1 && utf8.RuneCountInString(line) > width-1 {
		line = string([]rune(line)[:width-1]) // a wrapped line could not be cleared
	}
	return line
}

// rateText is "148 objects/s", or per minute or hour when slower than one a second.
func rateText(perSecond float64, unit string) string {
	switch {
	case perSecond >= 1 || perSecond == 0:
		return fmt.Sprintf("%.0f %s/s", perSecond, unit)
	case perSecond*60 >= 1:
		return fmt.Sprintf("%.0f %s/min", perSecond*60, unit)
	}
	return fmt.Sprintf("%.0f %s/hr", perSecond*3600, unit)
}

func roundSeconds(d time.Duration) string { return d.Round(time.Second).String() }

// lines prints "<prefix>: 300/1000 objects (detail), 120 objects/s, ETA 6s" every interval
// until done is closed, and then a last line when an earlier one was printed and anything was
// done since, or when none was but the run lasted the interval (its tick lost the race with
// done): a run shorter than the interval prints nothing.
func (p *streamProgress) lines(t Task, done <-chan struct{}, start time.Time, first int64) {
	last, printed := first, false
	tick, stop := p.clock.ticker(p.interval)
	defer stop()
	for {
		select {
		case <-done:
			now := p.clock.now()
			if printed && t.Done() != last || !printed && now.Sub(start) >= p.interval {
				p.line(t, start, first, now)
			}
			return
		case now := <-tick:
			last, printed = p.line(t, start, first, now), true
		}
	}
}

// line prints one plain progress line and returns the count it shows.
func (p *streamProgress) line(t Task, start time.Time, first int64, now time.Time) int64 {
	n, total := t.Done(), t.total()
	rate := 0.0
	if el := now.Sub(start).Seconds(); el > 0 {
		rate = float64(n-first) / el
	}
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

// screen is the terminal stderr prints to. The progress bar is drawn on it, and cleared before
// anything else is printed to it (through a screenWriter: stderr, and stdout when stdout is a
// terminal too), so no output ever starts after a half-drawn bar; the bar comes back at its
// next refresh.
type screen struct {
	mu    sync.Mutex
	w     io.Writer // the terminal
	drawn bool      // a bar is on the current line
}

// draw replaces the current line with line.
func (s *screen) draw(line string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, _ = io.WriteString(s.w, "\r"+line+"\x1b[K")
	s.drawn = true
}

// clear erases the bar, if drawn, leaving the cursor at the start of the empty line.
func (s *screen) clear() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.clearLocked()
}

func (s *screen) clearLocked() {
	if s.drawn {
		_, _ = io.WriteString(s.w, "\r\x1b[K")
		s.drawn = false
	}
}

// write writes p to w (the terminal or another stream on it) after clearing the bar.
func (s *screen) write(w io.Writer, p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.clearLocked()
	return w.Write(p)
}

// width is the terminal's width in columns (0 when unknown).
func (s *screen) width() int {
	if f, ok := s.w.(*os.File); ok {
		if w, _, err := term.GetSize(int(f.Fd())); err == nil && w > 0 {
			return w
		}
	}
	return 0
}

// screenWriter is a stream printing to the screen's terminal: each write clears the bar first.
type screenWriter struct {
	s *screen
	w io.Writer
}

func (sw *screenWriter) Write(p []byte) (int, error) { return sw.s.write(sw.w, p) }

// Unwrap returns the stream itself (isTerminal looks through).
func (sw *screenWriter) Unwrap() io.Writer { return sw.w }

// OnScreen returns streams whose stderr, when a terminal, shares one screen with the progress
// display, and whose stdout does too when it is a terminal (the same one, as a rule): output
// never lands after a half-drawn bar. Streams that are not terminals are left as they are.
func OnScreen(streams genericiooptions.IOStreams) genericiooptions.IOStreams {
	if !IsTerminal(streams.ErrOut) {
		return streams
	}
	s := &screen{w: streams.ErrOut}
	if IsTerminal(streams.Out) {
		streams.Out = &screenWriter{s: s, w: streams.Out}
	}
	streams.ErrOut = &screenWriter{s: s, w: streams.ErrOut}
	return streams
}

func IsTerminal(w io.Writer) bool {
	for {
		u, ok := w.(interface{ Unwrap() io.Writer })
		if !ok {
			break
		}
		w = u.Unwrap()
	}
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}
