package printers

import (
	"fmt"
	"io"
	"strings"

	"github.com/crdver/kubectl-crdver/upgrade"
)

// printUpgradeStatus prints what an earlier upgrade of a release did on this cluster and what is
// left (`kubectl crdver upgrade status`).
func printUpgradeStatus(w io.Writer, st *upgrade.Status, noHeaders bool) error {
	if p := st.Path; p != nil {
		if _, err := fmt.Fprintln(w, pathStatusLines(p)+"\n"); err != nil {
			return err
		}
	}
	t := &Table{Header: []string{"crd", "in cluster", "storage", "stored versions", "release versions missing", "versions to remove"}}
	for _, c := range st.CRDs {
		t.Add(c.CRD, YesNo(c.Exists), Dash(c.StorageVersion), Dash(strings.Join(c.StoredVersions, ",")), Dash(strings.Join(c.Missing, ",")), Dash(strings.Join(c.Extra, ",")))
	}
	if err := t.Print(w, noHeaders); err != nil {
		return err
	}
	var lines []string
	switch {
	case !st.Found:
		lines = append(lines, fmt.Sprintf("checkpoint: none for this release on this cluster (%s)", st.Checkpoint))
	case st.NotThisCluster != "":
		lines = append(lines, fmt.Sprintf("checkpoint: %s is not this cluster's (%s)", st.Checkpoint, st.NotThisCluster))
	default:
		state := "stopped before its end"
		if st.Complete {
			state = "finished"
			if st.CompletedAt != nil {
				state += " at " + st.CompletedAt.Format("2006-01-02 15:04:05 MST")
			}
		}
		lines = append(lines, fmt.Sprintf("checkpoint: %s: the recorded run %s; %d steps done", st.Checkpoint, state, len(st.Done)))
		for _, d := range st.Done {
			lines = append(lines, "  done: "+stepWords(d))
		}
		if st.Started != "" && !st.Complete {
			lines = append(lines, "  began: "+stepWords(st.Started))
		}
		if st.DataLossAccepted {
			lines = append(lines, "  the loss of the fields its preflight listed was accepted")
		}
	}
	if st.Backup != nil {
		if st.BackupProblem != "" {
			lines = append(lines, fmt.Sprintf("backup: %s cannot be used: %s", st.Backup.File, st.BackupProblem))
		} else {
			lines = append(lines, fmt.Sprintf("backup: %s (sha256 %s, as taken)", st.Backup.File, short(st.Backup.Digest, 12)))
		}
	}
	if st.HeldBy != "" {
		lines = append(lines, "held by: "+st.HeldBy+" (running now)")
	}
	for _, r := range st.InCluster {
		how := "the run following it stopped"
		if r.DetachedAt != nil {
			how = "detached at " + r.DetachedAt.Format("2006-01-02 15:04:05 MST")
		}
		lines = append(lines, fmt.Sprintf("in the cluster: StorageVersionMigration %s (%s) rewrites the objects of %s (%s; recorded in %s): the upgrade that continues re-attaches to it", r.Name, r.APIVersion, r.CRD, how, r.Checkpoint))
	}
	switch st.Next {
	case upgrade.NextNothing:
		lines = append(lines, "next: nothing: the release is in place")
	case upgrade.NextWait:
		lines = append(lines, "next: wait for the run that holds the CRDs to end")
	case upgrade.NextContinue:
		lines = append(lines, "next: run the same command again to continue")
	default:
		lines = append(lines, "next: no run of this release is recorded here: start it")
	}
	if st.Command != "" {
		lines = append(lines, "  "+st.Command)
	}
	_, err := fmt.Fprintln(w, "\n"+strings.Join(lines, "\n"))
	return err
}

// stepWords says a checkpoint's step key ("action|crds|…") as its action and CRDs ("apply"
// alone for a step of the whole release).
func stepWords(key string) string {
	parts := strings.SplitN(key+"|", "|", 3)
	if crds := strings.Trim(parts[1], " "); crds != "" {
		return parts[0] + " " + crds
	}
	return parts[0]
}

func short(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}

// pathStatusLines says where an upgrade along a release path stands: its hops, the hop it is
// at (the table and lines after are that hop's release), what a person must do first.
func pathStatusLines(p *upgrade.PathStatus) string {
	var lines []string
	switch {
	case !p.Found:
		lines = append(lines, fmt.Sprintf("path: none recorded on this cluster (%s); the release below is the target", p.Checkpoint))
	case p.NotThisCluster != "":
		lines = append(lines, fmt.Sprintf("path: the checkpoint %s is not this cluster's (%s); the release below is the target", p.Checkpoint, p.NotThisCluster))
	default:
		lines = append(lines, fmt.Sprintf("path: %s (checkpoint %s)", strings.Join(p.Hops, " → "), p.Checkpoint))
		switch {
		case p.Complete:
			at := "every hop applied"
			if p.CompletedAt != nil {
				at += " at " + p.CompletedAt.Format("2006-01-02 15:04:05 MST")
			}
			lines = append(lines, "hop: "+at+"; the release below is the last")
		default:
			lines = append(lines, fmt.Sprintf("hop: %d of %d, %s (its steps below)", p.Hop, len(p.Hops), p.Release))
		}
		if p.Instruction != "" {
			lines = append(lines, "waiting: "+p.Instruction)
		}
	}
	return strings.Join(lines, "\n")
}
