package fleet

import (
	"fmt"
	"sort"
	"strings"
)

// Report is the fleet's report: a row per cluster, the clusters grouped by what they need and,
// for a plan or a rollout, the waves. Its JSON form is the `-o json` of a command run with
// --contexts, --all-contexts or --kubeconfigs.
type Report struct {
	// Command is the command each cluster's run was, without the flags that choose the
	// cluster ("plan -f release/").
	Command string `json:"command"`
	Rows    []Row  `json:"rows"`
	// Groups are the clusters grouped by what they need (Row.Need): those that need nothing
	// or the release first, those that could not complete last.
	Groups []Group `json:"groups"`
	// Waves are the clusters in the order a rollout takes them, wave by wave (a plan's: the
	// clusters ready for the release; an upgrade's: the waves it runs). HeldBack are the
	// clusters in no wave, because they are not ready (a plan's: see their Need).
	Waves    [][]string `json:"waves,omitempty"`
	HeldBack []string   `json:"heldBack,omitempty"`
	// ArgoCD is the waves as an Argo CD ApplicationSet's spec.strategy (RollingSync steps
	// selecting the generated Applications by a cluster label): the clusters not ready are in
	// no step, so the rollout leaves them out (Argo CD syncs them only by hand).
	ArgoCD *ArgoCDStrategy `json:"argoCD,omitempty"`
	// Interrupted: the run was interrupted (Ctrl-C, SIGTERM); Finished names the clusters
	// whose run ended (with an answer, or failing) before it.
	Interrupted bool     `json:"interrupted,omitempty"`
	Finished    []string `json:"finished,omitempty"`
	// Stopped says why a rollout stopped before its last wave ("" when it did not).
	Stopped string `json:"stopped,omitempty"`
	// Notes say what was left out of the fleet and why (a file that is not a kubeconfig).
	Notes []string `json:"notes,omitempty"`
	// ExitCode is the worst cluster's exit status (3 when the run was interrupted).
	ExitCode int `json:"exitCode"`
}

// Group is the clusters that need the same thing.
type Group struct {
	Need     string   `json:"need"`
	Clusters []string `json:"clusters"`
	// ExitCode is the worst exit status of the group's clusters.
	ExitCode int `json:"exitCode"`
}

// NewReport makes the report of rows: the groups, the finished clusters, the clusters that
// reach a cluster an earlier row reaches (SameAs), the exit code.
func NewReport(command string, rows []Row, interrupted bool) *Report {
	r := &Report{Command: command, Rows: rows, Interrupted: interrupted, Groups: []Group{}}
	first := map[string]string{}
	for i := range rows {
		row := &rows[i]
		if id := row.ClusterID; id != "" && row.SameAs == "" {
			if f, ok := first[id]; ok {
				row.SameAs = f
			} else {
				first[id] = row.Name
			}
		}
		r.ExitCode = max(r.ExitCode, row.ExitCode)
		if row.Finished() || row.State == StateFailed || row.State == StateUnreachable {
			r.Finished = append(r.Finished, row.Name)
		}
	}
	if interrupted {
		r.ExitCode = 3
	}
	r.Groups = groups(rows)
	return r
}

// groups groups rows by Need: the groups of the best exit status first, each in the order of
// its first cluster.
func groups(rows []Row) []Group {
	var out []Group
	at := map[string]int{}
	for _, row := range rows {
		i, ok := at[row.Need]
		if !ok {
			i = len(out)
			at[row.Need] = i
			out = append(out, Group{Need: row.Need})
		}
		out[i].Clusters = append(out[i].Clusters, row.Name)
		out[i].ExitCode = max(out[i].ExitCode, row.ExitCode)
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].ExitCode < out[j].ExitCode })
	if out == nil {
		out = []Group{}
	}
	return out
}

// Row returns the row of the cluster named name (nil if none).
func (r *Report) Row(name string) *Row {
	for i := range r.Rows {
		if r.Rows[i].Name == name {
			return &r.Rows[i]
		}
	}
	return nil
}

// Summary is the report's last line: how many clusters answered, and those that need
// something, group by group.
func (r *Report) Summary() string {
	var parts []string
	for _, g := range r.Groups {
		if g.ExitCode == 0 {
			continue
		}
		parts = append(parts, fmt.Sprintf("%s: %s", g.Need, strings.Join(g.Clusters, ", ")))
	}
	head := fmt.Sprintf("%d of %d clusters", countNonZero(r.Rows), len(r.Rows))
	if r.Interrupted {
		done := "none"
		if len(r.Finished) > 0 {
			done = strings.Join(r.Finished, ", ")
		}
		return fmt.Sprintf("interrupted: %d of %d clusters finished (%s); the others did not", len(r.Finished), len(r.Rows), done)
	}
	if r.Stopped != "" {
		return r.Stopped
	}
	if len(parts) == 0 {
		return ""
	}
	return head + " need something: " + strings.Join(parts, "; ")
}

func countNonZero(rows []Row) int {
	n := 0
	for _, r := range rows {
		if r.ExitCode != 0 {
			n++
		}
	}
	return n
}
