package convert

// unified.go: the unified diff of a file made as its documents go by, a changed document at a
// time: what go-difflib's unified diff of the whole file gives (3 lines of context, hunks
// closer than 6 lines merged, its SplitLines' extra last line), with each changed document
// matched on its own — so that time is linear in the file and memory holds the diff and the
// last lines of context, never the file; the diff itself and its open hunk are spills (in
// memory up to a size, past it in a temporary file: writespool.go).

import (
	"fmt"
	"path/filepath"
	"strings"

	"github.com/pmezard/go-difflib/difflib"
)

// diffContext is the number of unchanged lines around each change.
const diffContext = 3

// unifiedDiff is the unified diff of a to b, named path, as a whole (a test's view of two texts).
func unifiedDiff(path string, a, b []byte) string {
	d, _ := difflib.GetUnifiedDiffString(difflib.UnifiedDiff{
		A: difflib.SplitLines(string(a)), B: difflib.SplitLines(string(b)),
		FromFile: diffName("a/", path), ToFile: diffName("b/", path), Context: diffContext,
	})
	return d
}

func diffName(prefix, path string) string {
	return prefix + strings.TrimPrefix(filepath.ToSlash(path), "/")
}

// diffStream builds the unified diff of a file given as a sequence of unchanged and changed
// pieces, in the file's order, each of whole lines (but the file's last).
type diffStream struct {
	path string
	out  *spill
	// a, b are the lines of the old and the new file seen so far.
	a, b int
	// before are the last unchanged lines (at most diffContext) when no hunk is open.
	before []string
	// hunk is the open hunk's lines (written as they come: a file whose every document
	// changes is one hunk); after the unchanged lines since its last change.
	open              bool
	hunk              *spill
	hunkA, hunkB      int // first line (0-based) of the hunk in a and b
	hunkLenA, hunkLen int
	after             []string
	// ends says whether the file seen so far ends with a newline (or is empty).
	ends bool
}

func newDiffStream(path string) *diffStream {
	return &diffStream{path: path, ends: true, out: &spill{}, hunk: &spill{}}
}

// splitLines splits text after each newline; a last line without one is given one (as
// difflib.SplitLines does).
func splitLines(text []byte) []string {
	if len(text) == 0 {
		return nil
	}
	lines := strings.SplitAfter(string(text), "\n")
	if lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	} else {
		lines[len(lines)-1] += "\n"
	}
	return lines
}

// same adds text, unchanged.
func (s *diffStream) same(text []byte) {
	if len(text) == 0 {
		return
	}
	s.ends = text[len(text)-1] == '\n'
	s.equal(splitLines(text))
}

func (s *diffStream) equal(lines []string) {
	for _, l := range lines {
		s.a++
		s.b++
		if !s.open {
			s.before = append(s.before, l)
			if len(s.before) > diffContext {
				s.before = s.before[1:]
			}
			continue
		}
		s.after = append(s.after, l)
		if len(s.after) > 2*diffContext {
			s.close()
			s.before = append(s.before[:0], s.after[len(s.after)-diffContext:]...)
			s.after = nil
		}
	}
}

// changed adds old, which the new file has as new (both are whole lines but at the file's
// end): the difference of their lines, matched with each other only.
func (s *diffStream) changed(old, new []byte) {
	if len(new) > 0 {
		s.ends = new[len(new)-1] == '\n'
	} else if len(old) > 0 {
		s.ends = old[len(old)-1] == '\n'
	}
	a, b := splitLines(old), splitLines(new)
	for _, op := range difflib.NewMatcher(a, b).GetOpCodes() {
		if op.Tag == 'e' {
			s.equal(a[op.I1:op.I2])
			continue
		}
		s.change(a[op.I1:op.I2], b[op.J1:op.J2])
	}
}

// change adds lines removed and lines added at the current place.
func (s *diffStream) change(removed, added []string) {
	if !s.open {
		s.open = true
		s.hunkA, s.hunkB = s.a-len(s.before), s.b-len(s.before)
		s.hunkLenA, s.hunkLen = 0, 0
		s.after = s.before
		s.before = nil
	}
	s.lines(' ', s.after)
	s.hunkLenA += len(s.after)
	s.hunkLen += len(s.after)
	s.after = nil
	s.lines('-', removed)
	s.lines('+', added)
	s.hunkLenA += len(removed)
	s.hunkLen += len(added)
	s.a += len(removed)
	s.b += len(added)
}

// close writes the open hunk, with at most diffContext of the unchanged lines after it.
func (s *diffStream) close() {
	if !s.open {
		return
	}
	tail := s.after[:min(len(s.after), diffContext)]
	s.lines(' ', tail)
	if s.out.Len() == 0 {
		fmt.Fprintf(s.out, "--- %s\n+++ %s\n", diffName("a/", s.path), diffName("b/", s.path))
	}
	fmt.Fprintf(s.out, "@@ -%s +%s @@\n", diffRange(s.hunkA, s.hunkLenA+len(tail)), diffRange(s.hunkB, s.hunkLen+len(tail)))
	if _, err := s.hunk.WriteTo(s.out); err != nil && s.out.err == nil {
		s.out.err = err
	}
	s.hunk.close()
	s.open = false
}

// lines adds lines to the open hunk, each after mark.
func (s *diffStream) lines(mark byte, lines []string) {
	m := string(mark)
	for _, l := range lines {
		s.hunk.WriteString(m)
		s.hunk.WriteString(l)
	}
}

// diffRange is a hunk's range as difflib writes it (1-based; an empty range names the line
// before it).
func diffRange(start, n int) string {
	switch n {
	case 1:
		return fmt.Sprint(start + 1)
	case 0:
		return fmt.Sprintf("%d,0", start)
	}
	return fmt.Sprintf("%d,%d", start+1, n)
}

// finish is the diff (empty when nothing changed), or the error of writing it.
// difflib.SplitLines gives a file that ends with a newline one more, empty line: it is context
// here too.
func (s *diffStream) finish() (*spill, error) {
	if s.ends {
		s.equal([]string{"\n"})
	}
	s.close()
	return s.out, s.out.err
}

// discard throws the diff away.
func (s *diffStream) discard() {
	if s != nil {
		s.out.close()
		s.hunk.close()
	}
}
