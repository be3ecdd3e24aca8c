package main

import (
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestReferenceIsCurrent: docs/reference holds exactly what the commands generate (run
// `make docs` after changing a command, a flag or a help text).
func TestReferenceIsCurrent(t *testing.T) {
	dir := t.TempDir()
	if err := writeMarkdown(dir); err != nil {
		t.Fatal(err)
	}
	want := readDir(t, dir)
	got := readDir(t, "../../docs/reference")
	if len(want) < 10 {
		t.Fatalf("generated %d pages, want one per command", len(want))
	}
	for name, text := range want {
		if strings.Contains(text, "Auto generated") {
			t.Errorf("%s carries cobra's dated auto-generated line", name)
		}
		if home, _ := os.UserHomeDir(); home != "" && strings.Contains(text, home) {
			t.Errorf("%s names this machine's home directory %s", name, home)
		}
	}
	if diff := cmp.Diff(names(want), names(got)); diff != "" {
		t.Errorf("docs/reference pages (-generated +checked in); run make docs:\n%s", diff)
	}
	for name, text := range want {
		if g, ok := got[name]; ok && g != text {
			t.Errorf("docs/reference/%s differs from what the commands generate; run make docs:\n%s", name, cmp.Diff(text, g))
		}
	}
}

// TestReleaseFiles: the man pages (one per command) and the bash, zsh and fish completion
// scripts the release archives ship.
func TestReleaseFiles(t *testing.T) {
	dir := t.TempDir()
	if err := writeReleaseFiles(dir, time.Unix(1700000000, 0).UTC()); err != nil { // 2023-11-14
		t.Fatal(err)
	}
	man := readDir(t, filepath.Join(dir, "man"))
	md := readDir(t, "../../docs/reference")
	if len(man) != len(md) {
		t.Errorf("%d man pages for %d reference pages: %v", len(man), len(md), names(man))
	}
	page := man["kubectl-crdver-plan.1"]
	for _, want := range []string{`.TH "KUBECTL-CRDVER" "1" "Nov 2023"`, "--fail-on"} {
		if !strings.Contains(page, want) {
			t.Errorf("kubectl-crdver-plan.1 lacks %q", want)
		}
	}
	comp := readDir(t, filepath.Join(dir, "completions"))
	for file, want := range map[string]string{
		"kubectl-crdver.bash": "bash completion",
		"_kubectl-crdver":     "#compdef kubectl-crdver",
		"kubectl-crdver.fish": "fish completion",
	} {
		if !strings.Contains(comp[file], want) {
			t.Errorf("completions/%s lacks %q (%d bytes)", file, want, len(comp[file]))
		}
	}
}

func readDir(t *testing.T, dir string) map[string]string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		out[e.Name()] = string(b)
	}
	return out
}

func names(m map[string]string) []string {
	var out []string
	for n := range m {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// TestFrontHelpIsCurrent: the --help texts kubectl-crdver answers by itself
// (cmd/kubectl-crdver/help_texts.go) are what the commands give now (run `make docs` after
// changing a command, a flag or a help text); cmd/kubectl-crdver's TestFrontAnswersAsTheEngine
// runs both executables on them.
func TestFrontHelpIsCurrent(t *testing.T) {
	want, err := frontHelpSource()
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile("../../cmd/kubectl-crdver/help_texts.go")
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != string(want) {
		t.Errorf("cmd/kubectl-crdver/help_texts.go is not what the commands give; run make docs:\n%s", cmp.Diff(string(want), string(got)))
	}
	if !strings.Contains(string(want), `"migrate status": `) || !strings.Contains(string(want), "{{cache-dir}}") {
		t.Errorf("the generated texts lack a subcommand or the --cache-dir placeholder")
	}
}
