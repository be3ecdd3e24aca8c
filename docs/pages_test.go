package docs

import (
	"io/fs"
	"path/filepath"
	"sort"
	"strings"
)

// The markers of the console examples and what they mean: internal/docblock (the parser, the
// elide rules and the masks that docs/ and the tests with transcripts share).

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
