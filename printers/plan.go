package printers

import (
	"fmt"
	"io"
	"strings"

	"github.com/crdver/kubectl-crdver/plan"
)

// ApplySources says, after the output, which apply verdicts the API server gave itself
// (server-side dry-run) and which were computed here (JSON: items[].applyVerdictSource).
func ApplySources(w io.Writer, r *plan.Report) {
	var server, offline []string
	for _, it := range r.Items {
		switch it.ApplyVerdictSource {
		case plan.VerdictServerDryRun:
			server = append(server, it.CRD)
		case plan.VerdictOffline:
			offline = append(offline, it.CRD)
		}
	}
	if len(server) > 0 {
		fmt.Fprintf(w, "note: apply verdict from the API server (server-side dry-run, nothing written): %s\n", strings.Join(server, ", "))
		if len(offline) > 0 {
			fmt.Fprintf(w, "note: apply verdict computed here (the dry-run could not be made or was not allowed): %s\n", strings.Join(offline, ", "))
		}
	}
}
