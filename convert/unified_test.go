package convert

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
)

// TestDiffStreamIsDifflibs: the diff made a document at a time is go-difflib's diff of the
// whole file: changes at the start and the end, hunks closer than 6 lines merged and farther
// ones not, a last line without a newline, documents that lose or gain lines.
func TestDiffStreamIsDifflibs(t *testing.T) {
	doc := func(i int, version string, extra int) string {
		var b strings.Builder
		fmt.Fprintf(&b, "# object %d\napiVersion: stable.example.com/%s\nkind: CronTab\nmetadata:\n  name: ct-%d\n", i, version, i)
		for j := 0; j < extra; j++ {
			fmt.Fprintf(&b, "  # note %d\n", j)
		}
		return b.String()
	}
	for _, c := range []struct {
		name    string
		changed []bool
		extra   []int // lines after each document's name (the gap between changes)
		newOnly []int // lines the new version of each changed document adds
		noEOL   bool
		sep     string
	}{
		{name: "every other", changed: []bool{true, false, true, false, true}, extra: []int{0, 0, 0, 0, 0}},
		{name: "far apart", changed: []bool{true, false, false, true}, extra: []int{8, 9, 0, 3}},
		{name: "exactly 2n apart", changed: []bool{false, true, true}, extra: []int{0, 2, 0}},
		{name: "2n+1 apart", changed: []bool{false, true, true}, extra: []int{0, 3, 0}},
		{name: "last without newline", changed: []bool{false, false, true}, extra: []int{5, 5, 0}, noEOL: true},
		{name: "last unchanged without newline", changed: []bool{true, false}, extra: []int{0, 1}, noEOL: true},
		{name: "lines added", changed: []bool{true, false, true}, extra: []int{2, 1, 4}, newOnly: []int{2, 0, 1}},
		{name: "comment separators", changed: []bool{true, true}, extra: []int{0, 0}, sep: "--- # the next\n"},
	} {
		for _, limit := range []int{1 << 20, 7} { // in memory; on disk past 7 bytes
			t.Run(fmt.Sprintf("%s/spill=%d", c.name, limit), func(t *testing.T) {
				defer lowerSpillLimit(limit)()
				sep := c.sep
				if sep == "" {
					sep = "---\n"
				}
				var old, new bytes.Buffer
				s := newDiffStream("dir/f.yaml")
				for i, ch := range c.changed {
					o := doc(i, "v1beta1", c.extra[i])
					n := o
					if ch {
						n = doc(i, "v1", c.extra[i])
						if c.newOnly != nil {
							n += strings.Repeat("  added: x\n", c.newOnly[i])
						}
					}
					last := i == len(c.changed)-1
					if last && c.noEOL {
						o, n = strings.TrimSuffix(o, "\n"), strings.TrimSuffix(n, "\n")
					}
					if ch {
						s.changed([]byte(o), []byte(n))
					} else {
						s.same([]byte(o))
					}
					old.WriteString(o)
					new.WriteString(n)
					if !last {
						s.same([]byte(sep))
						old.WriteString(sep)
						new.WriteString(sep)
					}
				}
				want := unifiedDiff("dir/f.yaml", old.Bytes(), new.Bytes())
				out, err := s.finish()
				if err != nil {
					t.Fatal(err)
				}
				var got strings.Builder
				if _, err := out.WriteTo(&got); err != nil {
					t.Fatal(err)
				}
				if got.String() != want {
					t.Errorf("streamed diff (spilled to disk past %d bytes):\n%s\nwant (difflib of the whole file):\n%s", spillLimit, got.String(), want)
				}
				s.discard()
			})
		}
	}
}

// lowerSpillLimit sets spillLimit for a test, and returns what puts it back.
func lowerSpillLimit(n int) func() {
	old := spillLimit
	spillLimit = n
	return func() { spillLimit = old }
}
