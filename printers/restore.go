package printers

import (
	"fmt"
	"io"
	"regexp"
	"slices"
	"strings"

	"github.com/crdver/kubectl-crdver/restore"
)

// printRestoreReport prints one line per backup document (object and backed-up version) that
// is not unchanged (a backup of a whole cluster is mostly unchanged objects: they are counted,
// and -o json lists them), then the fields no served version holds and a count per outcome.
func printRestoreReport(w io.Writer, r *restore.Report, noHeaders bool) error {
	t := &Table{Header: []string{"object", "backup version", "written at", "outcome", "fields"}}
	for _, x := range r.Objects {
		if x.State == restore.StateUnchanged && len(x.NotHeld) == 0 {
			continue
		}
		name := x.Name
		if x.Namespace != "" {
			name = x.Namespace + "/" + name
		}
		from := x.APIVersion
		if i := strings.LastIndex(from, "/"); i >= 0 {
			from = from[i+1:]
		}
		t.Add(strings.ToLower(x.Kind)+" "+name, from, Dash(x.Version), restoreOutcome(x, r.DryRun), restoreFields(x))
	}
	if len(t.Rows) > 0 {
		t.MaxWidth = TerminalWidth
		t.WrapLastColumn(noHeaders)
		if err := t.Print(w, noHeaders); err != nil {
			return err
		}
		fmt.Fprintln(w)
	}
	var notHeld []string
	for _, x := range r.Objects {
		if len(x.NotHeld) > 0 {
			name := x.Name
			if x.Namespace != "" {
				name = x.Namespace + "/" + name
			}
			notHeld = append(notHeld, fmt.Sprintf("  %s %s: %s", strings.ToLower(x.Kind), name, compactPaths(x.NotHeld)))
		}
	}
	if len(notHeld) > 0 {
		fmt.Fprintln(w, "Fields no served version holds (in the backup, not in the cluster):")
		for _, l := range notHeld {
			fmt.Fprintln(w, l)
		}
		fmt.Fprintln(w)
	}
	var owners []string
	for _, x := range r.Objects {
		if len(x.LostManagers) > 0 {
			name := x.Name
			if x.Namespace != "" {
				name = x.Namespace + "/" + name
			}
			all := ""
			if x.ManagersReset {
				all = "all: "
			}
			owners = append(owners, fmt.Sprintf("  %s %s: %s%s", strings.ToLower(x.Kind), name, all, strings.Join(x.LostManagers, ", ")))
		}
	}
	if len(owners) > 0 {
		verb := "drop"
		if r.DryRun {
			verb = "would drop"
		}
		fmt.Fprintf(w, "Field managers the writes %s (managedFields entries, as the API server answers the write):\n", verb)
		for _, l := range owners {
			fmt.Fprintln(w, l)
		}
		fmt.Fprintln(w)
	}
	var counts []string
	for _, s := range []string{restore.StateRestored, restore.StateRecreated, restore.StateUnchanged, restore.StateConflict, restore.StateMissing, restore.StateNotHeld, restore.StateFailed} {
		if n := r.Counts[s]; n > 0 {
			counts = append(counts, fmt.Sprintf("%d %s", n, restoreOutcome(restore.Outcome{State: s}, r.DryRun)))
		}
	}
	what := "Restore"
	if r.DryRun {
		what = "Restore (dry run)"
	}
	_, err := fmt.Fprintf(w, "%s: %s of %d backup documents.\n", what, Dash(strings.Join(counts, ", ")), len(r.Objects))
	return err
}

func restoreOutcome(x restore.Outcome, dry bool) string {
	s := x.State
	if dry {
		switch s {
		case restore.StateRestored:
			s = "would restore"
		case restore.StateRecreated:
			s = "would re-create"
		}
	}
	return s
}

func restoreFields(x restore.Outcome) string {
	switch x.State {
	case restore.StateRestored:
		s := compactPaths(x.Restored)
		if len(x.Overwritten) > 0 {
			s = strings.TrimPrefix(s+"; overwritten: "+compactPaths(x.Overwritten), "; ")
		}
		return s
	case restore.StateRecreated:
		return fmt.Sprintf("%d fields", len(x.Restored))
	case restore.StateUnchanged:
		return "-"
	case restore.StateNotHeld:
		return "not held: " + compactPaths(x.NotHeld)
	}
	return x.Reason
}

var restoreListIndex = regexp.MustCompile(`\[\d+\]`)

// compactPaths joins paths, the same field of many list items once: acls[*].operation (18).
// -o json lists every path.
func compactPaths(paths []string) string {
	var order []string
	count := map[string]int{}
	for _, p := range paths {
		k := restoreListIndex.ReplaceAllString(p, "[*]")
		if count[k] == 0 {
			order = append(order, k)
		}
		count[k]++
	}
	out := make([]string, 0, len(order))
	for _, k := range order {
		if count[k] > 1 {
			k = fmt.Sprintf("%s (%d)", k, count[k])
		} else if strings.Contains(k, "[*]") {
			k = paths[slices.IndexFunc(paths, func(p string) bool { return restoreListIndex.ReplaceAllString(p, "[*]") == k })]
		}
		out = append(out, k)
	}
	return strings.Join(out, ", ")
}
