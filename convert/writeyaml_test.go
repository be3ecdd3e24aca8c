package convert

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"math/rand"
	"runtime"
	"strings"
	"testing"

	sigsyaml "sigs.k8s.io/yaml"
)

// TestWriteYAMLText: a text written a rune at a time as a top-level field is what
// sigs.k8s.io/yaml.Marshal writes of it, whichever style the emitter chooses (a literal block,
// with its indentation and chomping indicators; double-quoted, with escapes and folding past
// column 80, a space starting a folded line; marshalled whole for what is not streamed):
// diffs as they come, and random texts of the characters that change the choice.
func TestWriteYAMLText(t *testing.T) {
	long := strings.Repeat("word ", 40)
	texts := []string{
		"--- a/f.yaml\n+++ b/f.yaml\n@@ -1,3 +1,3 @@\n-apiVersion: v1beta1\n+apiVersion: v1\n kind: CronTab\n",
		"--- a\n+++ b\n@@ -1 +1 @@\n-x\n+y\n\\ No newline at end of file", // no final newline: "|-"
		"--- a\n \n+b\n",                       // a blank context line: a space before a break, double-quoted
		"  indented\nsecond\n",                 // "|2"
		"\nleading break\n",                    // "|2"
		"trailing\n\n",                         // "|+": marshalled whole
		"tab\there\n",                          // not printable: double-quoted
		"trailing space \n" + long + "\n",      // folded
		long + "  two spaces\n" + long + " \n", // folded before a space: "\ "
		"quote \" backslash \\ nel \u0085 ls \u2028 ps \u2029 nbsp \u00a0 bom \ufeff emoji 😀 cr \r\n", // escapes
		"ünïcode <&> line\n" + strings.Repeat("日本語 ", 30) + "\n",
		"bad \xff utf-8\n",
		"\ufeffbom first\n",
		"ls \u2028 in a block\n",               // marshalled whole
		"ls \u2028 and tab \t double-quoted\n", // streamed
		"nel \u0085 alone\n",                   // marshalled whole
		"trailing breaks, double-quoted\t\n\n",
		"no newline at all",
	}
	rnd := rand.New(rand.NewSource(1))
	alphabet := []string{"a", "b", " ", " ", "\n", "\n", "\t", "\"", "é", "\u2028", "\u0085", "\ufeff", "😀", "\xff", strings.Repeat("x", 30)}
	for range 2000 {
		var b strings.Builder
		for n := rnd.Intn(40); n >= 0; n-- {
			b.WriteString(alphabet[rnd.Intn(len(alphabet))])
		}
		texts = append(texts, b.String())
	}
	for _, s := range texts {
		want, err := sigsyaml.Marshal(map[string]string{"diff": s})
		if err != nil {
			t.Fatal(err)
		}
		var got bytes.Buffer
		w := bufio.NewWriter(&got)
		err = writeYAMLText(w, "diff", func() (io.Reader, error) { return strings.NewReader(s), nil })
		if err == nil {
			err = w.Flush()
		}
		if err != nil || got.String() != string(want) {
			t.Errorf("%q (%v):\n%s\nwant sigs.k8s.io/yaml's:\n%s", s, err, got.String(), want)
		}
	}
}

// heapPeak is a writer that throws away what it is given and keeps the largest live heap
// (runtime.MemStats.HeapAlloc after a collection) seen at each write, above the heap at its
// start.
type heapPeak struct {
	base, peak uint64
	n          int64
}

func newHeapPeak() *heapPeak {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return &heapPeak{base: m.HeapAlloc}
}

func (h *heapPeak) Write(p []byte) (int, error) {
	runtime.GC() // what is held, not the garbage a collection has not reached yet
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	if m.HeapAlloc > h.base {
		h.peak = max(h.peak, m.HeapAlloc-h.base)
	}
	h.n += int64(len(p))
	return len(p), nil
}

// spilledFile is the result of a file of n objects (each with a finding) and a diff of about
// diffSize bytes (a blank context line in it when blank: the diff is then written
// double-quoted), kept as a write run keeps them: in spills, on disk past spillLimit.
func spilledFile(t *testing.T, n, diffSize int, blank bool) FileResult {
	t.Helper()
	sp := &fileSpool{diff: &spill{}}
	batch := make([]ObjectResult, 0, 100)
	for i := range n {
		batch = append(batch, ObjectResult{Document: i + 1, Line: 11*i + 1, Kind: "CronTab", Name: fmt.Sprintf("default/ct-%07d", i), From: "v1beta1", To: "v1", Served: VersionServed,
			Warnings: []Finding{{Object: fmt.Sprintf("crontabs.yaml:%d", 11*i+1), Check: CheckTargetSchema, Path: ".spec.cronSpec", Detail: "a warning long enough to be folded by the emitter past its eightieth column, as details are", Severity: SeverityWarning}}})
		if len(batch) == cap(batch) || i == n-1 {
			if err := sp.addObjects(batch); err != nil {
				t.Fatal(err)
			}
			batch = batch[:0]
		}
	}
	sp.diff.WriteString("--- a/crontabs.yaml\n+++ b/crontabs.yaml\n")
	for i := 0; sp.diff.Len() < int64(diffSize); i++ {
		fmt.Fprintf(sp.diff, "@@ -%d,5 +%d,5 @@\n # backup %d\n-apiVersion: stable.example.com/v1beta1\n+apiVersion: stable.example.com/v1\n kind: CronTab\n metadata:\n   name: ct-%07d\n", 11*i+1, 11*i+1, i, i)
		if blank && i == 10 {
			sp.diff.WriteString(" \n")
		}
	}
	if sp.objects.f == nil || sp.diff.f == nil {
		t.Fatalf("not spilled to disk past %d bytes", spillLimit)
	}
	t.Cleanup(sp.close)
	return FileResult{Path: "crontabs.yaml", Status: FileWouldWrite, spool: sp}
}

// TestWriteYAMLBounded: WriteYAML of a file's results spilled to disk (2,000 objects, a diff
// of 6 MB; written as a literal block, and double-quoted) holds less than 4 MB of heap at any
// write, the output being over 6 MB; marshalling it whole, as -o yaml did, holds more than
// the bound (the measure sees it).
func TestWriteYAMLBounded(t *testing.T) {
	defer lowerSpillLimit(256 << 10)()
	const bound = 4 << 20
	for _, blank := range []bool{false, true} {
		f := spilledFile(t, 2000, 6<<20, blank)
		h := newHeapPeak()
		if err := f.WriteYAML(h); err != nil {
			t.Fatal(err)
		}
		if h.n < 6<<20 || h.peak > bound {
			t.Errorf("double-quoted diff %v: %d MB written holding up to %.1f MB of heap; want over 6 MB written, under %d MB held", blank, h.n>>20, float64(h.peak)/(1<<20), bound>>20)
		}
		t.Logf("streamed (double-quoted diff %v): %.1f MB written, up to %.1f MB of heap held", blank, float64(h.n)/(1<<20), float64(h.peak)/(1<<20))
	}
	f := spilledFile(t, 2000, 6<<20, false)
	h := newHeapPeak()
	y, err := sigsyaml.Marshal(f)
	if err != nil {
		t.Fatal(err)
	}
	if h.Write(y); h.peak < bound {
		t.Errorf("marshalled whole, %d MB held up to %.1f MB of heap: the measure does not see it", len(y)>>20, float64(h.peak)/(1<<20))
	}
	t.Logf("marshalled whole: %.1f MB, up to %.1f MB of heap held", float64(len(y))/(1<<20), float64(h.peak)/(1<<20))
}
