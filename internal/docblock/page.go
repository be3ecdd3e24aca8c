// Package docblock reads the marked console examples of README.md and docs/ (the fenced blocks
// after an "<!-- example: … -->" marker), shortens a real output by a block's elide rules,
// compares outputs after masking what differs from run to run, and rewrites what a page shows.
// It is the one home of these rules for the tests that check the pages: docs/ (TestExamples,
// which runs the examples) and the tests whose transcripts the pages show (Transcripts).
//
// It is imported by tests only.
package docblock

import (
	"fmt"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// The console examples of README.md and docs/ are generated from real runs and checked by
// tests. Each fenced block that shows a shell prompt ("$ ") carries a marker, an HTML
// comment on the line before the fence (invisible on the rendered page):
//
//	<!-- example: offline -->          runs from the repository root, no cluster; compared byte for byte
//	<!-- example: cluster NAME -->     a session on the test API server: the blocks of NAME on one page
//	                                   run in page order on a cluster of their own (cleaned before)
//	<!-- example: session NAME -->     a session without a cluster (e.g. a conversion webhook started by
//	                                   one of its commands and used by the next)
//	<!-- example: cluster NAME setup -->   the same, but the commands' output is not shown (each must exit 0)
//	<!-- example: transcript PKG TEST (WHY) -->   not run by docs/: a transcript of the test TEST of
//	                                   the package folder PKG, which needs what a page cannot set up
//	                                   (WHY names it); that test checks it (Transcripts)
//
// and, on the marker's following lines, how long outputs are shortened on the page, computed
// from the real output so that regenerating keeps them:
//
//	elide from /^RE/ to /^RE/ "… (what was left out)"
//
// ("from" drops the first line that matches and what follows it, "after" starts dropping after
// it; "to" stops before the first later line that matches, and the blank lines before it,
// "through" after it; without an end, to the end of the output). A command line may end with "# exit N": the exit code it ends
// with. Sessions' and transcripts' output is compared after masking what differs from run to
// run (Mask: ports, durations, dates, the cluster's temporary folders); offline examples must
// match exactly.

// markerRE is the start of an example marker.
var markerRE = regexp.MustCompile(`^\s*<!-- example: (offline|cluster|session|transcript)\b(.*)$`)

// exitRE is a command line's "# exit N" comment.
var exitRE = regexp.MustCompile(`\s+#\s*exit\s+(\d+)\s*$`)

// Block is one marked fenced block of a page.
type Block struct {
	Page   string // relative to the repository root
	Line   int    // 1-based line of the opening fence
	Kind   string // offline, cluster, session, transcript
	Name   string // the session's name ("" for offline); a transcript's: what follows "transcript"
	Setup  bool
	Kube   string // the Kubernetes minor of the session's API server ("" for the current one)
	Elide  []Elision
	Indent string // the fence's indentation (a block inside a list item)
	Cmds   []*Command
}

// Command is one "$ " line (with its continuation lines) and the output shown under it.
type Command struct {
	Block  *Block
	First  int      // index of the "$ " line in the page's lines
	Text   []string // the command's lines, "$ " and indentation removed
	Shown  []string // the output lines shown on the page (indentation removed)
	Exit   int      // the "# exit N" comment, or -1
	Hidden bool     // the output is not shown (setup)
}

// Script is what the shell runs: the lines joined, "# exit N" removed.
func (c *Command) Script() string {
	s := strings.Join(c.Text, "\n")
	if m := exitRE.FindStringSubmatchIndex(s); m != nil {
		s = s[:m[0]]
	}
	return s
}

// Label names the command for messages: page:line: $ command.
func (c *Command) Label() string {
	return fmt.Sprintf("%s:%d: $ %s", c.Block.Page, c.First+1, strings.Join(c.Text, " "))
}

// Elision is one "elide" rule of a marker.
type Elision struct {
	StartAfter bool // "after" rather than "from"
	Start      *regexp.Regexp
	EndAfter   bool // "through" rather than "to"
	End        *regexp.Regexp
	Text       string
}

var elideRE = regexp.MustCompile(`^\s*elide\s+(from|after)\s+/(.*?)/\s+(?:(to|through)\s+/(.*?)/\s+)?"(.*)"\s*$`)

// Page is a markdown file and its marked blocks.
type Page struct {
	Path   string
	Lines  []string
	Blocks []*Block
}

var fenceLineRE = regexp.MustCompile("^(\\s*)(```+)(\\S*)\\s*$")

// ReadPage parses a page's marked blocks. A fenced block that shows a prompt ("$ ") must be
// marked, and a marker must precede a fenced block.
func ReadPage(path string) (*Page, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	p := &Page{Path: path, Lines: strings.Split(string(b), "\n")}
	var pending *Block // the marker waiting for its fence
	for i := 0; i < len(p.Lines); i++ {
		line := p.Lines[i]
		if m := markerRE.FindStringSubmatch(line); m != nil {
			if pending != nil {
				return nil, fmt.Errorf("%s:%d: an example marker with no fenced block after it", path, pending.Line)
			}
			bl, end, err := parseMarker(p, i, m[1], m[2])
			if err != nil {
				return nil, err
			}
			pending, i = bl, end
			continue
		}
		m := fenceLineRE.FindStringSubmatch(line)
		if m == nil {
			if pending != nil && strings.TrimSpace(line) != "" {
				return nil, fmt.Errorf("%s:%d: an example marker must be followed by its fenced block", path, i+1)
			}
			continue
		}
		// A fenced block: find its end.
		indent, fence := m[1], m[2]
		end := i + 1
		for ; end < len(p.Lines); end++ {
			if strings.TrimSpace(p.Lines[end]) == fence || strings.TrimSpace(p.Lines[end]) == strings.Repeat("`", len(fence)) {
				break
			}
		}
		if end == len(p.Lines) {
			return nil, fmt.Errorf("%s:%d: a fenced block that does not end", path, i+1)
		}
		body := p.Lines[i+1 : end]
		if pending == nil {
			for j, l := range body {
				if strings.HasPrefix(strings.TrimPrefix(l, indent), "$ ") {
					return nil, fmt.Errorf("%s:%d: a console example without a marker (add <!-- example: offline --> or cluster/session NAME before line %d; see internal/docblock)", path, i+1+j+1, i+1)
				}
			}
			i = end
			continue
		}
		bl := pending
		pending = nil
		bl.Line, bl.Indent = i+1, indent
		var cur *Command
		for j := i + 1; j < end; j++ {
			l := strings.TrimPrefix(p.Lines[j], indent)
			if strings.HasPrefix(l, "$ ") {
				cur = &Command{Block: bl, First: j, Text: []string{strings.TrimPrefix(l, "$ ")}, Exit: -1, Hidden: bl.Setup}
				for strings.HasSuffix(cur.Text[len(cur.Text)-1], "\\") && j+1 < end {
					j++
					cur.Text = append(cur.Text, strings.TrimPrefix(p.Lines[j], indent))
				}
				if m := exitRE.FindStringSubmatch(cur.Text[len(cur.Text)-1]); m != nil {
					cur.Exit, _ = strconv.Atoi(m[1])
				}
				bl.Cmds = append(bl.Cmds, cur)
				continue
			}
			if cur == nil {
				return nil, fmt.Errorf("%s:%d: a marked block must start with a command (\"$ \")", path, j+1)
			}
			cur.Shown = append(cur.Shown, l)
		}
		if len(bl.Cmds) == 0 {
			return nil, fmt.Errorf("%s:%d: a marked block without a command", path, i+1)
		}
		if len(bl.Elide) > 0 && len(bl.Cmds) != 1 {
			return nil, fmt.Errorf("%s:%d: elide rules need a block of one command (split the block)", path, i+1)
		}
		if bl.Setup {
			for _, c := range bl.Cmds {
				if len(c.Shown) > 0 {
					return nil, fmt.Errorf("%s: a setup block shows no output", c.Label())
				}
			}
		}
		p.Blocks = append(p.Blocks, bl)
		i = end
	}
	if pending != nil {
		return nil, fmt.Errorf("%s:%d: an example marker with no fenced block after it", path, pending.Line)
	}
	return p, nil
}

// parseMarker reads the marker starting on line i (possibly several lines up to "-->") and
// returns its block and the marker's last line.
func parseMarker(p *Page, i int, kind, rest string) (*Block, int, error) {
	bl := &Block{Page: p.Path, Line: i + 1, Kind: kind}
	var lines []string
	end := i
	rest = strings.TrimSpace(rest)
	for {
		if r, ok := strings.CutSuffix(rest, "-->"); ok {
			lines = append(lines, strings.TrimSpace(r))
			break
		}
		lines = append(lines, rest)
		end++
		if end == len(p.Lines) {
			return nil, 0, fmt.Errorf("%s:%d: an example marker that does not end (-->)", p.Path, i+1)
		}
		rest = strings.TrimSpace(p.Lines[end])
	}
	words := strings.Fields(lines[0])
	if kind == "transcript" {
		if len(words) == 0 {
			return nil, 0, fmt.Errorf("%s:%d: a transcript marker says why it is not run (the test it comes from)", p.Path, i+1)
		}
		bl.Name, words = strings.Join(words, " "), nil
	}
	if kind != "offline" && kind != "transcript" {
		if len(words) == 0 {
			return nil, 0, fmt.Errorf("%s:%d: %s needs a session name", p.Path, i+1, kind)
		}
		bl.Name, words = words[0], words[1:]
	}
	for _, w := range words {
		switch {
		case w == "setup" && kind != "offline":
			bl.Setup = true
		case strings.HasPrefix(w, "kube=") && kind == "cluster":
			bl.Kube = strings.TrimPrefix(w, "kube=")
		default:
			return nil, 0, fmt.Errorf("%s:%d: unknown word %q in the example marker", p.Path, i+1, w)
		}
	}
	for _, l := range lines[1:] {
		if l == "" {
			continue
		}
		m := elideRE.FindStringSubmatch(l)
		if m == nil {
			return nil, 0, fmt.Errorf("%s:%d: not an elide rule: %s", p.Path, i+1, l)
		}
		e := Elision{StartAfter: m[1] == "after", EndAfter: m[3] == "through", Text: m[5]}
		var err error
		if e.Start, err = regexp.Compile(m[2]); err != nil {
			return nil, 0, fmt.Errorf("%s:%d: %v", p.Path, i+1, err)
		}
		if m[4] != "" {
			if e.End, err = regexp.Compile(m[4]); err != nil {
				return nil, 0, fmt.Errorf("%s:%d: %v", p.Path, i+1, err)
			}
		}
		bl.Elide = append(bl.Elide, e)
	}
	return bl, end, nil
}

// ApplyElisions shortens out by the rules, in order: each rule's start is looked for after
// the previous rule's end. A rule whose lines are not found is an error (the output changed:
// the rule must change too).
func ApplyElisions(out []string, rules []Elision) ([]string, error) {
	var res []string
	pos := 0
	for _, r := range rules {
		s := -1
		for i := pos; i < len(out); i++ {
			if r.Start.MatchString(out[i]) {
				s = i
				break
			}
		}
		if s < 0 {
			return nil, fmt.Errorf("elide: no line matches /%s/ (after line %d of the output)", r.Start, pos)
		}
		if r.StartAfter {
			s++
		}
		e := len(out)
		if r.End != nil {
			e = -1
			for i := s + 1; i < len(out); i++ {
				if r.End.MatchString(out[i]) {
					e = i
					break
				}
			}
			if e < 0 {
				return nil, fmt.Errorf("elide: no line matches /%s/ after /%s/", r.End, r.Start)
			}
			if r.EndAfter {
				e++
			}
			for e > s && strings.TrimSpace(out[e-1]) == "" {
				e-- // a blank line before what follows stays: it separates it from the text
			}
		}
		res = append(res, out[pos:s]...)
		res = append(res, r.Text)
		pos = e
	}
	return append(res, out[pos:]...), nil
}

// Write rewrites the output shown under each command of updates (and its "# exit N"),
// from the last line of the page up, and writes the page.
func (p *Page) Write(updates map[*Command]Update) error {
	var cmds []*Command
	for c := range updates {
		cmds = append(cmds, c)
	}
	sort.Slice(cmds, func(i, j int) bool { return cmds[i].First > cmds[j].First })
	lines := p.Lines
	for _, c := range cmds {
		u := updates[c]
		indent := c.Block.Indent
		last := c.First + len(c.Text) - 1
		if u.Exit >= 0 {
			lines[last] = exitRE.ReplaceAllString(lines[last], "   # exit "+strconv.Itoa(u.Exit))
		}
		var out []string
		for _, l := range u.Output {
			if l == "" {
				out = append(out, "")
			} else {
				out = append(out, indent+l)
			}
		}
		start := last + 1
		end := start + len(c.Shown)
		lines = append(lines[:start], append(out, lines[end:]...)...)
	}
	p.Lines = lines
	return os.WriteFile(p.Path, []byte(strings.Join(lines, "\n")), 0o644)
}

// Update is what a command's example becomes on the page.
type Update struct {
	Output []string
	Exit   int // -1: leave the "# exit N" comment alone
}
