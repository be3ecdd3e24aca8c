package docs

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// The console examples of README.md and docs/ are generated from real runs and checked by
// TestExamples. Each fenced block that shows a shell prompt ("$ ") carries a marker, an HTML
// comment on the line before the fence (invisible on the rendered page):
//
//	<!-- example: offline -->          runs from the repository root, no cluster; compared byte for byte
//	<!-- example: cluster NAME -->     a session on the test API server: the blocks of NAME on one page
//	                                   run in page order on a cluster of their own (cleaned before)
//	<!-- example: session NAME -->     a session without a cluster (e.g. a conversion webhook started by
//	                                   one of its commands and used by the next)
//	<!-- example: cluster NAME setup -->   the same, but the commands' output is not shown (each must exit 0)
//	<!-- example: transcript WHY -->   not run here: a transcript of a test that needs what a page
//	                                   cannot set up (WHY names it); listed by TestExamples' log
//
// and, on the marker's following lines, how long outputs are shortened on the page, computed
// from the real output so that regenerating keeps them:
//
//	elide from /^RE/ to /^RE/ "… (what was left out)"
//
// ("from" drops the first line that matches and what follows it, "after" starts dropping after
// it; "to" stops before the first later line that matches, and the blank lines before it,
// "through" after it; without an end, to the end of the output). A command line may end with "# exit N": the exit code it ends
// with. Sessions' output is compared after masking what differs from run to run (ports,
// durations, dates, the cluster's temporary folders); offline examples must match exactly.

// markerRE is the start of an example marker.
var markerRE = regexp.MustCompile(`^\s*<!-- example: (offline|cluster|session|transcript)\b(.*)$`)

// exitRE is a command line's "# exit N" comment.
var exitRE = regexp.MustCompile(`\s+#\s*exit\s+(\d+)\s*$`)

// block is one marked fenced block of a page.
type block struct {
	page   string // relative to the repository root
	line   int    // 1-based line of the opening fence
	kind   string // offline, cluster, session
	name   string // the session's name ("" for offline)
	setup  bool
	kube   string // the Kubernetes minor of the session's API server ("" for the current one)
	elide  []elision
	indent string // the fence's indentation (a block inside a list item)
	cmds   []*command
}

// command is one "$ " line (with its continuation lines) and the output shown under it.
type command struct {
	b      *block
	first  int      // index of the "$ " line in the page's lines
	text   []string // the command's lines, "$ " and indentation removed
	shown  []string // the output lines shown on the page (indentation removed)
	exit   int      // the "# exit N" comment, or -1
	hidden bool     // the output is not shown (setup)
}

// script is what the shell runs: the lines joined, "# exit N" removed.
func (c *command) script() string {
	s := strings.Join(c.text, "\n")
	if m := exitRE.FindStringSubmatchIndex(s); m != nil {
		s = s[:m[0]]
	}
	return s
}

// label names the command for messages: page:line: $ command.
func (c *command) label() string {
	return fmt.Sprintf("%s:%d: $ %s", c.b.page, c.first+1, strings.Join(c.text, " "))
}

// elision is one "elide" rule of a marker.
type elision struct {
	startAfter bool // "after" rather than "from"
	start      *regexp.Regexp
	endAfter   bool // "through" rather than "to"
	end        *regexp.Regexp
	text       string
}

var elideRE = regexp.MustCompile(`^\s*elide\s+(from|after)\s+/(.*?)/\s+(?:(to|through)\s+/(.*?)/\s+)?"(.*)"\s*$`)

// page is a markdown file and its marked blocks.
type page struct {
	path   string
	lines  []string
	blocks []*block
}

// docPages lists README.md and every markdown file under docs/ except the generated CLI
// reference, from the repository root.
func docPages() ([]string, error) {
	pages := []string{"README.md"}
	err := filepath.WalkDir("docs", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && path == filepath.Join("docs", "reference") {
			return fs.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(path, ".md") {
			pages = append(pages, filepath.ToSlash(path))
		}
		return nil
	})
	sort.Strings(pages[1:])
	return pages, err
}

var fenceLineRE = regexp.MustCompile("^(\\s*)(```+)(\\S*)\\s*$")

// readPage parses a page's marked blocks. A fenced block that shows a prompt ("$ ") must be
// marked, and a marker must precede a fenced block.
func readPage(path string) (*page, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	p := &page{path: path, lines: strings.Split(string(b), "\n")}
	var pending *block // the marker waiting for its fence
	for i := 0; i < len(p.lines); i++ {
		line := p.lines[i]
		if m := markerRE.FindStringSubmatch(line); m != nil {
			if pending != nil {
				return nil, fmt.Errorf("%s:%d: an example marker with no fenced block after it", path, pending.line)
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
		for ; end < len(p.lines); end++ {
			if strings.TrimSpace(p.lines[end]) == fence || strings.TrimSpace(p.lines[end]) == strings.Repeat("`", len(fence)) {
				break
			}
		}
		if end == len(p.lines) {
			return nil, fmt.Errorf("%s:%d: a fenced block that does not end", path, i+1)
		}
		body := p.lines[i+1 : end]
		if pending == nil {
			for j, l := range body {
				if strings.HasPrefix(strings.TrimPrefix(l, indent), "$ ") {
					return nil, fmt.Errorf("%s:%d: a console example without a marker (add <!-- example: offline --> or cluster/session NAME before line %d; see docs/pages_test.go)", path, i+1+j+1, i+1)
				}
			}
			i = end
			continue
		}
		bl := pending
		pending = nil
		bl.line, bl.indent = i+1, indent
		var cur *command
		for j := i + 1; j < end; j++ {
			l := strings.TrimPrefix(p.lines[j], indent)
			if strings.HasPrefix(l, "$ ") {
				cur = &command{b: bl, first: j, text: []string{strings.TrimPrefix(l, "$ ")}, exit: -1, hidden: bl.setup}
				for strings.HasSuffix(cur.text[len(cur.text)-1], "\\") && j+1 < end {
					j++
					cur.text = append(cur.text, strings.TrimPrefix(p.lines[j], indent))
				}
				if m := exitRE.FindStringSubmatch(cur.text[len(cur.text)-1]); m != nil {
					cur.exit, _ = strconv.Atoi(m[1])
				}
				bl.cmds = append(bl.cmds, cur)
				continue
			}
			if cur == nil {
				return nil, fmt.Errorf("%s:%d: a marked block must start with a command (\"$ \")", path, j+1)
			}
			cur.shown = append(cur.shown, l)
		}
		if len(bl.cmds) == 0 {
			return nil, fmt.Errorf("%s:%d: a marked block without a command", path, i+1)
		}
		if len(bl.elide) > 0 && len(bl.cmds) != 1 {
			return nil, fmt.Errorf("%s:%d: elide rules need a block of one command (split the block)", path, i+1)
		}
		if bl.setup {
			for _, c := range bl.cmds {
				if len(c.shown) > 0 {
					return nil, fmt.Errorf("%s: a setup block shows no output", c.label())
				}
			}
		}
		p.blocks = append(p.blocks, bl)
		i = end
	}
	if pending != nil {
		return nil, fmt.Errorf("%s:%d: an example marker with no fenced block after it", path, pending.line)
	}
	return p, nil
}

// parseMarker reads the marker starting on line i (possibly several lines up to "-->") and
// returns its block and the marker's last line.
func parseMarker(p *page, i int, kind, rest string) (*block, int, error) {
	bl := &block{page: p.path, line: i + 1, kind: kind}
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
		if end == len(p.lines) {
			return nil, 0, fmt.Errorf("%s:%d: an example marker that does not end (-->)", p.path, i+1)
		}
		rest = strings.TrimSpace(p.lines[end])
	}
	words := strings.Fields(lines[0])
	if kind == "transcript" {
		if len(words) == 0 {
			return nil, 0, fmt.Errorf("%s:%d: a transcript marker says why it is not run (the test it comes from)", p.path, i+1)
		}
		bl.name = strings.Join(words, " ")
		return bl, end, nil
	}
	if kind != "offline" {
		if len(words) == 0 {
			return nil, 0, fmt.Errorf("%s:%d: %s needs a session name", p.path, i+1, kind)
		}
		bl.name, words = words[0], words[1:]
	}
	for _, w := range words {
		switch {
		case w == "setup" && kind != "offline":
			bl.setup = true
		case strings.HasPrefix(w, "kube=") && kind == "cluster":
			bl.kube = strings.TrimPrefix(w, "kube=")
		default:
			return nil, 0, fmt.Errorf("%s:%d: unknown word %q in the example marker", p.path, i+1, w)
		}
	}
	for _, l := range lines[1:] {
		if l == "" {
			continue
		}
		m := elideRE.FindStringSubmatch(l)
		if m == nil {
			return nil, 0, fmt.Errorf("%s:%d: not an elide rule: %s", p.path, i+1, l)
		}
		e := elision{startAfter: m[1] == "after", endAfter: m[3] == "through", text: m[5]}
		var err error
		if e.start, err = regexp.Compile(m[2]); err != nil {
			return nil, 0, fmt.Errorf("%s:%d: %v", p.path, i+1, err)
		}
		if m[4] != "" {
			if e.end, err = regexp.Compile(m[4]); err != nil {
				return nil, 0, fmt.Errorf("%s:%d: %v", p.path, i+1, err)
			}
		}
		bl.elide = append(bl.elide, e)
	}
	return bl, end, nil
}

// applyElisions shortens out by the rules, in order: each rule's start is looked for after
// the previous rule's end. A rule whose lines are not found is an error (the output changed:
// the rule must change too).
func applyElisions(out []string, rules []elision) ([]string, error) {
	var res []string
	pos := 0
	for _, r := range rules {
		s := -1
		for i := pos; i < len(out); i++ {
			if r.start.MatchString(out[i]) {
				s = i
				break
			}
		}
		if s < 0 {
			return nil, fmt.Errorf("elide: no line matches /%s/ (after line %d of the output)", r.start, pos)
		}
		if r.startAfter {
			s++
		}
		e := len(out)
		if r.end != nil {
			e = -1
			for i := s + 1; i < len(out); i++ {
				if r.end.MatchString(out[i]) {
					e = i
					break
				}
			}
			if e < 0 {
				return nil, fmt.Errorf("elide: no line matches /%s/ after /%s/", r.end, r.start)
			}
			if r.endAfter {
				e++
			}
			for e > s && strings.TrimSpace(out[e-1]) == "" {
				e-- // a blank line before what follows stays: it separates it from the text
			}
		}
		res = append(res, out[pos:s]...)
		res = append(res, r.text)
		pos = e
	}
	return append(res, out[pos:]...), nil
}

// replaceShown rewrites the output shown under each command of updates (and its "# exit N"),
// from the last line of the page up, and writes the page.
func (p *page) write(updates map[*command]update) error {
	var cmds []*command
	for c := range updates {
		cmds = append(cmds, c)
	}
	sort.Slice(cmds, func(i, j int) bool { return cmds[i].first > cmds[j].first })
	lines := p.lines
	for _, c := range cmds {
		u := updates[c]
		indent := c.b.indent
		last := c.first + len(c.text) - 1
		if u.exit >= 0 {
			lines[last] = exitRE.ReplaceAllString(lines[last], "   # exit "+strconv.Itoa(u.exit))
		}
		var out []string
		for _, l := range u.output {
			if l == "" {
				out = append(out, "")
			} else {
				out = append(out, indent+l)
			}
		}
		start := last + 1
		end := start + len(c.shown)
		lines = append(lines[:start], append(out, lines[end:]...)...)
	}
	p.lines = lines
	return os.WriteFile(p.path, []byte(strings.Join(lines, "\n")), 0o644)
}

// update is what a command's example becomes on the page.
type update struct {
	output []string
	exit   int // -1: leave the "# exit N" comment alone
}
