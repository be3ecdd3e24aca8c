package atomicfile

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// WriteFile replaces the content and sets the permissions asked for (a file's own mode is
// what convert --write passes, to keep it); nothing is left beside the file.
func TestWriteFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "release.yaml")
	if err := os.WriteFile(path, []byte("old\n"), 0o640); err != nil {
		t.Fatal(err)
	}
	if err := WriteFile(path, []byte("new\n"), 0o640); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	st, serr := os.Stat(path)
	if err != nil || serr != nil || string(b) != "new\n" || st.Mode().Perm() != 0o640 {
		t.Fatalf("content %q (%v), mode %v (%v); want new, 0640", b, err, st.Mode().Perm(), serr)
	}
	if err := WriteFile(filepath.Join(dir, "checkpoint.json"), []byte("{}"), 0o600); err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(filepath.Join(dir, "checkpoint.json")); err != nil || st.Mode().Perm() != 0o600 {
		t.Errorf("a new file: %v %v, want 0600", st, err)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 2 {
		t.Errorf("the folder holds %d entries, want the 2 files", len(entries))
	}
}

// A new content is invisible until Commit; Close without Commit throws it away and leaves the
// old file; what a killed process left is listed by Temporaries and removed by Clean.
func TestCreateCommitClose(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "backup.yaml")
	if err := os.WriteFile(path, []byte("old\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := Create(path, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write([]byte("half")); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(path); string(b) != "old\n" {
		t.Errorf("before Commit the path holds %q", b)
	}
	if left, err := Temporaries(path); err != nil || len(left) != 1 {
		t.Errorf("while writing: temporaries %v %v, want one", left, err)
	}
	f.Close()
	if b, _ := os.ReadFile(path); string(b) != "old\n" {
		t.Errorf("after Close without Commit the path holds %q", b)
	}
	if left, _ := Temporaries(path); len(left) != 0 {
		t.Errorf("Close left %v", left)
	}
	if err := f.Commit(); err == nil {
		t.Error("Commit after Close succeeded")
	}

	// A process killed while writing leaves its temporary file; the next writer's Commit
	// does not see it, Clean removes it.
	killed, err := Create(path, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := killed.Write([]byte("killed")); err != nil {
		t.Fatal(err)
	}
	killed.f.Close() // as a SIGKILL: no Commit, no Close
	g, err := Create(path, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := g.Write([]byte("new\n")); err != nil {
		t.Fatal(err)
	}
	if err := g.Commit(); err != nil {
		t.Fatal(err)
	}
	g.Close()
	if b, _ := os.ReadFile(path); string(b) != "new\n" {
		t.Errorf("after Commit the path holds %q", b)
	}
	if left, _ := Temporaries(path); len(left) != 1 || left[0] != killed.f.Name() {
		t.Errorf("temporaries %v, want the killed writer's %s", left, killed.f.Name())
	}
	if err := Clean(path); err != nil {
		t.Fatal(err)
	}
	if left, _ := Temporaries(path); len(left) != 0 {
		t.Errorf("after Clean: %v", left)
	}
	if b, _ := os.ReadFile(path); string(b) != "new\n" {
		t.Errorf("Clean changed the file: %q", b)
	}
}

// A Commit that cannot rename (the folder is gone) reports it and leaves nothing behind.
func TestCommitFails(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "gone")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "x")
	f, err := Create(path, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	if err := f.Commit(); err == nil {
		t.Error("Commit into a removed folder succeeded")
	}
}

// The one atomic writer: no product code (everything outside the test helpers and hack/)
// renames a file into place but this package, so every file kubectl-crdver replaces —
// checkpoints, upgrade's state and backup, the preflight's evidence, the manifests convert
// --write rewrites — is synced before its rename and its folder after.
func TestOnlyWriter(t *testing.T) {
	root := filepath.Join("..", "..")
	skip := map[string]bool{".git": true, "hack": true, "testdata": true, "e2e": true,
		filepath.Join("internal", "testenv"): true, filepath.Join("internal", "testwebhook"): true, filepath.Join("internal", "testca"): true,
		filepath.Join("internal", "atomicfile"): true}
	var renames []string
	files := 0
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		if d.IsDir() {
			if skip[rel] || strings.HasPrefix(d.Name(), ".") && rel != "." {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		files++
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			return err
		}
		ast.Inspect(f, func(n ast.Node) bool {
			sel, ok := n.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			if id, ok := sel.X.(*ast.Ident); ok && id.Name == "os" && (sel.Sel.Name == "Rename" || sel.Sel.Name == "Link") {
				renames = append(renames, fset.Position(sel.Pos()).String())
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files < 100 {
		t.Fatalf("read %d Go files: not the repository", files)
	}
	if len(renames) > 0 {
		t.Errorf("files renamed into place outside internal/atomicfile (use atomicfile.WriteFile or Create/Commit):\n%s", strings.Join(renames, "\n"))
	}
}
