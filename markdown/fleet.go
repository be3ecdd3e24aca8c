package markdown

import (
	"fmt"
	"strings"

	"github.com/crdver/kubectl-crdver/fleet"
)

// Fleet is the comment for a fleet report (a command run on many clusters), at most limit
// bytes (0: Limit): how many clusters need something, the clusters grouped by what they need,
// the waves and their Argo CD ApplicationSet strategy, then a row per cluster.
func Fleet(r *fleet.Report, limit int) string {
	m := newDoc(limit)
	markdownFleet(m, r)
	return m.String()
}

func markdownFleet(m *mdDoc, r *fleet.Report) {
	need := 0
	for _, row := range r.Rows {
		if row.ExitCode != 0 {
			need++
		}
	}
	head := fmt.Sprintf("%d of %d need something", need, len(r.Rows))
	if need == 0 {
		head = fmt.Sprintf("all %d ready", len(r.Rows))
	}
	m.Must("## %s on %s: **%s**\n", mdCode("kubectl crdver "+r.Command), plural(len(r.Rows), "cluster"), head)
	if r.Interrupted || r.Stopped != "" {
		m.Must("%s\n", mdCell(r.Summary()))
	}
	for _, g := range r.Groups {
		m.Line("- **%s**: %s", mdCell(g.Need), mdCell(strings.Join(g.Clusters, ", ")))
	}
	m.Line("")
	if len(r.Waves) > 0 {
		m.Line("**Waves** (the clusters ready, in the order given):\n")
		for i, w := range r.Waves {
			m.Line("%d. %s", i+1, mdCell(strings.Join(w, ", ")))
		}
		if len(r.HeldBack) > 0 {
			m.Line("\nHeld back (in no wave): %s", mdCell(strings.Join(r.HeldBack, ", ")))
		}
		m.Line("")
	}
	if r.ArgoCD != nil {
		open := m.Open("Argo CD ApplicationSet <code>spec.strategy</code> for these waves")
		m.Line("The steps select the generated Applications by the label %s (set it in the template, e.g. %s); the clusters held back are in no step, so the rolling sync leaves them out.\n",
			mdCode(r.ArgoCD.RollingSync.Steps[0].MatchExpressions[0].Key), mdCode(r.ArgoCD.RollingSync.Steps[0].MatchExpressions[0].Key+": '{{.name}}'"))
		m.Line("```yaml\n%s```", r.ArgoCD.YAML())
		m.Close(open)
	}
	m.Line("| cluster | Kubernetes | in place | verdict | path | objects | blocker | time | exit |")
	m.Line("|---|---|---|---|---|---|---|---|---|")
	for _, row := range r.Rows {
		verdict, blocker := row.Shown()
		exit := fmt.Sprint(row.ExitCode)
		if row.State == fleet.StateNotStarted {
			exit = "-"
		}
		m.Line("| %s | %s | %s | %s | %s | %d | %s | %.1fs | %s |", mdCode(row.Name), dash(row.KubernetesVersion), yesNoDash(row.InPlace),
			mdCell(verdict), mdCell(dash(strings.Join(row.Path, " → "))), row.Objects, mdCell(dash(blocker)), row.Seconds, exit)
	}
	for _, n := range r.Notes {
		m.Line("\n_%s_", mdCell(n))
	}
}

func yesNoDash(b *bool) string {
	if b == nil {
		return "-"
	}
	return yesNoUnknown(b)
}
