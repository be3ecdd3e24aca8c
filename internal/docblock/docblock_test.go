package docblock

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestMaskFleetLines: a fleet's lines of the clusters that ended compare equal in any order and
// with any count, plain progress lines (a slower run's) are ignored; a different verdict is not.
func TestMaskFleetLines(t *testing.T) {
	page := []string{
		"fleet: a: complete, exit 0 (0.4s; 1 of 2)",
		"fleet: b: refused, exit 1 (0.1s; 2 of 2)",
		"CLUSTER   EXIT",
	}
	real := []string{
		"fleet: 1/2 clusters finished, 1 clusters/s, ETA 1s",
		"fleet: b: refused, exit 1 (11.6s; 1 of 2)",
		"fleet: a: complete, exit 0 (0.3s; 2 of 2)",
		"CLUSTER EXIT",
	}
	if Mask(page) != Mask(real) {
		t.Errorf("masked differently:\n%s", MaskedDifference(page, real))
	}
	if got := WithoutProgress(real); len(got) != 3 || strings.Contains(got[0], "ETA") {
		t.Errorf("WithoutProgress: %q", got)
	}
	other := append([]string{}, real...)
	other[1] = "fleet: b: complete, exit 0 (0.1s; 1 of 2)"
	if Mask(page) == Mask(other) {
		t.Errorf("a different verdict masked as the same")
	}
	// The lines are ordered within a run of them, not across the text between.
	moved := []string{page[0], "CLUSTER EXIT", page[1]}
	if Mask(page) == Mask(moved) {
		t.Errorf("a fleet line moved past other text masked as the same")
	}
}

// recorder is a testing.TB that records what a Transcripts reports.
type recorder struct {
	testing.TB
	name     string
	errs     []string
	cleanups []func()
}

func (r *recorder) Helper()             {}
func (r *recorder) Name() string        { return r.name }
func (r *recorder) Failed() bool        { return len(r.errs) > 0 }
func (r *recorder) Cleanup(f func())    { r.cleanups = append(r.cleanups, f) }
func (r *recorder) Logf(string, ...any) {}
func (r *recorder) Errorf(format string, args ...any) {
	r.errs = append(r.errs, fmt.Sprintf(format, args...))
}
func (r *recorder) Fatal(args ...any)            { r.t().Fatal(args...) }
func (r *recorder) Fatalf(f string, args ...any) { r.t().Fatalf(f, args...) }
func (r *recorder) t() testing.TB                { return r.TB }

func (r *recorder) end() {
	for i := len(r.cleanups) - 1; i >= 0; i-- {
		r.cleanups[i]()
	}
}

const transcriptPage = "Intro.\n\n" +
	"<!-- example: transcript e2e/x TestX (why) -->\n" +
	"```console\n" +
	"$ kubectl crdver plan -f v2   # exit 1\n" +
	"fleet: a: breaking, exit 1 (0.1s; 1 of 1)\n" +
	"error: 1 of 1 clusters need something on 127.0.0.1:4000\n" +
	"```\n\n" +
	"<!-- example: transcript e2e/y TestX (another package's test) -->\n" +
	"```console\n" +
	"$ kubectl crdver version\n" +
	"v1\n" +
	"```\n\n" +
	"<!-- example: transcript e2e/x TestX (the second run)\n" +
	"     elide from /^Plan/ to /^error/ \"…\" -->\n" +
	"```console\n" +
	"$ kubectl crdver upgrade -f v2\n" +
	"…\n" +
	"error: stopped\n" +
	"```\n"

// transcriptRepo writes a repository with the page at docs/p.md and moves into its package
// folder e2e/x.
func transcriptRepo(t *testing.T) string {
	root := t.TempDir()
	for path, text := range map[string]string{"go.mod": "module x\n", "docs/p.md": transcriptPage, "e2e/x/x_test.go": "package x\n"} {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(root, path)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, path), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	t.Chdir(filepath.Join(root, "e2e", "x"))
	return filepath.Join(root, "docs", "p.md")
}

// TestTranscripts: the test's blocks of the page, and only its, are checked in order: the
// command, the output after the elide rules and the masks, the exit code; a block the test does
// not check is reported; with CRDVER_UPDATE_DOCS=1 what differs is rewritten.
func TestTranscripts(t *testing.T) {
	second := "Plan:\n  a lot\nerror: stopped\n"
	t.Run("same", func(t *testing.T) {
		transcriptRepo(t)
		r := &recorder{TB: t, name: "TestX/sub"}
		tr := OpenTranscripts(r, "docs/p.md")
		tr.Replace("/tmp/w/", "")
		tr.Check([]string{"plan", "-f", "/tmp/w/v2"}, "fleet: 2/3 clusters finished, 1 clusters/s, ETA 1s\nfleet: a: breaking, exit 1 (3.2s; 1 of 1)\nerror: 1 of 1 clusters need something on 127.0.0.1:39999\n", 1)
		tr.Check([]string{"upgrade", "-f", "/tmp/w/v2"}, second, 3)
		r.end()
		if len(r.errs) > 0 {
			t.Errorf("errors on runs the page shows: %q", r.errs)
		}
	})
	t.Run("different", func(t *testing.T) {
		transcriptRepo(t)
		r := &recorder{TB: t, name: "TestX"}
		tr := OpenTranscripts(r, "docs/p.md")
		tr.Check([]string{"plan", "-f", "v3"}, "fleet: a: safe, exit 0 (0.1s; 1 of 1)\n", 0)
		r.end()
		want := []string{"the page shows the command", "the page says exit 1, the command ends with 0", "does not show what the test's run prints"}
		if len(r.errs) != len(want) {
			t.Fatalf("errors: %q, want %d", r.errs, len(want))
		}
		for i, w := range want {
			if !strings.Contains(r.errs[i], w) {
				t.Errorf("error %d: %q, want %q", i, r.errs[i], w)
			}
		}
		if !strings.Contains(r.errs[2], "CRDVER_UPDATE_DOCS=1 go test ./e2e/x/ -run '^TestX$'") {
			t.Errorf("the error does not say how to regenerate: %s", r.errs[2])
		}
	})
	t.Run("unchecked", func(t *testing.T) {
		transcriptRepo(t)
		r := &recorder{TB: t, name: "TestX"}
		OpenTranscripts(r, "docs/p.md").Check([]string{"plan", "-f", "v2"}, "fleet: a: breaking, exit 1 (0.1s; 1 of 1)\nerror: 1 of 1 clusters need something on 127.0.0.1:1\n", 1)
		r.end()
		if len(r.errs) != 1 || !strings.Contains(r.errs[0], "docs/p.md:18: a transcript of TestX that the test did not check") {
			t.Errorf("errors: %q", r.errs)
		}
	})
	t.Run("update", func(t *testing.T) {
		page := transcriptRepo(t)
		t.Setenv(UpdateVar, "1")
		r := &recorder{TB: t, name: "TestX"}
		tr := OpenTranscripts(r, "docs/p.md")
		tr.Check([]string{"plan", "-f", "v2"}, "fleet: a: safe, exit 0 (0.1s; 1 of 1)\n", 0)
		tr.Check([]string{"upgrade", "-f", "v2"}, "Plan:\nerror: stopped for good\n", 1)
		r.end()
		if len(r.errs) > 0 {
			t.Fatalf("errors: %q", r.errs)
		}
		b, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		want := strings.NewReplacer(
			"$ kubectl crdver plan -f v2   # exit 1\nfleet: a: breaking, exit 1 (0.1s; 1 of 1)\nerror: 1 of 1 clusters need something on 127.0.0.1:4000\n",
			"$ kubectl crdver plan -f v2   # exit 0\nfleet: a: safe, exit 0 (0.1s; 1 of 1)\n",
			"…\nerror: stopped\n", "…\nerror: stopped for good\n").Replace(transcriptPage)
		if string(b) != want {
			t.Errorf("the page after the update:\n%s\nwant:\n%s", b, want)
		}
	})
}
