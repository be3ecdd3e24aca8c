package docblock

import (
	"regexp"
	"slices"
	"strings"
)

// masks are what differs between two runs of a session: ports, durations and rates, times and
// dates, digests, the test API server's temporary folders. A session's output is compared with the page
// after masking both, and without blanks and line ends: a table's columns follow the widths of
// what it holds, and a time stamp in a long path may be where the path wraps.
var masks = []struct {
	re   *regexp.Regexp
	with string
}{
	{regexp.MustCompile(`/tmp/crdver-testenv-\d+`), "/tmp/crdver-testenv-N"},
	{regexp.MustCompile(`127\.0\.0\.1:\d+`), "127.0.0.1:PORT"},
	{regexp.MustCompile(`\d{4}-\d\d-\d\d([T ]\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d| [A-Z]{3,4})?)?`), "DATE"},
	{regexp.MustCompile(`\d{8}-\d{6}`), "STAMP"},
	{regexp.MustCompile(`\d+(\.\d+)?(ns|µs|us|ms|s|m|h)\b`), "DURATION"},
	{regexp.MustCompile(`\d+(\.\d+)? (ns|µs|ms)\b`), "DURATION"},
	{regexp.MustCompile(`\d+(\.\d+)? objects/s`), "N objects/s"},
	// timings and what adapts to them in JSON (migrate's in-flight limit)
	{regexp.MustCompile(`"(\w*(Seconds|PerSecond|Millis|Ms)|final|peak|throttled)": [0-9.e+-]+`), `"$1": N`},
	// digests and names made of them: a checkpoint's file, a backup's sha256, uids
	{regexp.MustCompile(`\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b`), "UID"},
	{regexp.MustCompile(`\b[0-9a-f]{12,64}\b`), "HEX"},
}

// wrappedStamp is a time stamp of a file name that a table cell wrapped.
var wrappedStamp = regexp.MustCompile(`\d{8}-?\s+-?\d{0,6}\s*\d{0,6}\.yaml`)

// progressLine is the plain progress line a long run prints every interval when stderr is not
// a terminal ("fleet: 3/5 clusters finished, 1 clusters/s, ETA 2s"): a slower run prints more
// of them, a faster none.
var progressLine = regexp.MustCompile(`^\S+: \d+/\S+ .*, ETA \S+$`)

// WithoutProgress is lines without the plain progress lines (progressLine), which only a slow
// run prints: what a transcript's page shows.
func WithoutProgress(lines []string) []string {
	return slices.DeleteFunc(slices.Clone(lines), progressLine.MatchString)
}

// fleetDone is a fleet's line for a cluster whose run ended ("fleet: a: complete, exit 0 (0.4s;
// 1 of 3)"): with --parallel above 1 the clusters end in an order of their own, and the count
// follows it.
var fleetDone = regexp.MustCompile(`^(fleet: \S+: .*\(\S+; )\d+( of \d+\))$`)

// Mask is lines as compared with a page: without the plain progress lines, a fleet's lines of
// clusters that ended in the order of their names, every mask applied, without blanks and line
// ends.
func Mask(lines []string) string {
	var b strings.Builder
	var ended []string // a run of fleetDone lines
	flush := func() {
		slices.Sort(ended)
		for _, l := range ended {
			b.WriteString(l + "\n")
		}
		ended = ended[:0]
	}
	for _, l := range lines {
		if progressLine.MatchString(l) {
			continue
		}
		for _, m := range masks {
			l = m.re.ReplaceAllString(l, m.with)
		}
		if fleetDone.MatchString(l) {
			ended = append(ended, fleetDone.ReplaceAllString(l, "${1}N${2}"))
			continue
		}
		flush()
		b.WriteString(l + "\n")
	}
	flush()
	s := wrappedStamp.ReplaceAllString(b.String(), "STAMP.yaml")
	return strings.Join(strings.Fields(s), "")
}

// MaskedDifference shows where the masked page and output first differ, with some context.
func MaskedDifference(page, real []string) string {
	a, b := Mask(page), Mask(real)
	i := 0
	for i < len(a) && i < len(b) && a[i] == b[i] {
		i++
	}
	cut := func(s string) string { return s[max(0, i-60):min(len(s), i+60)] }
	return "page: …" + cut(a) + "…\nreal: …" + cut(b) + "…"
}

// SplitLines is s's lines, without the line end of the last.
func SplitLines(s string) []string {
	s = strings.TrimRight(s, "\n")
	if s == "" {
		return nil
	}
	return strings.Split(s, "\n")
}
