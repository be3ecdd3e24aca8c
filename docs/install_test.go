package docs

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestREADMESaysWhereTheBinariesGo: a newcomer who runs go install or make install must learn
// from the README that the Go bin folder goes on PATH (else `kubectl crdver` is an unknown
// command), and the Makefile's note must say so too.
func TestREADMESaysWhereTheBinariesGo(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	install, _, _ := strings.Cut(string(b), "## A first run")
	for _, want := range []string{"$(go env GOPATH)/bin", `export PATH="$(go env GOPATH)/bin:$PATH"`, `unknown command "crdver"`, "`make install` says so"} {
		if !strings.Contains(install, want) {
			t.Errorf("README's install section lacks %q", want)
		}
	}
	mk, err := os.ReadFile(filepath.Join("..", "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(mk), "add $(GOBIN) to your PATH") {
		t.Errorf("make install no longer says to put $(GOBIN) on PATH, which the README promises")
	}
}
