package printers

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"

	"github.com/crdver/kubectl-crdver/internal/textout"
	"github.com/crdver/kubectl-crdver/ownership"
)

// Lines prints each string on a line of its own.
func Lines(w io.Writer, lines []string) error { return textout.Lines(w, lines) }

// Notes prints each note on a line of its own, "note: " first.
func Notes(w io.Writer, notes []string) {
	for _, n := range notes {
		fmt.Fprintf(w, "note: %s\n", n)
	}
}

// WithManagedFields adds the census to a report's JSON/YAML as a last key "managedFields"
// (nothing for CRDs read from files). The report's own keys keep their order.
func WithManagedFields(report any, c *ownership.Census) (any, error) {
	if c == nil {
		return report, nil
	}
	r, err := json.Marshal(report)
	if err != nil {
		return nil, err
	}
	mf, err := json.Marshal(c)
	if err != nil {
		return nil, err
	}
	r = bytes.TrimRight(r, " \n")
	if len(r) < 2 || r[len(r)-1] != '}' {
		return report, nil
	}
	sep := ","
	if bytes.Equal(bytes.TrimSpace(r[:len(r)-1]), []byte("{")) {
		sep = ""
	}
	out := append(append(append(append([]byte{}, r[:len(r)-1]...), sep+`"managedFields":`...), mf...), '}')
	return json.RawMessage(out), nil
}
