package plugin

import (
	"fmt"
	"io"
	"strings"

	"github.com/crdver/kubectl-crdver/retire"
)

// printRetirePlan prints retire's plan; the steps' details wrap to fit the terminal (in full
// with -o wide).
func printRetirePlan(w io.Writer, p *retire.Plan, wide, noHeaders bool) error {
	fmt.Fprintf(w, "Retire %s of %s\n", p.Version, p.CRD)
	fmt.Fprintf(w, "  target version:   %s\n", p.Target)
	fmt.Fprintf(w, "  storage version:  %s\n", p.StorageVersion)
	fmt.Fprintf(w, "  storedVersions:   [%s]\n", strings.Join(p.StoredVersions, " "))
	fmt.Fprintf(w, "  objects:          %d, %d with managedFields entries of %s\n", p.Objects, p.EntryObjects, p.Version)
	if p.ManagedBy != "" {
		fmt.Fprintf(w, "  managed by:       %s\n", p.ManagedBy)
	}
	if len(p.Writers) > 0 {
		fmt.Fprintf(w, "\nField managers holding entries of %s (most recent first):\n", p.Version)
		if err := writersTable(p.Writers).print(w, noHeaders); err != nil {
			return err
		}
	}
	fmt.Fprintln(w, "\nSteps:")
	t := &table{header: []string{"step", "state", "detail"}}
	if !wide {
		t.maxWidth = terminalWidth
	}
	for i, s := range p.Steps {
		t.add(fmt.Sprintf("%d. %s", i+1, s.Name), s.State, s.Detail)
	}
	return t.print(w, noHeaders)
}

func printRetireResult(w io.Writer, r *retire.Result, wide, noHeaders bool) {
	fmt.Fprintln(w, "\nResult:")
	t := &table{header: []string{"step", "state", "detail"}}
	if !wide {
		t.maxWidth = terminalWidth
	}
	for i, s := range r.Plan.Steps {
		t.add(fmt.Sprintf("%d. %s", i+1, s.Name), s.State, s.Detail)
	}
	_ = t.print(w, noHeaders)
	if len(r.WritersSinceStart) > 0 {
		fmt.Fprintf(w, "\nManagers that wrote %s after this run began:\n", r.Plan.Version)
		_ = writersTable(r.WritersSinceStart).print(w, noHeaders)
	}
	for _, p := range r.Problems {
		fmt.Fprintf(w, "problem: %s\n", p)
	}
}
