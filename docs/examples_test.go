package docs

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/crdver/kubectl-crdver/internal/docblock"
)

// readPages reads every page from the repository root (the working directory).
func readPages(t *testing.T) []*docblock.Page {
	t.Helper()
	paths, err := docPages()
	if err != nil {
		t.Fatal(err)
	}
	var pages []*docblock.Page
	for _, path := range paths {
		p, err := docblock.ReadPage(path)
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
	pages := readPages(t)
	for _, p := range pages {
		for _, b := range p.Blocks {
			if b.Kind == "transcript" {
				transcripts++
				continue
			}
			n += len(b.Cmds)
		}
	}
	checkTranscriptTests(t, pages)
	t.Logf("%d example commands are run, %d blocks are transcripts of tests (checked by them)", n, transcripts)
	if n < 50 {
		t.Errorf("%d example commands in README.md and docs/, expected many more: is the parser broken?", n)
	}
}

// checkTranscriptTests: each transcript block names a test that checks it: the test function
// exists in the package folder the marker names, and its file opens the page's transcripts
// (docblock.OpenTranscripts with the page's path).
func checkTranscriptTests(t *testing.T, pages []*docblock.Page) {
	t.Helper()
	for _, p := range pages {
		for _, b := range p.Blocks {
			if b.Kind != "transcript" {
				continue
			}
			pkg, test, err := docblock.TranscriptTest(b)
			if err != nil {
				t.Error(err)
				continue
			}
			files, _ := filepath.Glob(filepath.Join(filepath.FromSlash(pkg), "*_test.go"))
			found := ""
			for _, f := range files {
				src, err := os.ReadFile(f)
				if err != nil {
					t.Fatal(err)
				}
				if strings.Contains(string(src), "\nfunc "+test+"(t *testing.T) {") {
					found = string(src)
				}
			}
			switch {
			case found == "":
				t.Errorf("%s:%d: the transcript names %s in %s/, which has no such test", b.Page, b.Line, test, pkg)
			case !strings.Contains(found, "docblock.OpenTranscripts(t, "+strconv.Quote(p.Path)+")"):
				t.Errorf("%s:%d: %s (%s/) does not check its transcripts on %s: it must call docblock.OpenTranscripts(t, %q)", b.Page, b.Line, test, pkg, p.Path, p.Path)
			}
		}
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
	rewrite := os.Getenv(docblock.UpdateVar) == "1"
	for _, p := range pages {
		if len(p.Blocks) == 0 {
			continue
		}
		t.Run(strings.ReplaceAll(p.Path, "/", ":"), func(t *testing.T) {
			updates := map[*docblock.Command]docblock.Update{}
			for _, group := range sessions(p) {
				if group[0].Kind == "transcript" {
					for _, b := range group {
						t.Logf("%s:%d: not run here (a transcript of %s, which checks it)", b.Page, b.Line, b.Name)
					}
					continue
				}
				t.Run(group[0].Kind+":"+group[0].Name, func(t *testing.T) {
					runSession(t, w, group, rewrite, updates)
				})
			}
			if len(updates) > 0 {
				if err := p.Write(updates); err != nil {
					t.Fatal(err)
				}
				t.Logf("rewrote %d example(s) of %s", len(updates), p.Path)
			}
		})
	}
}

// sessions groups a page's blocks by session (offline blocks together), in the order of their
// first block.
func sessions(p *docblock.Page) [][]*docblock.Block {
	var order []string
	groups := map[string][]*docblock.Block{}
	for _, b := range p.Blocks {
		key := b.Kind + ":" + b.Name
		if _, ok := groups[key]; !ok {
			order = append(order, key)
		}
		groups[key] = append(groups[key], b)
	}
	var out [][]*docblock.Block
	for _, k := range order {
		out = append(out, groups[k])
	}
	return out
}

// runSession runs the blocks of one session in order and checks (or, with update, records)
// what each command shows.
func runSession(t *testing.T, w *world, blocks []*docblock.Block, rewrite bool, updates map[*docblock.Command]docblock.Update) {
	s := w.newSession(t, blocks[0])
	for _, b := range blocks {
		for _, c := range b.Cmds {
			out, code := s.run(t, c)
			if c.Hidden {
				if code != 0 {
					t.Fatalf("%s: set-up command failed (exit %d):\n%s", c.Label(), code, strings.Join(out, "\n"))
				}
				continue
			}
			if len(b.Elide) > 0 {
				short, err := docblock.ApplyElisions(out, b.Elide)
				if err != nil {
					t.Errorf("%s: %v; the output:\n%s", c.Label(), err, strings.Join(out, "\n"))
					continue
				}
				out = short
			}
			same := slices.Equal(c.Shown, out)
			if b.Kind != "offline" {
				same = docblock.Mask(c.Shown) == docblock.Mask(out)
			}
			exitOK := c.Exit < 0 || c.Exit == code
			if same && exitOK {
				continue
			}
			if rewrite {
				u := docblock.Update{Output: out, Exit: -1}
				if c.Exit >= 0 {
					u.Exit = code
				}
				if same {
					u.Output = c.Shown
				}
				updates[c] = u
				continue
			}
			if !exitOK {
				t.Errorf("%s: the page says exit %d, the command ends with %d", c.Label(), c.Exit, code)
			}
			if !same {
				where := ""
				if b.Kind != "offline" {
					where = "\nfirst difference after masking (blanks removed):\n" + docblock.MaskedDifference(c.Shown, out)
				}
				t.Errorf("%s: the page does not show what the command prints (make docs rewrites it; -page +real):\n%s%s", c.Label(), cmp.Diff(c.Shown, out), where)
			}
		}
	}
}
