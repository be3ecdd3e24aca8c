package plugin

import (
	"bytes"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// Not a terminal: plain lines, and a last line when the work ends (here the interval is too
// long for any other), with count, total (or ? while unknown), rate and ETA; --quiet: nothing.
func TestProgressPlainLinesAndQuiet(t *testing.T) {
	for _, tc := range []struct {
		name  string
		total func() int64
		want  string
	}{
		{"known total", func() int64 { return 7 }, "convert: 7/7 objects converted (detail), "},
		{"unknown total", func() int64 { return -1 }, "convert: 7/? objects converted (detail), "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			var n atomic.Int64
			p := NewProgress(&out, false, time.Hour)
			stop := p.Start(Task{Name: "converting", Prefix: "convert", Unit: "objects", Verb: "converted", Done: n.Load, TotalFunc: tc.total,
				Detail: func() string { return "detail" }})
			n.Store(7)
			stop()
			p.Notef("a note about %s", "it")
			got := out.String()
			if !strings.HasPrefix(got, tc.want) || !strings.Contains(got, " objects/s, ETA ") || !strings.HasSuffix(got, "\na note about it\n") {
				t.Errorf("stderr = %q, want a last line starting %q, then the note", got, tc.want)
			}
		})
	}
	var out bytes.Buffer
	p := NewProgress(&out, true, time.Millisecond)
	stop := p.Start(Task{Name: "x", Unit: "objects", Done: func() int64 { return 3 }, Total: 3})
	stop()
	p.Notef("note")
	if out.Len() != 0 {
		t.Errorf("--quiet printed %q", out.String())
	}
	// Nothing done: no line at all.
	out.Reset()
	stop = NewProgress(&out, false, time.Hour).Start(Task{Name: "x", Unit: "objects", Done: func() int64 { return 0 }, Total: 3})
	stop()
	if out.Len() != 0 {
		t.Errorf("a task that did nothing printed %q", out.String())
	}
}
