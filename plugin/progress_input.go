package plugin

import (
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"
)

// inputProgress shows, on a terminal, how far a long read of documents has got: objects, rate,
// bytes read of the total and an ETA, redrawn in place. Off a terminal, or with --quiet, it
// shows nothing (the command's own summary says what was done).
type inputProgress struct {
	w       io.Writer
	what    string
	input   *InputProgress
	objects atomic.Int64
	start   time.Time
	stopped chan struct{}
	once    sync.Once
	wg      sync.WaitGroup
	drawn   bool
}

// progressDelay is how long a run must last before progress is drawn: short runs print none.
const progressDelay = 500 * time.Millisecond

func startInputProgress(w io.Writer, what string, input *InputProgress, quiet bool) *inputProgress {
	p := &inputProgress{w: w, what: what, input: input, start: time.Now(), stopped: make(chan struct{})}
	if quiet || !isTerminal(w) {
		close(p.stopped)
		p.once.Do(func() {})
		return p
	}
	p.wg.Add(1)
	go p.loop()
	return p
}

func (p *inputProgress) count() { p.objects.Add(1) }

func (p *inputProgress) loop() {
	defer p.wg.Done()
	t := time.NewTicker(200 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-p.stopped:
			if p.drawn {
				fmt.Fprint(p.w, "\r\033[K")
			}
			return
		case now := <-t.C:
			if now.Sub(p.start) < progressDelay {
				continue
			}
			p.drawn = true
			fmt.Fprintf(p.w, "\r\033[K%s", p.line(now))
		}
	}
}

func (p *inputProgress) line(now time.Time) string {
	n := p.objects.Load()
	elapsed := now.Sub(p.start).Seconds()
	s := fmt.Sprintf("%s: %d objects, %.0f objects/s", p.what, n, float64(n)/elapsed)
	read, total := p.input.Read.Load(), p.input.Total.Load()
	if total > 0 && read <= total {
		s += fmt.Sprintf(", %.1f of %.1f MB", float64(read)/1e6, float64(total)/1e6)
		if read > 0 {
			eta := time.Duration(elapsed*float64(total-read)/float64(read)) * time.Second
			s += fmt.Sprintf(", ETA %s", eta.Round(time.Second))
		}
	} else if read > 0 {
		s += fmt.Sprintf(", %.1f MB read", float64(read)/1e6)
	}
	return s
}

// stop clears the progress line; it may be called more than once.
func (p *inputProgress) stop() {
	p.once.Do(func() { close(p.stopped) })
	p.wg.Wait()
}
