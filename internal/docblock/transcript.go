package docblock

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// UpdateVar set to 1 makes the tests that check the pages rewrite what differs from the real
// runs instead of failing (`make docs`, `make docs-transcripts`).
const UpdateVar = "CRDVER_UPDATE_DOCS"

// TranscriptTest is the test a transcript block names: the first two words of its marker, the
// package folder from the repository root and the test function ("e2e/fleet
// TestFleetUpgradeInWaves (…)").
func TranscriptTest(b *Block) (pkg, test string, err error) {
	words := strings.Fields(b.Name)
	if b.Kind != "transcript" || len(words) < 2 || !strings.HasPrefix(words[1], "Test") {
		return "", "", fmt.Errorf("%s:%d: a transcript marker names the test that checks it: <!-- example: transcript PKG TestName (why it is not run by docs/) -->", b.Page, b.Line)
	}
	return words[0], words[1], nil
}

// Transcripts are the blocks of a page whose transcript marker names the running test: in page
// order, each shows one of the test's commands and what it printed, and Check compares them
// with the test's real runs. With CRDVER_UPDATE_DOCS=1 the blocks that differ are rewritten
// when the test ends.
type Transcripts struct {
	t       testing.TB
	page    string // from the repository root
	path    string // the page, absolute
	pkg     string // the test's package folder from the repository root
	test    string
	blocks  []*Block
	next    int
	replace []string // old, new pairs
	updates map[int]Update
	rewrite bool
}

// OpenTranscripts reads page (a path from the repository root) for the blocks that name the
// running test (its top-level name, in the package of the working folder). The test must
// Check every one of them, in order.
func OpenTranscripts(t testing.TB, page string) *Transcripts {
	t.Helper()
	root, pkg, err := repoRoot()
	if err != nil {
		t.Fatal(err)
	}
	test, _, _ := strings.Cut(t.Name(), "/")
	tr := &Transcripts{t: t, page: page, path: filepath.Join(root, page), pkg: pkg, test: test, updates: map[int]Update{}, rewrite: os.Getenv(UpdateVar) == "1"}
	p, err := ReadPage(tr.path)
	if err != nil {
		t.Fatal(err)
	}
	if tr.blocks, err = tr.mine(p); err != nil {
		t.Fatal(err)
	}
	if len(tr.blocks) == 0 {
		t.Fatalf("%s has no block marked <!-- example: transcript %s %s … -->", page, pkg, test)
	}
	t.Cleanup(tr.finish)
	return tr
}

// Replace makes Check read old as new in the commands and their output (a temporary folder as
// the page's folder, e.g. "/tmp/x/" as "").
func (tr *Transcripts) Replace(old, new string) {
	tr.replace = append(tr.replace, old, new)
}

// mine is the blocks of the test on p (read from its absolute path; each block named by the
// page's path from the repository root).
func (tr *Transcripts) mine(p *Page) ([]*Block, error) {
	var mine []*Block
	for _, b := range p.Blocks {
		b.Page = tr.page
		if b.Kind != "transcript" {
			continue
		}
		if pkg, test, err := TranscriptTest(b); err == nil && pkg == tr.pkg && test == tr.test {
			if len(b.Cmds) != 1 {
				return nil, fmt.Errorf("%s:%d: a transcript block shows one command", b.Page, b.Line)
			}
			mine = append(mine, b)
		}
	}
	return mine, nil
}

// Check compares the next block of the test with a run: the command it ran (args of
// `kubectl crdver`), what it printed (standard output and standard error as a terminal shows
// them, or what the block's marker says it shows) and its exit code (when the page shows
// "# exit N"). The output, without its plain progress lines, is shortened by the block's elide
// rules and compared after Mask.
func (tr *Transcripts) Check(args []string, output string, code int) {
	tr.t.Helper()
	if tr.next == len(tr.blocks) {
		tr.t.Errorf("%s shows %d transcript(s) of %s; the test has one more: kubectl crdver %s (add a block)", tr.page, len(tr.blocks), tr.test, strings.Join(args, " "))
		return
	}
	i := tr.next
	tr.next++
	c := tr.blocks[i].Cmds[0]
	r := strings.NewReplacer(tr.replace...)
	ran := r.Replace("kubectl crdver " + strings.Join(args, " "))
	if page := strings.Join(strings.Fields(c.Script()), " "); page != ran {
		tr.t.Errorf("%s: the page shows the command\n  %s\nthe test runs\n  %s\n(change the page's command line)", c.Label(), page, ran)
	}
	out := WithoutProgress(SplitLines(r.Replace(output)))
	if len(c.Block.Elide) > 0 {
		short, err := ApplyElisions(out, c.Block.Elide)
		if err != nil {
			tr.t.Errorf("%s: %v; the output:\n%s", c.Label(), err, strings.Join(out, "\n"))
			return
		}
		out = short
	}
	same := Mask(c.Shown) == Mask(out)
	exitOK := c.Exit < 0 || c.Exit == code
	if same && exitOK {
		return
	}
	if tr.rewrite {
		u := Update{Output: c.Shown, Exit: -1}
		if !same {
			u.Output = out
		}
		if c.Exit >= 0 {
			u.Exit = code
		}
		tr.updates[i] = u
		return
	}
	regen := fmt.Sprintf("%s=1 go test ./%s/ -run '^%s$'", UpdateVar, tr.pkg, tr.test)
	if !exitOK {
		tr.t.Errorf("%s: the page says exit %d, the command ends with %d (%s rewrites it)", c.Label(), c.Exit, code, regen)
	}
	if !same {
		tr.t.Errorf("%s: the page does not show what the test's run prints (%s rewrites it); first difference after masking (blanks removed):\n%s\n-page +real:\n%s",
			c.Label(), regen, MaskedDifference(c.Shown, out), cmp.Diff(c.Shown, out))
	}
}

// finish reports the blocks the test did not check and writes the updates.
func (tr *Transcripts) finish() {
	if tr.t.Failed() && tr.next < len(tr.blocks) {
		return // stopped before its transcripts: its own errors say why
	}
	for _, b := range tr.blocks[tr.next:] {
		tr.t.Errorf("%s:%d: a transcript of %s that the test did not check (it ran %d of the page's %d)", b.Page, b.Line, tr.test, tr.next, len(tr.blocks))
	}
	if len(tr.updates) == 0 {
		return
	}
	// Read again: another test may have rewritten the page's other blocks meanwhile.
	p, err := ReadPage(tr.path)
	if err != nil {
		tr.t.Fatal(err)
	}
	blocks, err := tr.mine(p)
	if err != nil || len(blocks) != len(tr.blocks) {
		tr.t.Fatalf("%s changed while the test ran: %v", tr.page, err)
	}
	updates := map[*Command]Update{}
	for i, u := range tr.updates {
		updates[blocks[i].Cmds[0]] = u
	}
	if err := p.Write(updates); err != nil {
		tr.t.Fatal(err)
	}
	// What was written reads back as what the runs printed.
	if p, err = ReadPage(tr.path); err == nil {
		blocks, err = tr.mine(p)
	}
	if err != nil {
		tr.t.Fatal(err)
	}
	for i, u := range tr.updates {
		if c := blocks[i].Cmds[0]; Mask(c.Shown) != Mask(u.Output) {
			tr.t.Errorf("%s: the rewritten block does not read back as the run's output:\n%s", c.Label(), MaskedDifference(c.Shown, u.Output))
		}
	}
	tr.t.Logf("rewrote %d transcript(s) of %s in %s", len(updates), tr.test, tr.page)
}

// repoRoot is the repository root (the folder of go.mod above the working folder) and the
// working folder from it.
func repoRoot() (root, pkg string, err error) {
	wd, err := os.Getwd()
	if err != nil {
		return "", "", err
	}
	for dir := wd; ; dir = filepath.Dir(dir) {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			rel, err := filepath.Rel(dir, wd)
			return dir, filepath.ToSlash(rel), err
		}
		if filepath.Dir(dir) == dir {
			return "", "", fmt.Errorf("no go.mod above %s", wd)
		}
	}
}
