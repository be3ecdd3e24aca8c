package printers

import (
	"fmt"
	"io"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/crdver/kubectl-crdver/restore"
)

// printRestoreReport prints one line per backup document (object and backed-up version) that
// is not unchanged (a backup of a whole cluster is mostly unchanged objects: they are counted,
// and -o json lists them), then the fields no served version holds and a count per outcome.
func printRestoreReport(w io.Writer, r *restore.Report, noHeaders bool) error {
	s := &RestoreStream{w: w, human: &Human{NoHeaders: noHeaders}, chunk: -1}
	return s.Finish(r)
}

// RestoreStream prints a restore pass as its outcomes come (restore.Options.Each): for people,
// the outcomes that are not unchanged as a table, a chunk of rows at a time (every
// restoreChunk rows, or restoreFlush after the last chunk), then the fields no served version
// holds and the field managers the writes drop (the first maxListed of each: -o json lists
// them all) and the counts; as data, the objects list item by item and then the counts. Memory
// holds one chunk.
type RestoreStream struct {
	w     io.Writer
	human *Human
	list  *listStream
	// chunk is the number of rows per table (0: restoreChunk; negative: one table).
	chunk     int
	rows      *Table
	printed   bool
	lastFlush time.Time
	notHeld   []string
	owners    []string
	// more counts the lines of notHeld and owners past maxListed.
	moreNotHeld, moreOwners int
}

// Rows per table of a streamed restore, and how long rows may wait for their chunk.
const (
	restoreChunk = 50
	restoreFlush = 2 * time.Second
	maxListed    = 1000
)

// NewRestoreStream prints to w as p does (Human or Data).
func NewRestoreStream(w io.Writer, p ReportPrinter) *RestoreStream {
	s := &RestoreStream{w: w, lastFlush: time.Now()}
	switch p := p.(type) {
	case Data:
		s.list = &listStream{w: w, yaml: p.YAML, key: "objects"}
	case Human:
		s.human = &p
	default:
		s.human = &Human{}
	}
	return s
}

// Outcome prints (or keeps for its chunk) one outcome of pass r (restore.Options.Each's
// signature).
func (s *RestoreStream) Outcome(r *restore.Report, x restore.Outcome) error {
	if s.list != nil {
		return s.list.Item(x)
	}
	name := x.Name
	if x.Namespace != "" {
		name = x.Namespace + "/" + name
	}
	obj := strings.ToLower(x.Kind) + " " + name
	if len(x.NotHeld) > 0 {
		if len(s.notHeld) < maxListed {
			s.notHeld = append(s.notHeld, fmt.Sprintf("  %s: %s", obj, compactPaths(x.NotHeld)))
		} else {
			s.moreNotHeld++
		}
	}
	if len(x.LostManagers) > 0 {
		all := ""
		if x.ManagersReset {
			all = "all: "
		}
		if len(s.owners) < maxListed {
			s.owners = append(s.owners, fmt.Sprintf("  %s: %s%s", obj, all, strings.Join(x.LostManagers, ", ")))
		} else {
			s.moreOwners++
		}
	}
	if x.State == restore.StateUnchanged && len(x.NotHeld) == 0 {
		return nil
	}
	if s.rows == nil {
		s.rows = &Table{Header: []string{"object", "backup version", "written at", "outcome", "fields"}}
	}
	from := x.APIVersion
	if i := strings.LastIndex(from, "/"); i >= 0 {
		from = from[i+1:]
	}
	s.rows.Add(obj, from, Dash(x.Version), restoreOutcome(x, r.DryRun), restoreFields(x))
	chunk := s.chunk
	if chunk == 0 {
		chunk = restoreChunk
	}
	if chunk > 0 && (len(s.rows.Rows) >= chunk || time.Since(s.lastFlush) >= restoreFlush) {
		return s.flush()
	}
	return nil
}

// flush prints the rows of the chunk.
func (s *RestoreStream) flush() error {
	s.lastFlush = time.Now()
	if s.rows == nil || len(s.rows.Rows) == 0 {
		return nil
	}
	s.rows.MaxWidth = TerminalWidth
	s.rows.WrapLastColumn(s.human.NoHeaders)
	err := s.rows.Print(s.w, s.human.NoHeaders || s.printed)
	s.rows, s.printed = nil, true
	return err
}

// Finish prints the rest of pass r: its outcomes still in the report (when they were not
// given to Outcome), the sections and the counts.
func (s *RestoreStream) Finish(r *restore.Report) error {
	for _, x := range r.Objects {
		if err := s.Outcome(r, x); err != nil {
			return err
		}
	}
	if s.list != nil {
		cp := *r
		cp.Objects = nil
		return s.list.Finish(&cp)
	}
	if err := s.flush(); err != nil {
		return err
	}
	w := s.w
	if s.printed {
		fmt.Fprintln(w)
	}
	more := func(n int) {
		if n > 0 {
			fmt.Fprintf(w, "  … and %d more (%s lists them)\n", n, s.human.all())
		}
	}
	if len(s.notHeld) > 0 {
		fmt.Fprintln(w, "Fields no served version holds (in the backup, not in the cluster):")
		for _, l := range s.notHeld {
			fmt.Fprintln(w, l)
		}
		more(s.moreNotHeld)
		fmt.Fprintln(w)
	}
	if len(s.owners) > 0 {
		verb := "drop"
		if r.DryRun {
			verb = "would drop"
		}
		fmt.Fprintf(w, "Field managers the writes %s (managedFields entries, as the API server answers the write):\n", verb)
		for _, l := range s.owners {
			fmt.Fprintln(w, l)
		}
		more(s.moreOwners)
		fmt.Fprintln(w)
	}
	for _, n := range r.Notes {
		fmt.Fprintf(w, "note: %s\n", n)
	}
	var counts []string
	for _, st := range []string{restore.StateRestored, restore.StateRecreated, restore.StateUnchanged, restore.StateConflict, restore.StateMissing, restore.StateNotHeld, restore.StateFailed} {
		if n := r.Counts[st]; n > 0 {
			counts = append(counts, fmt.Sprintf("%d %s", n, restoreOutcome(restore.Outcome{State: st}, r.DryRun)))
		}
	}
	what := "Restore"
	if r.DryRun {
		what = "Restore (dry run)"
	}
	_, err := fmt.Fprintf(w, "%s: %s of %d backup documents.\n", what, Dash(strings.Join(counts, ", ")), max(r.Documents, len(r.Objects)))
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
