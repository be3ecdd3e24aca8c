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
	"github.com/crdver/kubectl-crdver/outcome"
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

// pathState is a path's checkpoint (state.go): its binding — the path (pathKey), the cluster,
// the CRDs of all its releases, the backup its first hop took for every hop, whether every hop
// was applied — and the hops the run chose and the one it is at. Each hop's steps are in that
// hop's own checkpoint (a release's, hopCheckpoint), which its upgrade resumes.
type pathState struct {
	binding
	// Hops are the releases the run goes through, Hop the index (0-based) of the hop it is at.
	Hops []string `json:"hops,omitempty"`
	Hop  int      `json:"hop,omitempty"`
	// Instruction: the path stopped before hop Hop+1 because a person must act first.
	Instruction string `json:"instruction,omitempty"`
}

// recordedPath is where an upgrade along a path stands, as RunPath resumes it and
// GetPathStatus reads it: the path's state file and, when it is this path's on this cluster,
// the state in it.
type recordedPath struct {
	// all are the releases given (via, then the target).
	all                []plan.PathRelease
	key, file, cluster string
	// live are the UIDs of all's CRDs the cluster has, by name.
	live map[string]string
	// found: the file exists; why says why it may not be used ("" when it may).
	found bool
	why   string
	// st is the state, nil when none is found or it may not be used.
	st *pathState
}

// openPath reads the state of an upgrade along the path via → target on the cluster c
// reaches; checkpoint is the path's, as given to RunPath ("" is the default, pathStateFile).
func openPath(ctx context.Context, c *migrate.Clients, via []plan.PathRelease, target plan.PathRelease, checkpoint string) (*recordedPath, error) {
	p := &recordedPath{all: append(append([]plan.PathRelease{}, via...), target), cluster: c.ClusterID(ctx)}
	var crds []*apiextensionsv1.CustomResourceDefinition
	for _, r := range p.all {
		crds = append(crds, r.CRDs...)
	}
	var err error
	if p.live, err = liveUIDs(ctx, c, crds); err != nil {
		return nil, err
	}
	if p.key, p.file, err = pathStateFile(c.Server, p.cluster, p.all, checkpoint); err != nil {
		return nil, err
	}
	st := &pathState{}
	if p.found, p.why, err = openCheckpoint(p.file, st, p.key, p.cluster, p.live); err != nil {
		return nil, err
	}
	if p.found && p.why == "" {
		p.st = st
	}
	return p, nil
}

// release is the release the recorded path takes at hop i (0-based), among those given.
func (p *recordedPath) release(i int) (plan.PathRelease, error) {
	n := p.st.Hops[i]
	j := slices.IndexFunc(p.all, func(r plan.PathRelease) bool { return r.Name == n })
	if j < 0 {
		return plan.PathRelease{}, fmt.Errorf("the path's checkpoint %s names release %s, which is not given now: give the same releases as to the upgrade, or remove the file to plan the path afresh", p.file, n)
	}
	return p.all[j], nil
}

// unfinished is the recorded state when a run continues it: nil when there is none or every
// hop was applied (the next run plans the path afresh).
func (p *recordedPath) unfinished() *pathState {
	if p.st == nil || p.st.Complete || p.st.Hop >= len(p.st.Hops) {
		return nil
	}
	return p.st
}

// RunPath upgrades the cluster along the release path to o.Target: one plan of the path
// (plan.Path, from the live state) whose refusals stop it before any write, one backup (the
// first hop's), each hop's upgrade (storage steps and apply: Run, the one runner of a release,
// with its own checkpoint), one verify (the last hop's). It is a thin layer over Run: its own
// state is which hops and the hop it is at (pathState), read and written as a release's
// checkpoint is and bound, as that is, to the cluster and the CRDs' UIDs, so running it again
// resumes at the hop, and that hop's upgrade at its step; and one lease over every hop's CRDs,
// which each hop's upgrade finds held by this run. Before a hop whose conversion webhook does
// not answer it stops (ErrNeedsPerson) with the instruction.
func RunPath(ctx context.Context, c *migrate.Clients, o PathOptions) (*PathReport, error) {
	out := &PathReport{Hops: []*Report{}, Preflight: []HopPreflight{}}
	rec, err := openPath(ctx, c, o.Via, o.Target, o.Checkpoint)
	if err != nil {
		return out, err
	}
	out.Checkpoint = rec.file
	if rec.why != "" && o.Notify != nil {
		o.Notify(fmt.Sprintf("the path's checkpoint %s is not used (%s): starting afresh", rec.file, rec.why))
	}
	p := newPathRun(c, o, rec, out)
	err = p.run(ctx)
	p.ended(err)
	return out, err
}

// run plans the path, preflights it and carries out its hops (only the first hop's preflight
// on a dry run), under one lease.
func (p *pathRun) run(ctx context.Context) error {
	c, o := p.c, p.o
	if err := p.plan(ctx); err != nil {
		return err
	}
	if err := p.refusal(); err != nil {
		return err
	}
	if o.DryRun {
		// The first hop's preflight (nothing is written); the later hops are planned above.
		_, err := p.hop(ctx, p.hopOptions(p.hops[0], 1, len(p.hops)))
		return err
	}
	// One run at a time on the path's CRDs, held from before the first hop's first write to
	// the end of the last hop: no other run slips in between two hops (each hop's upgrade
	// finds the lease held by this run and goes on under it).
	var crds [][]*apiextensionsv1.CustomResourceDefinition
	for _, r := range p.hops {
		crds = append(crds, r.CRDs)
	}
	lease, note, err := holdLease(ctx, c, "kubectl crdver upgrade (a release path)", crds...)
	if err != nil {
		return err
	}
	defer lease.Release(ctx)
	if note != "" && o.Notify != nil {
		o.Notify(note)
	}
	return p.carryOut(ctx)
}

// ended makes the path's outcome how the run ended, as every command's (package outcome):
// the outcome of the step whose error stopped it (the refusal, the stop before a hop, the
// hop's upgrade), else, for an error no step judged, could not complete (exit 3); with no
// error, the last hop's, except that a path that stopped at a hop whose release this run did
// not apply leaves that apply to the user (exit 1).
func (p *pathRun) ended(err error) {
	out := &p.out.Outcome
	switch {
	case err != nil && !p.judged:
		*out = Outcome{Result: ResultStopped, Outcome: outcome.OfError(err, outcome.Incomplete)}
	case err == nil && !p.o.DryRun && out.ExitCode == 0 && !out.Applied:
		left := out.Remaining
		out.Outcome = outcome.New(outcome.Findings, "the path stopped at a hop whose release this command did not apply: %s; run the same command again once it is applied", out.Message)
		out.Remaining = left
	}
}

// pathRun is one run of RunPath.
type pathRun struct {
	c   *migrate.Clients
	o   PathOptions
	rc  plan.ReleaseClients
	po  plan.PathOptions // the template of the path's plans (Via and Target set per plan)
	rec *recordedPath
	// st is the path's state (the recorded one when resumed); hops the releases this run
	// takes, from the hop it starts at.
	st   *pathState
	hops []plan.PathRelease
	out  *PathReport
	// judged: the error the run returns is one whose outcome the path's already is (ended).
	judged bool
}

func newPathRun(c *migrate.Clients, o PathOptions, rec *recordedPath, out *PathReport) *pathRun {
	timeout := o.ProbeTimeout
	if timeout <= 0 {
		timeout = 10 * time.Second
	}
	rc := plan.ReleaseClients{CRDs: c.CRDs, Dynamic: c.Dynamic, Kube: c.Kube}
	ro := plan.ReleaseOptions{KubeVersion: o.KubeVersion, ServerDryRun: o.ServerDryRun, ChunkSize: o.ChunkSize,
		Plan: plan.Options{FieldValidation: preview.FieldValidationStrict}, OnEvaluate: o.OnEvaluate}
	po := plan.PathOptions{Release: ro, Probe: plan.ProbeConversion(rc, timeout), Convert: plan.WebhookConvert(rc, timeout)}
	return &pathRun{c: c, o: o, rc: rc, po: po, rec: rec, out: out}
}

// plan plans the path from the live state: the hops the recorded run chose, from the one it
// is at (plan.PathThrough), or, when none is to be continued, the hops plan.Path chooses.
func (p *pathRun) plan(ctx context.Context) error {
	var err error
	po := p.po
	if st := p.rec.unfinished(); st != nil {
		p.st, p.out.Resumed, p.out.StartHop = st, true, st.Hop+1
		for i := st.Hop; i < len(st.Hops); i++ {
			rel, err := p.rec.release(i)
			if err != nil {
				return err
			}
			p.hops = append(p.hops, rel)
		}
		po.Via, po.Target = p.hops[:len(p.hops)-1], p.hops[len(p.hops)-1]
		p.out.Path, err = plan.PathThrough(ctx, p.rc, po)
	} else {
		po.Via, po.Target = p.o.Via, p.o.Target
		if p.out.Path, err = plan.Path(ctx, p.rc, po); err == nil {
			for _, h := range p.out.Path.Hops {
				i := slices.IndexFunc(p.rec.all, func(r plan.PathRelease) bool { return r.Name == h.Release })
				p.hops = append(p.hops, p.rec.all[i])
			}
		}
	}
	return interrupted(ctx, err)
}

// refusal is the path's preflight, before any write: every CRD reaches the target, and every
// object judged at every hop it goes through (plan.Path: as the hops before leave it) with the
// consent given; a hop that refuses stops the path before its first write (ErrRefused, and
// the path's outcome says so).
func (p *pathRun) refusal() error {
	out := p.out
	why := out.Path.Verdict
	if out.Path.Reachable {
		out.Preflight = pathPreflight(out.Path, p.o.Consent())
		if why = pathRefusal(out.Preflight); why == "" {
			return nil
		}
	}
	err := fmt.Errorf("%w: %s; nothing was written", ErrRefused, why)
	out.Outcome = Outcome{Result: ResultRefused, Outcome: outcome.New(outcome.Findings, "%v", err)}
	if out.Path.Reachable {
		var kinds []plan.Kind
		for _, hp := range out.Preflight {
			kinds = append(kinds, hp.Refusals...)
		}
		out.Outcome.Refusals = p.o.Consent().Refusals(kinds)
	}
	p.judged = true
	return err
}

// hopOptions are the options of the upgrade of hop index (1-based, of the whole path of of
// hops) to rel: o's, with the release and the hop's place.
func (p *pathRun) hopOptions(rel plan.PathRelease, index, of int) Options {
	uo := p.o.Options
	uo.Next, uo.ApplyFile = rel.CRDs, rel.File
	uo.Hop = &HopOptions{Index: index, Of: of, Release: rel.Name, File: rel.File, Last: index == of}
	return uo
}

// hop runs the upgrade of one hop (Run) and adds its report to the path's, whose outcome is
// the last hop's.
func (p *pathRun) hop(ctx context.Context, uo Options) (*Report, error) {
	rep, err := Run(ctx, p.c, uo)
	if rep != nil {
		rep.Hop = uo.Hop
		p.out.Hops, p.out.Outcome = append(p.out.Hops, rep), rep.Outcome
		p.judged = err != nil // Run's outcome judges its error
	}
	return rep, err
}

// carryOut takes the hops in order, from the one the path is at, saving the path's state
// before and after each; it ends at the last, or at the first that stops or is not applied
// (running again goes on there).
func (p *pathRun) carryOut(ctx context.Context) error {
	if p.st == nil {
		p.st = &pathState{binding: binding{Release: p.rec.key, Cluster: p.rec.cluster, Server: p.c.Server, CRDs: p.rec.live, BackupFile: p.o.BackupFile}}
		for _, h := range p.hops {
			p.st.Hops = append(p.st.Hops, h.Name)
		}
	}
	st := p.st
	backup := st.BackupFile
	if backup == "" {
		backup = p.o.BackupFile
	}
	confirm := p.o.Confirm // asked once, before the first write
	for i, rel := range p.hops {
		index := st.Hop + 1 // 1-based, of the whole path
		if i > 0 {
			// The conversions this hop relies on, asked again now that the hops before it ran.
			rws, err := plan.HopRewrites(ctx, p.rc, rel, p.po.Probe)
			if err != nil {
				return err
			}
			p.out.Path.Hops[i].Rewrites = rws
		}
		if in := p.out.Path.Hops[i].Instruction(); in != "" {
			return p.stopBefore(index, rel, in)
		}
		uo := p.hopOptions(rel, index, len(st.Hops))
		uo.BackupFile, uo.Confirm, uo.Checkpoint = backup, confirm, hopCheckpoint(p.o.Checkpoint, index)
		uo.Hop.BackupTaken = st.Backup != nil
		st.Instruction = ""
		if p.o.Notify != nil {
			p.o.Notify(fmt.Sprintf("hop %d/%d: %s", index, len(st.Hops), rel.Name))
		}
		if err := p.save(); err != nil {
			return err
		}
		uo.onBackup = p.recordBackup
		rep, err := p.hop(ctx, uo)
		if err != nil || !rep.Outcome.Applied {
			// Stopped, or the hop's release is not applied (a deployment tool applies it,
			// --no-apply): the path goes on from here when run again.
			_ = p.save()
			return err
		}
		confirm = nil
		if st.Hop++; st.Hop == len(st.Hops) {
			st.complete()
		}
		if err := p.save(); err != nil {
			return err
		}
	}
	return nil
}

// recordBackup records in the path's state the backup a hop's upgrade took (the first hop's,
// the path's for every hop), as soon as that hop has recorded it: a run killed after it, even
// after that hop's apply and before the path recorded the hop, leaves it to the later hops.
func (p *pathRun) recordBackup(b *Backup) error {
	if p.st.Backup != nil {
		return nil
	}
	p.st.Backup, p.st.BackupFile = b, b.File
	return p.save()
}

// stopBefore stops the path before hop index (rel) because a person must act first (in):
// recorded in its state, said in its outcome (ErrNeedsPerson).
func (p *pathRun) stopBefore(index int, rel plan.PathRelease, in string) error {
	out := p.out
	out.StoppedBefore, out.Instruction = index, fmt.Sprintf("before hop %d (%s): %s; then run the same command again", index, rel.Name, in)
	p.st.Instruction = out.Instruction
	out.Outcome = Outcome{Result: ResultNotApplied, Outcome: outcome.New(outcome.Findings, "%s", out.Instruction)}
	out.Outcome.Remaining = []string{out.Instruction}
	if err := p.save(); err != nil {
		return err
	}
	p.judged = true
	return fmt.Errorf("%w: %s", ErrNeedsPerson, out.Instruction)
}

// save writes the path's state.
func (p *pathRun) save() error {
	return writeCheckpoint(p.rec.file, "the path's checkpoint", p.st)
}
