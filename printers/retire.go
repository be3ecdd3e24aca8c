package printers

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/crdver/kubectl-crdver/ownership"
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
	printBudget(w, p.Budget, "  ")
	if len(p.Writers) > 0 {
		fmt.Fprintf(w, "\nField managers holding entries of %s (most recent first):\n", p.Version)
		if err := WritersTable(p.Writers).Print(w, noHeaders); err != nil {
			return err
		}
	}
	fmt.Fprintln(w, "\nSteps:")
	t := &Table{Header: []string{"step", "state", "detail"}}
	if !wide {
		t.MaxWidth = TerminalWidth
	}
	for i, s := range p.Steps {
		t.Add(fmt.Sprintf("%d. %s", i+1, s.Name), s.State, s.Detail)
	}
	return t.Print(w, noHeaders)
}

// RetireResult prints what retire did, step by step.
func RetireResult(w io.Writer, r *retire.Result, wide, noHeaders bool) {
	fmt.Fprintln(w, "\nResult:")
	t := &Table{Header: []string{"step", "state", "detail"}}
	if !wide {
		t.MaxWidth = TerminalWidth
	}
	for i, s := range r.Plan.Steps {
		t.Add(fmt.Sprintf("%d. %s", i+1, s.Name), s.State, s.Detail)
	}
	_ = t.Print(w, noHeaders)
	if len(r.WritersSinceStart) > 0 {
		fmt.Fprintf(w, "\nManagers that wrote %s after this run began:\n", r.Plan.Version)
		_ = WritersTable(r.WritersSinceStart).Print(w, noHeaders)
	}
	for _, p := range r.Problems {
		fmt.Fprintf(w, "problem: %s\n", p)
	}
}

// WritersTable is one row per field manager: its operation, objects and last write.
func WritersTable(ws []ownership.Writer) *Table {
	t := &Table{Header: []string{"manager", "operation", "objects", "last write"}}
	for _, m := range ws {
		op := m.Operation
		if m.Subresource != "" {
			op += " (" + m.Subresource + ")"
		}
		last := "-"
		if m.LastWrite != nil {
			last = m.LastWrite.UTC().Format(time.RFC3339)
		}
		t.Add(m.Manager, op, strconv.FormatInt(m.Objects, 10), last)
	}
	return t
}
