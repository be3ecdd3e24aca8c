package upgrade

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	"github.com/crdver/kubectl-crdver/migrate"
	"github.com/crdver/kubectl-crdver/plan"
	"github.com/crdver/kubectl-crdver/preview"
)

// ErrNeedsPerson: a hop's conversion webhook does not answer; the path stopped before that
// hop (PathReport.Instruction says what to do), and running again continues there.
var ErrNeedsPerson = errors.New("a person must act before the next hop")

// HopOptions are what a release's upgrade does differently as one hop of a path.
type HopOptions struct {
	// Index (1-based) and Of: which hop of how many; Release its name and File what -f takes.
	Index   int    `json:"index"`
	Of      int    `json:"of"`
	Release string `json:"release"`
	File    string `json:"file"`
	// BackupTaken: the path's backup was taken by an earlier hop (Options.BackupFile): the
	// backup step is not done again.
	BackupTaken bool `json:"backupTaken"`
	// Last: the target; the hops before it skip the verify step (one verify, at the end).
	Last bool `json:"last"`
}

// PathOptions of an upgrade along a release path.
type PathOptions struct {
	// Options is the template of each hop's upgrade (Next and ApplyFile are set per hop;
	// Confirm is asked before the first write only; Checkpoint, when set, is the path's state
	// and each hop's is beside it).
	Options
	// Via are the releases between the cluster and Target, oldest first; the path takes
	// only those it needs (plan.Path).
	Via    []plan.PathRelease
	Target plan.PathRelease
	// ProbeTimeout bounds each question to a conversion webhook (0: 10s).
	ProbeTimeout time.Duration
}

// PathReport is what an upgrade along a path found and did. Its JSON form is
// `kubectl crdver upgrade --via … -o json`.
type PathReport struct {
	// Path is the path planned when the run began (from the live state).
	Path *plan.PathReport `json:"path"`
	// Hops are the upgrade reports of the hops this run carried out (or stopped in).
	Hops []*Report `json:"hops"`
	// Resumed: the run continued a path an earlier run began (at hop StartHop).
	Resumed  bool `json:"resumed"`
	StartHop int  `json:"startHop"`
	// StoppedBefore is the hop (1-based) the run stopped before because a person must act
	// first (Instruction); 0 when none.
	StoppedBefore int    `json:"stoppedBefore,omitempty"`
	Instruction   string `json:"instruction,omitempty"`
	Checkpoint    string `json:"checkpoint"`
	// Preflight is every hop's, judged before the first write (plan's findings at each hop,
	// each object as the hops before leave it).
	Preflight []HopPreflight `json:"preflight"`
	// Outcome is the path's: the last hop's, or why it stopped.
	Outcome Outcome `json:"outcome"`
}

// pathKey identifies a path (its releases, in order) on a server.
func pathKey(server string, rels []plan.PathRelease) string {
	h := sha256.New()
	for _, r := range rels {
		h.Write([]byte(releaseKey(server, r.CRDs) + "\x00"))
	}
	return hex.EncodeToString(h.Sum(nil))
}

// pathStateFile is the key of the path through all (its releases, in order) on server and
// its state file: checkpoint when given, else one in the cache folder per path and cluster.
func pathStateFile(server, cluster string, all []plan.PathRelease, checkpoint string) (key, path string, err error) {
	key = pathKey(server, all)
	if checkpoint != "" {
		return key, checkpoint, nil
	}
	dir, err := os.UserCacheDir()
	if err != nil {
		return key, "", fmt.Errorf("finding the cache folder for the path's checkpoint: %w", err)
	}
	sum := sha256.Sum256([]byte(key + "\x00" + cluster))
	return key, filepath.Join(dir, "kubectl-crdver", "upgrade", "path-"+hex.EncodeToString(sum[:])[:16]+".json"), nil
}

// hopCheckpoint is the checkpoint of hop index (1-based) of a path whose state is checkpoint:
// beside it, or "" (the release's own default, DefaultCheckpointPath) when none was given.
func hopCheckpoint(checkpoint string, index int) string {
	if checkpoint == "" {
		return ""
	}
	return fmt.Sprintf("%s.hop%d", checkpoint, index)
}

// RunPath upgrades the cluster along the release path to o.Target: one plan of the path
// (plan.Path, from the live state) whose refusals stop it before any write, one backup (the
// first hop's), each hop's upgrade (storage steps and apply, Run), one verify (the last
// hop's). Its state (the hops and the hop it is at) is kept beside the hops' own checkpoints
// and bound, as theirs, to the cluster and the CRDs' UIDs: running it again resumes at the
// hop, and that hop's checkpoint at its step. Before a hop whose conversion webhook does not
// answer it stops (ErrNeedsPerson) with the instruction.
func RunPath(ctx context.Context, c *migrate.Clients, o PathOptions) (*PathReport, error) {
	timeout := o.ProbeTimeout
	if timeout <= 0 {
		timeout = 10 * time.Second
	}
	rc := plan.ReleaseClients{CRDs: c.CRDs, Dynamic: c.Dynamic, Kube: c.Kube}
	probe := plan.ProbeConversion(rc, timeout)
	conv := plan.WebhookConvert(rc, timeout)
	ro := plan.ReleaseOptions{KubeVersion: o.KubeVersion, ServerDryRun: o.ServerDryRun, ChunkSize: o.ChunkSize,
		Plan: plan.Options{FieldValidation: preview.FieldValidationStrict}, OnEvaluate: o.OnEvaluate}
	out := &PathReport{Hops: []*Report{}, Preflight: []HopPreflight{}}

	// The path's state: the hops an earlier run chose and the one it was at.
	all := append(append([]plan.PathRelease{}, o.Via...), o.Target)
	var allCRDs []*apiextensionsv1.CustomResourceDefinition
	for _, r := range all {
		allCRDs = append(allCRDs, r.CRDs...)
	}
	cluster := c.ClusterID(ctx)
	live, err := liveUIDs(ctx, &runner{c: c}, allCRDs)
	if err != nil {
		return out, err
	}
	key, path, err := pathStateFile(c.Server, cluster, all, o.Checkpoint)
	if err != nil {
		return out, err
	}
	out.Checkpoint = path
	st, err := loadState(path)
	if err != nil {
		return out, err
	}
	if st != nil {
		if ok, why := st.belongs(key, cluster, live); !ok || st.Complete || st.Hop >= len(st.Hops) {
			if !ok && o.Notify != nil {
				o.Notify(fmt.Sprintf("the path's checkpoint %s is not used (%s): starting afresh", path, why))
			}
			st = nil
		}
	}

	// The path: chosen from the live state, or the one the earlier run chose, from its hop on.
	var hops []plan.PathRelease
	if st != nil {
		out.Resumed, out.StartHop = true, st.Hop+1
		for _, n := range st.Hops[st.Hop:] {
			i := slices.IndexFunc(all, func(r plan.PathRelease) bool { return r.Name == n })
			if i < 0 {
				return out, fmt.Errorf("the path's checkpoint %s names release %s, which is not given now: give the same releases, or remove the file to plan the path afresh", path, n)
			}
			hops = append(hops, all[i])
		}
		out.Path, err = plan.PathThrough(ctx, rc, plan.PathOptions{Via: hops[:len(hops)-1], Target: hops[len(hops)-1], Release: ro, Probe: probe, Convert: conv})
	} else {
		out.Path, err = plan.Path(ctx, rc, plan.PathOptions{Via: o.Via, Target: o.Target, Release: ro, Probe: probe, Convert: conv})
		if err == nil {
			for _, h := range out.Path.Hops {
				i := slices.IndexFunc(all, func(r plan.PathRelease) bool { return r.Name == h.Release })
				hops = append(hops, all[i])
			}
		}
	}
	if err != nil {
		if ctx.Err() != nil {
			return out, fmt.Errorf("%w: %w", ErrInterrupted, err)
		}
		return out, err
	}
	// The path's preflight, before any write: every CRD reaches the target, and no hop has a
	// CRD the API server would reject.
	refuse := func(format string, args ...any) (*PathReport, error) {
		err := fmt.Errorf("%w: "+format+"; nothing was written", append([]any{ErrRefused}, args...)...)
		out.Outcome = Outcome{Result: ResultRefused, ExitCode: 1, Message: err.Error(), Remaining: []string{}}
		return out, err
	}
	if !out.Path.Reachable {
		return refuse("%s", out.Path.Verdict)
	}
	// Every object judged at every hop it goes through (plan.Path: as the hops before leave
	// it), with the consent given: a hop that refuses stops the path before its first write.
	out.Preflight = pathPreflight(out.Path, o.Consent())
	if why := pathRefusal(out.Preflight); why != "" {
		var kinds []plan.Kind
		for _, hp := range out.Preflight {
			kinds = append(kinds, hp.Refusals...)
		}
		rep, err := refuse("%s", why)
		rep.Outcome.Refusals = o.Consent().Refusals(kinds)
		return rep, err
	}
	if o.DryRun {
		// The first hop's preflight (nothing is written); the later hops are planned above.
		uo := o.Options
		uo.Next, uo.ApplyFile = hops[0].CRDs, hops[0].File
		uo.Hop = &HopOptions{Index: 1, Of: len(hops), Release: hops[0].Name, File: hops[0].File, Last: len(hops) == 1}
		rep, err := Run(ctx, c, uo)
		if rep != nil {
			rep.Hop = uo.Hop
			out.Hops, out.Outcome = append(out.Hops, rep), rep.Outcome
		}
		return out, err
	}
	// One run at a time on the path's CRDs, held from before the first hop's first write to
	// the end of the last hop: no other run slips in between two hops (each hop's upgrade
	// finds the lease held by this run and goes on under it).
	var names []string
	for _, r := range hops {
		for _, n := range r.CRDs {
			if !slices.Contains(names, n.Name) {
				names = append(names, n.Name)
			}
		}
	}
	lease, note, err := migrate.AcquireLease(ctx, c, "kubectl crdver upgrade (a release path)", names...)
	if err != nil {
		return out, err
	}
	defer lease.Release(ctx)
	if note != "" && o.Notify != nil {
		o.Notify(note)
	}
	if st == nil {
		st = &state{Release: key, Cluster: cluster, Server: c.Server, CRDs: live, Done: []string{}, BackupFile: o.BackupFile}
		for _, h := range hops {
			st.Hops = append(st.Hops, h.Name)
		}
	}
	save := func() error {
		if err := migrate.WriteJSONAtomic(path, st); err != nil {
			return fmt.Errorf("writing the path's checkpoint %s: %w", path, err)
		}
		return nil
	}
	backup := st.BackupFile
	if backup == "" {
		backup = o.BackupFile
	}
	confirm := o.Confirm
	for i, rel := range hops {
		index := st.Hop + 1 // 1-based, of the whole path
		ph := &out.Path.Hops[i]
		if i > 0 {
			// The conversions this hop relies on, asked again now that the hops before it ran.
			rws, err := plan.HopRewrites(ctx, rc, rel, probe)
			if err != nil {
				return out, err
			}
			ph.Rewrites = rws
		}
		if in := ph.Instruction(); in != "" {
			out.StoppedBefore, out.Instruction = index, fmt.Sprintf("before hop %d (%s): %s; then run the same command again", index, rel.Name, in)
			st.Instruction = out.Instruction
			out.Outcome = Outcome{Result: ResultNotApplied, ExitCode: 1, Message: out.Instruction, Remaining: []string{out.Instruction}}
			if err := save(); err != nil {
				return out, err
			}
			return out, fmt.Errorf("%w: %s", ErrNeedsPerson, out.Instruction)
		}
		uo := o.Options
		uo.Next, uo.ApplyFile, uo.BackupFile, uo.Confirm = rel.CRDs, rel.File, backup, confirm
		uo.Hop = &HopOptions{Index: index, Of: len(st.Hops), Release: rel.Name, File: rel.File, BackupTaken: st.Backup != nil, Last: index == len(st.Hops)}
		uo.Checkpoint = hopCheckpoint(o.Checkpoint, index)
		st.Instruction = ""
		if o.Notify != nil {
			o.Notify(fmt.Sprintf("hop %d/%d: %s", index, len(st.Hops), rel.Name))
		}
		if err := save(); err != nil {
			return out, err
		}
		rep, err := Run(ctx, c, uo)
		if rep != nil {
			rep.Hop = uo.Hop
			out.Hops = append(out.Hops, rep)
			out.Outcome = rep.Outcome
			if rep.Backup != nil && st.Backup == nil {
				st.Backup, st.BackupFile = rep.Backup, rep.Backup.File
			}
		}
		if err != nil {
			_ = save()
			return out, err
		}
		if !rep.Outcome.Applied {
			// The hop's release is not applied (a deployment tool applies it, --no-apply):
			// the path goes on from here when run again.
			_ = save()
			return out, nil
		}
		confirm = nil // asked once, before the first write
		st.Hop++
		if index == len(st.Hops) {
			now := time.Now().UTC().Truncate(time.Second)
			st.Complete, st.CompletedAt = true, &now
		}
		if err := save(); err != nil {
			return out, err
		}
	}
	return out, nil
}
