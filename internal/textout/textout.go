// Package textout prints the outputs that both executables print the same way: reports as
// JSON or YAML (-o json|yaml) and lists one item a line. It depends only on the standard
// library and sigs.k8s.io/yaml, so that the small kubectl-crdver front binary can use it
// (printers.Data and printers.Lines are these functions).
package textout

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"sigs.k8s.io/yaml"
)

// Data prints report as indented JSON and a newline, or, with asYAML, as YAML converted from
// that JSON.
func Data(w io.Writer, report any, asYAML bool) error {
	js, err := json.MarshalIndent(report, "", "  ")
	if err != nil {
		return err
	}
	if asYAML {
		y, err := yaml.JSONToYAML(js)
		if err != nil {
			return err
		}
		_, err = w.Write(y)
		return err
	}
	_, err = fmt.Fprintf(w, "%s\n", js)
	return err
}

// Lines prints each string on a line of its own, in one write.
func Lines(w io.Writer, lines []string) error {
	var b strings.Builder
	for _, l := range lines {
		b.WriteString(l)
		b.WriteByte('\n')
	}
	_, err := io.WriteString(w, b.String())
	return err
}
