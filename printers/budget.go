package printers

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/crdver/kubectl-crdver/migrate"
)

// printBudget prints what a rewrite will ask of the cluster (migrate.Budget), each line
// indented by indent.
func printBudget(w io.Writer, b *migrate.Budget, indent string) {
	if b == nil {
		return
	}
	fmt.Fprintf(w, "%sBudget of the rewrite of %s (before its first write):\n", indent, b.CRD)
	in := indent + "  "
	if b.SampleObjects > 0 {
		fmt.Fprintf(w, "%swrites:        %d objects × %s (mean of %d) ≈ %s into etcd; each is a new revision, kept until the API server compacts etcd (every 5 minutes by default)\n",
			in, b.Objects, byteSize(b.AverageBytes), b.SampleObjects, byteSize(b.WriteBytes))
	}
	if b.RatePerSecond > 0 {
		fmt.Fprintf(w, "%stime:          about %s at %.0f objects/s (%d dry-run writes now, %d in flight; the rewrite adapts its writes in flight to the server)\n",
			in, durationText(b.Seconds), b.RatePerSecond, b.RateSample, b.RateInFlight)
	}
	if b.StorageBytes > 0 {
		fmt.Fprintf(w, "%setcd:          %s allocated (apiserver_storage_size_bytes); its quota is unknown (not readable through the API server: etcd's default is 2 GiB, and past it etcd refuses every write)\n",
			in, byteSize(b.StorageBytes))
	}
	if fc := b.FlowControl; fc != nil {
		var lim []string
		switch {
		case fc.Exempt:
			lim = append(lim, "exempt: not limited")
		default:
			if fc.NominalSeats > 0 {
				lim = append(lim, fmt.Sprintf("%d seats", fc.NominalSeats))
			}
			if fc.LimitResponse == "Queue" {
				lim = append(lim, fmt.Sprintf("%d queues of %d, hand size %d", fc.Queues, fc.QueueLengthLimit, fc.HandSize))
			} else if fc.LimitResponse != "" {
				lim = append(lim, "beyond them: rejected")
			}
		}
		what := ""
		if len(lim) > 0 {
			what = " (" + strings.Join(lim, "; ") + ")"
		}
		fmt.Fprintf(w, "%sflow control:  FlowSchema %s, priority level %s%s; a 429 cuts the writes in flight\n", in, Dash(fc.FlowSchema), Dash(fc.PriorityLevel), what)
	}
	for _, u := range b.Unknown {
		fmt.Fprintf(w, "%sunknown:       %s\n", in, u)
	}
}

// byteSize words n bytes for people: 512 B, 1.1 KiB, 3.4 MiB, 1.05 GiB.
func byteSize(n int64) string {
	switch {
	case n < 1<<10:
		return fmt.Sprintf("%d B", n)
	case n < 1<<20:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	case n < 1<<30:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	}
	return fmt.Sprintf("%.2f GiB", float64(n)/(1<<30))
}

// durationText words seconds for people: 45 s, 12 min, 3 h 20 min.
func durationText(s float64) string {
	d := time.Duration(s * float64(time.Second))
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%.0f s", d.Seconds())
	case d < time.Hour:
		return fmt.Sprintf("%.0f min", d.Minutes())
	}
	return fmt.Sprintf("%d h %d min", int(d.Hours()), int(d.Minutes())%60)
}
