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
	// Confirm is asked before the first write only; Checkpoint, when set, is the run's one
	// checkpoint, which holds the path and the steps of the hop it is at).
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

// pathKey identifies a path (its releases, in order) on a server; a path of one release is
// that release (releaseKey): its run is the release's.
func pathKey(server string, rels []plan.PathRelease) string {
	if len(rels) == 1 {
		return releaseKey(server, rels[0].CRDs)
	}
	return chainKey(server, rels)
}

// chainKey is the key of a path of several releases, and the one an earlier build gave a path
// of one release too.
func chainKey(server string, rels []plan.PathRelease) string {
	h := sha256.New()
	for _, r := range rels {
		h.Write([]byte(releaseKey(server, r.CRDs) + "\x00"))
	}
	return hex.EncodeToString(h.Sum(nil))
}

// pathStateFile is the key of the path through all (its releases, in order) on server and
// its checkpoint: checkpoint when given, else one in the cache folder per path and cluster (a
// path of one release: the release's, DefaultCheckpointPath).
func pathStateFile(server, cluster string, all []plan.PathRelease, checkpoint string) (key, path string, err error) {
	key = pathKey(server, all)
	if checkpoint != "" {
		return key, checkpoint, nil
	}
	if len(all) == 1 {
		path, err = DefaultCheckpointPath(server, cluster, all[0].CRDs)
		return key, path, err
	}
	dir, err := os.UserCacheDir()
	if err != nil {
		return key, "", fmt.Errorf("finding the cache folder for the path's checkpoint: %w", err)
	}
	sum := sha256.Sum256([]byte(key + "\x00" + cluster))
	return key, filepath.Join(dir, "kubectl-crdver", "upgrade", "path-"+hex.EncodeToString(sum[:])[:16]+".json"), nil
}

// pathCheckpoint is the checkpoint of a path (its file and state) as a hop's upgrade keeps
// its steps in it (Options.inPath).
type pathCheckpoint struct {
	file string
	st   *state
}

// oldHopFile is where an earlier build kept the steps of hop index (1-based) to rel, in a
// file of their own (a checkpoint without Layout): beside the path's given checkpoint as
// CHECKPOINT.hopN, else the release's own (DefaultCheckpointPath).
func oldHopFile(server, cluster, checkpoint string, rel plan.PathRelease, index int) (string, error) {
	if checkpoint != "" {
		return fmt.Sprintf("%s.hop%d", checkpoint, index), nil
	}
	return DefaultCheckpointPath(server, cluster, rel.CRDs)
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
	st *state
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
	st := &state{}
	if p.found, p.why, err = openCheckpoint(p.file, st, p.key, p.cluster, p.live); err != nil {
		return nil, err
	}
	if p.found && p.why != "" && len(p.all) == 1 && st.Release == chainKey(c.Server, p.all) {
		// An earlier build's checkpoint of a path of this one release, keyed as a chain then.
		st.Release = p.key
		_, p.why = st.belongs(p.key, p.cluster, p.live)
	}
	if !p.found || p.why != "" {
		return p, nil
	}
	p.st = st
	if st.Layout == 0 && len(st.Hops) > 0 {
		return p, p.oldLayout(c.Server, checkpoint)
	}
	if len(st.Hops) == 0 && len(p.all) == 1 {
		// The release's own run (Run) wrote it: the path of that one release, at its hop.
		st.Hops = []string{p.all[0].Name}
		if st.Complete {
			st.Hop = 1
		}
	}
	return p, nil
}

// oldLayout reads into the path's state, written by an earlier build (no Layout), the steps
// of the hop it is at from that hop's own file (oldHopFile), when that file is this hop's on
// this cluster and its upgrade is not complete; none otherwise (the path's file never held
// steps). Nothing is written: the next save writes the one file, in this build's layout.
func (p *recordedPath) oldLayout(server, checkpoint string) error {
	st := p.st
	st.steps = steps{}
	if st.Complete || st.Hop >= len(st.Hops) {
		return nil
	}
	rel, err := p.release(st.Hop)
	if err != nil {
		return err
	}
	file, err := oldHopFile(server, p.cluster, checkpoint, rel, st.Hop+1)
	if err != nil {
		return err
	}
	hop := &state{}
	found, why, err := openCheckpoint(file, hop, releaseKey(server, rel.CRDs), p.cluster, p.live)
	if err != nil || !found || why != "" || hop.Complete {
		return err
	}
	st.steps = hop.steps
	if st.Backup == nil && hop.Backup != nil {
		st.Backup, st.BackupFile = hop.Backup, hop.BackupFile
	}
	return nil
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
func (p *recordedPath) unfinished() *state {
	if p.st == nil || p.st.Complete || p.st.Hop >= len(p.st.Hops) {
		return nil
	}
	return p.st
}

// RunPath upgrades the cluster along the release path to o.Target: one plan of the path
// (plan.Path, from the live state) whose refusals stop it before any write, one backup (the
// first hop's), each hop's upgrade (storage steps and apply: Run, the one runner of a release),
// one verify (the last hop's). It is a thin layer over Run, a release being a path of one hop:
// one checkpoint (state.go) holds the hops, the hop it is at and that hop's steps, which the
// hop's upgrade reads and writes as its own (Options.inPath), bound to the cluster and the
// CRDs' UIDs, so running it again resumes at the hop, and that hop's upgrade at its step; and
// one lease over every hop's CRDs, which each hop's upgrade finds held by this run. Before a
// hop whose conversion webhook does not answer it stops (ErrNeedsPerson) with the instruction.
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
	// st is the path's checkpoint (the recorded one when resumed); hops the releases this run
	// takes, from the hop it starts at.
	st   *state
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

// carryOut takes the hops in order, from the one the path is at, saving the checkpoint before
// each and once it is applied (the path then at the next hop, in the same write); it ends at
// the last, or at the first that stops or is not applied (running again goes on there).
func (p *pathRun) carryOut(ctx context.Context) error {
	if p.st == nil {
		p.st = &state{binding: binding{Release: p.rec.key, Cluster: p.rec.cluster, Server: p.c.Server, CRDs: p.rec.live, BackupFile: p.o.BackupFile}}
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
		uo.BackupFile, uo.Confirm, uo.inPath = backup, confirm, &pathCheckpoint{file: p.rec.file, st: st}
		uo.Hop.BackupTaken = st.Backup != nil
		st.Instruction = ""
		if p.o.Notify != nil {
			p.o.Notify(fmt.Sprintf("hop %d/%d: %s", index, len(st.Hops), rel.Name))
		}
		if err := p.save(); err != nil {
			return err
		}
		rep, err := p.hop(ctx, uo)
		if err != nil || !rep.Outcome.Applied {
			// Stopped, or the hop's release is not applied (a deployment tool applies it,
			// --no-apply): the path goes on from here when run again.
			_ = p.save()
			return err
		}
		confirm = nil
		st.nextHop()
		if err := p.save(); err != nil {
			return err
		}
	}
	return nil
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

// save writes the path's checkpoint.
func (p *pathRun) save() error {
	return writeCheckpoint(p.rec.file, "the path's checkpoint", p.st)
}
