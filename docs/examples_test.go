package docs

import (
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// updateVar set to 1 makes TestExamples rewrite the pages' examples from the real runs
// (`make docs`) instead of failing.
const updateVar = "CRDVER_UPDATE_DOCS"

// readPages reads every page from the repository root (the working directory).
func readPages(t *testing.T) []*page {
	t.Helper()
	paths, err := docPages()
	if err != nil {
		t.Fatal(err)
	}
	var pages []*page
	for _, path := range paths {
		p, err := readPage(path)
		if err != nil {
			t.Error(err)
			continue
		}
		pages = append(pages, p)
	}
	return pages
}

// TestPagesMarked: every console example of README.md and docs/ is marked, so that
// TestExamples runs it (a new example cannot be left unchecked by accident), and every marker
// is well formed. It runs nothing.
func TestPagesMarked(t *testing.T) {
	t.Chdir("..")
	n, transcripts := 0, 0
	for _, p := range readPages(t) {
		for _, b := range p.blocks {
			if b.kind == "transcript" {
				transcripts++
				continue
			}
			n += len(b.cmds)
		}
	}
	t.Logf("%d example commands are run, %d blocks are transcripts of tests", n, transcripts)
	if n < 50 {
		t.Errorf("%d example commands in README.md and docs/, expected many more: is the parser broken?", n)
	}
}

// TestExamples runs every console example of README.md and docs/ as a reader would (see
// pages_test.go for the markers, run_test.go for how they run): offline ones from the
// repository root, whose output must be the page's byte for byte; cluster sessions against a
// test kube-apiserver and etcd, and sessions with a conversion webhook, whose output must be
// the page's after masking ports, durations, dates and temporary folders. A shown exit code
// ("# exit N", "echo $?") must be the real one. With CRDVER_UPDATE_DOCS=1 (make docs) it
// rewrites what differs instead.
func TestExamples(t *testing.T) {
	if testing.Short() {
		t.Skip("runs every example of the docs (-short)")
	}
	for _, tool := range []string{"bash", "kubectl", "jq", "go"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s is not on PATH: the examples run as a reader runs them (bash, kubectl, jq, go)", tool)
		}
	}
	t.Chdir("..")
	root, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	pages := readPages(t) // a page that does not parse is an error, the others run
	w := newWorld(t, root)
	t.Cleanup(func() {
		w.stop()
		t.Log(w.describe())
	})
	rewrite := os.Getenv(updateVar) == "1"
	for _, p := range pages {
		if len(p.blocks) == 0 {
			continue
		}
		t.Run(strings.ReplaceAll(p.path, "/", ":"), func(t *testing.T) {
			updates := map[*command]update{}
			for _, group := range sessions(p) {
				if group[0].kind == "transcript" {
					for _, b := range group {
						t.Logf("%s:%d: not run (a transcript of %s)", b.page, b.line, b.name)
					}
					continue
				}
				t.Run(group[0].kind+":"+group[0].name, func(t *testing.T) {
					runSession(t, w, group, rewrite, updates)
				})
			}
			if len(updates) > 0 {
				if err := p.write(updates); err != nil {
					t.Fatal(err)
				}
				t.Logf("rewrote %d example(s) of %s", len(updates), p.path)
			}
		})
	}
}

// sessions groups a page's blocks by session (offline blocks together), in the order of their
// first block.
func sessions(p *page) [][]*block {
	var order []string
	groups := map[string][]*block{}
	for _, b := range p.blocks {
		key := b.kind + ":" + b.name
		if _, ok := groups[key]; !ok {
			order = append(order, key)
		}
		groups[key] = append(groups[key], b)
	}
	var out [][]*block
	for _, k := range order {
		out = append(out, groups[k])
	}
	return out
}

// runSession runs the blocks of one session in order and checks (or, with update, records)
// what each command shows.
func runSession(t *testing.T, w *world, blocks []*block, rewrite bool, updates map[*command]update) {
	s := w.newSession(t, blocks[0])
	for _, b := range blocks {
		for _, c := range b.cmds {
			out, code := s.run(t, c)
			if c.hidden {
				if code != 0 {
					t.Fatalf("%s: set-up command failed (exit %d):\n%s", c.label(), code, strings.Join(out, "\n"))
				}
				continue
			}
			if len(b.elide) > 0 {
				short, err := applyElisions(out, b.elide)
				if err != nil {
					t.Errorf("%s: %v; the output:\n%s", c.label(), err, strings.Join(out, "\n"))
					continue
				}
				out = short
			}
			same := slices.Equal(c.shown, out)
			if b.kind != "offline" {
				same = mask(c.shown) == mask(out)
			}
			exitOK := c.exit < 0 || c.exit == code
			if same && exitOK {
				continue
			}
			if rewrite {
				u := update{output: out, exit: -1}
				if c.exit >= 0 {
					u.exit = code
				}
				if same {
					u.output = c.shown
				}
				updates[c] = u
				continue
			}
			if !exitOK {
				t.Errorf("%s: the page says exit %d, the command ends with %d", c.label(), c.exit, code)
			}
			if !same {
				where := ""
				if b.kind != "offline" {
					where = "\nfirst difference after masking (blanks removed):\n" + maskedDifference(c.shown, out)
				}
				t.Errorf("%s: the page does not show what the command prints (make docs rewrites it; -page +real):\n%s%s", c.label(), cmp.Diff(c.shown, out), where)
			}
		}
	}
}

// maskedDifference shows where the masked page and output first differ, with some context.
func maskedDifference(page, real []string) string {
	a, b := mask(page), mask(real)
	i := 0
	for i < len(a) && i < len(b) && a[i] == b[i] {
		i++
	}
	cut := func(s string) string { return s[max(0, i-60):min(len(s), i+60)] }
	return "page: …" + cut(a) + "…\nreal: …" + cut(b) + "…"
}
