package printers

import (
	"fmt"
	"io"
	"strings"

	"github.com/crdver/kubectl-crdver/fleet"
	"github.com/crdver/kubectl-crdver/markdown"
	"github.com/crdver/kubectl-crdver/migrate"
)

// Fleet is a command's report over many clusters (--contexts, --all-contexts, --kubeconfigs):
// a row per cluster, the clusters by what they need, the waves; as data the fleet.Report.
func Fleet(r *fleet.Report) MarkdownReport {
	return newMarkdownView(r, printFleet, markdown.Fleet)
}

// FleetWaves is the waves a rollout is about to take (printed before its question; how says
// how they were chosen, e.g. the flag and its value): as data nothing more than the final
// report holds.
func FleetWaves(r *fleet.Report, how string) Report {
	return newView(r, func(w io.Writer, r *fleet.Report, h Human) error {
		fmt.Fprintf(w, "Upgrade %s in %s (%s); each wave starts when the one before is applied and verified:\n",
			Plural(len(r.Rows), "cluster"), Plural(len(r.Waves), "wave"), how)
		printWaves(w, r, h)
		for _, row := range r.Rows {
			if row.SameAs != "" {
				fmt.Fprintf(w, "  %s is the same cluster as %s (kube-system namespace %s): upgraded once, as %s\n", row.Name, row.SameAs, migrate.ShortUID(row.ClusterID), row.SameAs)
			}
		}
		return nil
	})
}

func printFleet(w io.Writer, r *fleet.Report, h Human) error {
	t := Table{Header: fleetHeader(r)}
	var blockers []string
	for _, row := range r.Rows {
		t.Add(fleetCells(r, row)...)
		if _, b := row.Shown(); b != "" {
			blockers = append(blockers, row.Name+": "+b)
		}
	}
	if err := t.Print(w, h.NoHeaders); err != nil {
		return err
	}
	if len(blockers) > 0 {
		fmt.Fprintln(w, "\nFirst finding or error:")
		for _, b := range blockers {
			if h.Wide {
				fmt.Fprintln(w, "  "+b)
			} else {
				WriteWrapped(w, "  "+b, "    ", TerminalWidth)
			}
		}
	}
	if r.ArgoCD != nil || len(r.HeldBack) > 0 { // a plan's waves (a rollout's are in the WAVE column)
		fmt.Fprintln(w)
		printWaves(w, r, h)
	}
	if len(r.Groups) > 1 || len(r.Groups) == 1 && r.Groups[0].ExitCode != 0 {
		fmt.Fprintln(w, "\nWhat the clusters need:")
		for _, g := range r.Groups {
			WriteWrapped(w, fmt.Sprintf("  %s (%d): %s", g.Need, len(g.Clusters), strings.Join(g.Clusters, ", ")), "    ", TerminalWidth)
		}
	}
	Notes(w, r.Notes)
	return nil
}

func printWaves(w io.Writer, r *fleet.Report, h Human) {
	for i, names := range r.Waves {
		WriteWrapped(w, fmt.Sprintf("  wave %d: %s", i+1, strings.Join(names, ", ")), "    ", TerminalWidth)
	}
	if len(r.HeldBack) > 0 {
		WriteWrapped(w, "  held back (not ready, in no wave): "+strings.Join(r.HeldBack, ", "), "    ", TerminalWidth)
	}
	if r.ArgoCD != nil {
		fmt.Fprintf(w, "  (%s has them as an Argo CD ApplicationSet's RollingSync steps)\n", h.all())
	}
}

// fleetHeader are the columns the rows have something in.
func fleetHeader(r *fleet.Report) []string {
	h := []string{"cluster", "kubernetes"}
	var inPlace, path, objects, wave bool
	for _, row := range r.Rows {
		inPlace = inPlace || row.InPlace != nil
		path = path || len(row.Path) > 0
		objects = objects || row.Objects > 0
		wave = wave || row.Wave > 0
	}
	if wave {
		h = append(h, "wave")
	}
	if inPlace {
		h = append(h, "in place")
	}
	h = append(h, "verdict")
	if path {
		h = append(h, "path")
	}
	if objects {
		h = append(h, "objects")
	}
	return append(h, "time", "exit")
}

func fleetCells(r *fleet.Report, row fleet.Row) []string {
	verdict, _ := row.Shown()
	cells := []string{row.Name, Dash(row.KubernetesVersion)}
	for _, col := range fleetHeader(r)[2:] {
		switch col {
		case "wave":
			cells = append(cells, Dash(waveText(row.Wave)))
		case "in place":
			cells = append(cells, yesNoDash(row.InPlace))
		case "verdict":
			cells = append(cells, verdict)
		case "path":
			cells = append(cells, Dash(strings.Join(row.Path, " → ")))
		case "objects":
			cells = append(cells, fmt.Sprint(row.Objects))
		case "time":
			cells = append(cells, fmt.Sprintf("%.1fs", row.Seconds))
		case "exit":
			cells = append(cells, exitText(row))
		}
	}
	return cells
}

// exitText is a row's exit status, "-" for a run not started.
func exitText(row fleet.Row) string {
	if row.State == fleet.StateNotStarted {
		return "-"
	}
	return fmt.Sprint(row.ExitCode)
}

func waveText(n int) string {
	if n == 0 {
		return ""
	}
	return fmt.Sprint(n)
}

func yesNoDash(b *bool) string {
	if b == nil {
		return "-"
	}
	return YesNo(*b)
}
