package docs

import (
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"unicode"
)

// pages lists README.md and every markdown file under docs/, relative to the repository root.
func pages(t *testing.T) []string {
	t.Helper()
	list := []string{"README.md"}
	err := filepath.WalkDir("docs", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && strings.HasSuffix(p, ".md") {
			list = append(list, filepath.ToSlash(p))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(list[1:])
	return list
}

var (
	fenceRE = regexp.MustCompile("(?ms)^```.*?^```[^\n]*$")
	codeRE  = regexp.MustCompile("`[^`\n]*`")
	linkRE  = regexp.MustCompile(`\]\(([^)\s]+)(?:\s+"[^"]*")?\)`)
	refRE   = regexp.MustCompile(`(?m)^\[[^\]]+\]:\s*(\S+)`)
)

// prose is the text of a page without its fenced blocks and code spans, where no link is one.
func prose(text string) string {
	text = fenceRE.ReplaceAllStringFunc(text, func(s string) string {
		return strings.Repeat("\n", strings.Count(s, "\n"))
	})
	return codeRE.ReplaceAllString(text, "")
}

// anchors are the ids GitHub gives the headings of a markdown page: the heading's text in lower
// case, without punctuation, blanks as hyphens; a repeated id gets -1, -2, ….
func anchors(text string) map[string]bool {
	ids := map[string]bool{}
	seen := map[string]int{}
	for _, line := range strings.Split(fenceRE.ReplaceAllString(text, ""), "\n") {
		if !strings.HasPrefix(line, "#") {
			continue
		}
		title := strings.TrimLeft(line, "#")
		if title == "" || title[0] != ' ' {
			continue
		}
		id := slug(strings.TrimSpace(title))
		if n := seen[id]; n > 0 {
			ids[id+"-"+itoa(n)] = true
		} else {
			ids[id] = true
		}
		seen[id]++
	}
	return ids
}

func slug(title string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(title) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

func itoa(n int) string {
	s := ""
	for ; n > 0; n /= 10 {
		s = string(rune('0'+n%10)) + s
	}
	return s
}

// TestDocLinks fails when a relative link of README.md or of a page under docs/ names a file
// that does not exist, or a heading (#anchor) that the page it names does not have.
func TestDocLinks(t *testing.T) {
	t.Chdir("..")
	list := pages(t)
	texts := map[string]string{}
	for _, p := range list {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		texts[p] = string(b)
	}
	checked := 0
	for _, p := range list {
		body := prose(texts[p])
		var targets []string
		for _, m := range linkRE.FindAllStringSubmatch(body, -1) {
			targets = append(targets, m[1])
		}
		for _, m := range refRE.FindAllStringSubmatch(body, -1) {
			targets = append(targets, m[1])
		}
		for _, target := range targets {
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			checked++
			file, anchor, _ := strings.Cut(target, "#")
			dest := p
			if file != "" {
				dest = path.Clean(path.Join(path.Dir(p), file))
			}
			if strings.HasPrefix(dest, "../") {
				t.Errorf("%s: link %q leaves the repository", p, target)
				continue
			}
			if _, err := os.Stat(dest); err != nil {
				t.Errorf("%s: link %q: %s does not exist", p, target, dest)
				continue
			}
			if anchor == "" {
				continue
			}
			text, ok := texts[dest]
			if !ok {
				if !strings.HasSuffix(dest, ".md") {
					t.Errorf("%s: link %q: an anchor into %s, which is not a page", p, target, dest)
					continue
				}
				b, err := os.ReadFile(dest)
				if err != nil {
					t.Fatal(err)
				}
				text = string(b)
			}
			if !anchors(text)[anchor] {
				t.Errorf("%s: link %q: %s has no heading #%s", p, target, dest, anchor)
			}
		}
	}
	if checked == 0 {
		t.Fatal("no relative link found: is the link pattern still right?")
	}
}

// TestSlug pins the heading ids to GitHub's, for the forms the pages use.
func TestSlug(t *testing.T) {
	for title, want := range map[string]string{
		"Every CRD at once: `migrate --all`":                                       "every-crd-at-once-migrate---all",
		"A removed version that managedFields still name (cert-manager 1.6 → 1.7)": "a-removed-version-that-managedfields-still-name-cert-manager-16--17",
		"Kubernetes version (`--kube-version`)":                                    "kubernetes-version---kube-version",
		"Limits: what plan cannot see":                                             "limits-what-plan-cannot-see",
	} {
		if got := slug(title); got != want {
			t.Errorf("slug(%q) = %q, want %q", title, got, want)
		}
	}
	ids := anchors("# A\n## Exit codes\n```\n# not a heading\n```\n## Exit codes\n")
	for _, id := range []string{"a", "exit-codes", "exit-codes-1"} {
		if !ids[id] {
			t.Errorf("anchors: no %q in %v", id, ids)
		}
	}
	if ids["not-a-heading"] {
		t.Error("anchors: a line of a fenced block taken as a heading")
	}
}
