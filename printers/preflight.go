package printers

import (
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/crdver/kubectl-crdver/preflight"
)

// preflightShown bounds the objects a human report lists per kind of finding (the JSON report
// lists up to preflight's MaxListed; the counts are complete).
const preflightShown = 20

// printPreflight prints a preflight report for people: counts, the objects (at most
// preflightShown of each kind), what is unknown, and how to keep the data.
func printPreflight(w io.Writer, r *preflight.Report, h Human) error {
	noHeaders := h.NoHeaders
	fmt.Fprintf(w, "\nPreflight of %s at %s (conversion %s): %s read at %s", r.CRD, r.Target, r.Strategy, Plural(int(r.Objects), "object"), r.Target)
	if len(r.Compared) > 0 {
		fmt.Fprintf(w, ", compared with %s", strings.Join(r.Compared, ", "))
	}
	fmt.Fprintln(w)
	for _, n := range r.NotNeeded {
		fmt.Fprintf(w, "  %s\n", IndentWrap("not needed: "+n, TerminalWidth-4, 4))
	}
	if r.AddedCount > 0 {
		var objs []string
		for i, a := range r.Added {
			if i == 5 {
				objs = append(objs, fmt.Sprintf("and %d more (%s lists up to %d)", r.AddedCount-5, h.all(), len(r.Added)))
				break
			}
			fields := slices.Clone(a.Added)
			for _, p := range a.Normalised {
				fields = append(fields, p+" (normalised)")
			}
			objs = append(objs, objectName(a.Namespace, a.Name)+" ("+shorten(strings.Join(fields, ", "), 80)+")")
		}
		fmt.Fprintf(w, "  %s\n", IndentWrap(fmt.Sprintf("not a loss: the conversion of %s adds fields or normalises values: %s", Plural(int(r.AddedCount), "object"), strings.Join(objs, "; ")), TerminalWidth-4, 4))
	}
	if r.Safe() {
		fmt.Fprintf(w, "  nothing is lost or refused by rewriting them at %s\n", r.Target)
		return nil
	}
	if r.LossCount > 0 {
		fmt.Fprintf(w, "  %s would lose fields:\n", Plural(int(r.LossCount), "object"))
		t := &Table{Header: []string{"object", "held at", "fields lost"}, MaxWidth: TerminalWidth}
		for i, l := range r.Losses {
			if i == preflightShown {
				break
			}
			t.Add(objectName(l.Namespace, l.Name), l.HeldAt, shorten(strings.Join(l.Fields, ", "), 80))
		}
		if err := t.Print(w, noHeaders); err != nil {
			return err
		}
		if r.LossCount > int64(min(len(r.Losses), preflightShown)) {
			fmt.Fprintf(w, "  … and %d more (%s lists up to %d)\n", r.LossCount-int64(min(len(r.Losses), preflightShown)), h.all(), len(r.Losses))
		}
	}
	if r.RejectedCount > 0 {
		fmt.Fprintf(w, "  %s would be rejected by a write at %s:\n", Plural(int(r.RejectedCount), "object"), r.Target)
		t := &Table{Header: []string{"object", "error"}, MaxWidth: TerminalWidth}
		for i, x := range r.Rejected {
			if i == preflightShown {
				break
			}
			t.Add(objectName(x.Namespace, x.Name), shorten(strings.Join(x.Errors, "; "), 90))
		}
		if err := t.Print(w, noHeaders); err != nil {
			return err
		}
		if r.RejectedCount > int64(min(len(r.Rejected), preflightShown)) {
			fmt.Fprintf(w, "  … and %d more (%s lists up to %d)\n", r.RejectedCount-int64(min(len(r.Rejected), preflightShown)), h.all(), len(r.Rejected))
		}
	}
	if r.OwnershipLossCount > 0 {
		fmt.Fprintf(w, "  %s would lose field managers through a write at %s (the API server's dry run of it):\n", Plural(int(r.OwnershipLossCount), "object"), r.Target)
		t := &Table{Header: []string{"object", "managers lost"}, MaxWidth: TerminalWidth}
		for i, x := range r.OwnershipLosses {
			if i == preflightShown {
				break
			}
			lost := strings.Join(x.Lost, ", ")
			if x.Reset {
				lost = "all: " + lost
			}
			t.Add(objectName(x.Namespace, x.Name), shorten(lost, 240))
		}
		if err := t.Print(w, noHeaders); err != nil {
			return err
		}
		if r.OwnershipLossCount > int64(min(len(r.OwnershipLosses), preflightShown)) {
			fmt.Fprintf(w, "  … and %d more (%s lists up to %d)\n", r.OwnershipLossCount-int64(min(len(r.OwnershipLosses), preflightShown)), h.all(), len(r.OwnershipLosses))
		}
	}
	for _, u := range r.Unknown {
		fmt.Fprintf(w, "  %s\n", IndentWrap("unknown: "+u, TerminalWidth-4, 4))
	}
	fmt.Fprintln(w, "  To keep the data:")
	for _, a := range preflight.Advice(r) {
		if strings.HasPrefix(a, "  ") {
			fmt.Fprintf(w, "  %s\n", a) // a command: one line, to copy
			continue
		}
		fmt.Fprintf(w, "  %s\n", IndentWrap(a, TerminalWidth-4, 4))
	}
	return nil
}

func objectName(ns, name string) string {
	if ns == "" {
		return name
	}
	return ns + "/" + name
}

// shorten cuts s to n runes with "…".
func shorten(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}
