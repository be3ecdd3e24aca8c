// Package golden compares a test's output with a file under the test package's
// testdata/golden folder, or rewrites the file when the tests run with -update:
//
//	go test ./printers/ -run TestX -update
//
// It is imported by tests only (the -update flag is registered with the standard flag set).
package golden

import (
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// Update is the -update flag: rewrite the golden files instead of comparing with them.
var Update = flag.Bool("update", false, "rewrite the golden files under testdata/golden")

// Dir is the folder of the golden files, relative to the test package.
var Dir = filepath.Join("testdata", "golden")

// Check compares got with Dir/name, or rewrites the file with -update.
func Check(t testing.TB, name, got string) {
	t.Helper()
	path := filepath.Join(Dir, name)
	if *Update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("reading golden file (run the test with -update to create it): %v", err)
	}
	if diff := cmp.Diff(string(want), got); diff != "" {
		t.Errorf("output differs from %s (-want +got; running the test with -update rewrites it):\n%s", path, diff)
	}
}
