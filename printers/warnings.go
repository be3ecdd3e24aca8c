package printers

import (
	"fmt"
	"io"
	"sync"
)

// maxWarningLines is how many distinct API server warnings the summary shows.
const maxWarningLines = 5

// WarningCounter is a run's handler of API server warnings (rest.WarningHandler): it counts
// them instead of printing each, so that a warning sent on every request of a bulk run (a
// deprecated version read a page at a time) neither floods stderr nor breaks a progress bar.
type WarningCounter struct {
	mu     sync.Mutex
	order  []string
	counts map[string]int
}

// HandleWarningHeader counts one warning (code 299, the only one the API server sends).
func (w *WarningCounter) HandleWarningHeader(code int, _ string, text string) {
	if code != 299 || text == "" {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.counts == nil {
		w.counts = map[string]int{}
	}
	if w.counts[text] == 0 {
		w.order = append(w.order, text)
	}
	w.counts[text]++
}

// Summary prints each distinct warning once, in the order first seen, with how many responses
// carried it ("Warning: … (in 40 responses)"), at most maxWarningLines of them; then forgets them.
func (w *WarningCounter) Summary(out io.Writer) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for i, text := range w.order {
		if i == maxWarningLines {
			fmt.Fprintf(out, "Warning: and %d more distinct warnings from the API server\n", len(w.order)-maxWarningLines)
			break
		}
		if n := w.counts[text]; n > 1 {
			fmt.Fprintf(out, "Warning: %s (in %d responses)\n", text, n)
		} else {
			fmt.Fprintf(out, "Warning: %s\n", text)
		}
	}
	w.order, w.counts = nil, nil
}
