package printers

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/crdver/kubectl-crdver/crdsource"
	"github.com/crdver/kubectl-crdver/manifest"
)

// Skipped counts the documents a command skipped, and keeps the first few to name them.
type Skipped struct {
	// What says why they were skipped, e.g. "not a CustomResourceDefinition"; One says it of
	// one document: "is not a CustomResourceDefinition".
	What, One string
	// N is how many were skipped.
	N     int
	names []string
	// FirstWhy says why the first was skipped: "x.yaml (document 1): v1 Pod is not a …".
	FirstWhy string
}

const skipNamesKept = 1000

// Add counts d (crdsource.Source.Skipped's signature).
func (l *Skipped) Add(d manifest.Document) {
	if l.N == 0 {
		l.FirstWhy = fmt.Sprintf("%s: %s %s", d.Where(), crdsource.Describe(d), l.One)
	}
	l.N++
	if len(l.names) < skipNamesKept {
		l.names = append(l.names, fmt.Sprintf("%s: %s", d.Where(), describeObject(d)))
	}
}

// Report prints the summary line (and, verbose, one line per skipped document); listedBy names
// what lists them ("-v" on the command line).
func (l *Skipped) Report(w io.Writer, verbose bool, listedBy string) error {
	if l.N == 0 {
		return nil
	}
	var b strings.Builder
	hint := " (" + listedBy + " lists them)"
	if verbose {
		hint = ":"
	}
	fmt.Fprintf(&b, "skipped %s: %s%s\n", Plural(l.N, "document"), l.What, hint)
	if verbose {
		for _, n := range l.names {
			fmt.Fprintf(&b, "  %s\n", n)
		}
		if l.N > len(l.names) {
			fmt.Fprintf(&b, "  … and %d more\n", l.N-len(l.names))
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// describeObject names a document's object: apiVersion, kind, and namespace/name when present.
func describeObject(d manifest.Document) string {
	what := crdsource.Describe(d)
	var meta struct {
		Metadata struct {
			Name      string `json:"name"`
			Namespace string `json:"namespace"`
		} `json:"metadata"`
	}
	if err := json.Unmarshal(d.JSON, &meta); err == nil && meta.Metadata.Name != "" {
		name := meta.Metadata.Name
		if meta.Metadata.Namespace != "" {
			name = meta.Metadata.Namespace + "/" + name
		}
		what += " " + name
	}
	return what
}
