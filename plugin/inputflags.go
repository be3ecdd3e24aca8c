package plugin

import (
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/crdver/kubectl-crdver/crdsource"
)

// inputFlags are the flags about reading inputs that several commands share: -R, -v and
// --strict-kinds.
type inputFlags struct {
	Recursive   bool
	Verbose     bool
	StrictKinds bool
}

func addInputFlags(cmd *cobra.Command, strictKindsHelp string) *inputFlags {
	f := &inputFlags{}
	cmd.Flags().BoolVarP(&f.Recursive, "recursive", "R", false, "Read the directories given with -f recursively, like kubectl -R")
	cmd.Flags().BoolVarP(&f.Verbose, "verbose", "v", false, "List the skipped documents on stderr")
	cmd.Flags().BoolVar(&f.StrictKinds, "strict-kinds", false, strictKindsHelp)
	return f
}

// skipList counts the documents a command skipped, and keeps the first few to name them.
type skipList struct {
	what string // why they were skipped, e.g. "not a CustomResourceDefinition"
	// one says it of one document: "is not a CustomResourceDefinition".
	one   string
	n     int
	names []string
	// firstWhy says why the first was skipped: "x.yaml (document 1): v1 Pod is not a …".
	firstWhy string
}

const skipNamesKept = 1000

func (l *skipList) add(d Document) {
	if l.n == 0 {
		l.firstWhy = fmt.Sprintf("%s: %s %s", d.Where(), crdsource.Describe(d), l.one)
	}
	l.n++
	if len(l.names) < skipNamesKept {
		l.names = append(l.names, fmt.Sprintf("%s: %s", d.Where(), describeObject(d)))
	}
}

// report prints the summary line on stderr (and, verbose, one line per skipped document).
func (l *skipList) report(w io.Writer, verbose bool) error {
	if l.n == 0 {
		return nil
	}
	var b strings.Builder
	hint := " (-v lists them)"
	if verbose {
		hint = ":"
	}
	fmt.Fprintf(&b, "skipped %s: %s%s\n", plural(l.n, "document"), l.what, hint)
	if verbose {
		for _, n := range l.names {
			fmt.Fprintf(&b, "  %s\n", n)
		}
		if l.n > len(l.names) {
			fmt.Fprintf(&b, "  … and %d more\n", l.n-len(l.names))
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// describeObject names a document's object: apiVersion, kind, and namespace/name when present.
func describeObject(d Document) string {
	what := crdsource.Describe(d)
	var meta struct {
		Metadata struct {
			Name      string `json:"name"`
			Namespace string `json:"namespace"`
		} `json:"metadata"`
	}
	if err := jsonUnmarshalHead(d.JSON, &meta); err == nil && meta.Metadata.Name != "" {
		name := meta.Metadata.Name
		if meta.Metadata.Namespace != "" {
			name = meta.Metadata.Namespace + "/" + name
		}
		what += " " + name
	}
	return what
}
