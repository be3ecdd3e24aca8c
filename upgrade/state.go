package upgrade

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	crdinfo "github.com/crdver/kubectl-crdver/crd"
	"github.com/crdver/kubectl-crdver/migrate"
	"github.com/crdver/kubectl-crdver/plan"
)

// A checkpoint is a run's state file, one per run: a release is a path of one hop, and the
// file of a path holds the path's binding (the hops, the hop it is at, what a person must do
// first) and the steps of the hop it is at (the release's, for a release), which that hop's
// upgrade (Run) reads and writes as its own. It is bound (binding) to the release or path it
// was written for, on one cluster, to its CRD objects; it is read, judged and written here
// (openCheckpoint, writeCheckpoint, through internal/atomicfile).

// binding is what a checkpoint was written for, and may be used for only (belongs); the
// backup, which a path's first hop takes for every hop; and whether the run ran to its end.
type binding struct {
	// Release identifies the release (releaseKey) or the path (pathKey; a path of one release
	// is that release: the same key).
	Release string `json:"release"`
	// Cluster is the cluster's identity (migrate.Clients.ClusterID: its kube-system namespace's
	// UID; "" when it could not be read) and Server the address it was reached at.
	Cluster string `json:"cluster,omitempty"`
	Server  string `json:"server,omitempty"`
	// CRDs are the UIDs of the release's CRDs the cluster had, by name.
	CRDs       map[string]string `json:"crds,omitempty"`
	BackupFile string            `json:"backupFile,omitempty"`
	Backup     *Backup           `json:"backup,omitempty"`
	// Complete: the run applied the release (every hop of the path) and ran to its end. A
	// later run of the same release (after going back to another one) starts afresh, with a
	// backup of its own.
	Complete    bool       `json:"complete,omitempty"`
	CompletedAt *time.Time `json:"completedAt,omitempty"`
}

// complete records that the run ran to its end (now).
func (b *binding) complete() {
	now := time.Now().UTC().Truncate(time.Second)
	b.Complete, b.CompletedAt = true, &now
}

// layoutOneFile is the layout of a checkpoint that holds a path's hops and its hop's steps in
// one file (state.Layout). A checkpoint with hops and no layout was written by an earlier
// build, which kept each hop's steps in a file of their own (oldHopFile).
const layoutOneFile = 2

// state is a run's checkpoint: its binding, the path (Hops, Hop, Instruction; none for a
// release run alone: a path of one hop, at it) and the steps of the hop it is at. It is
// trusted only for the cluster and the CRD objects it was written for (belongs).
type state struct {
	binding
	// Layout is layoutOneFile when this build wrote it (writeCheckpoint).
	Layout int `json:"layout,omitempty"`
	// Hops are the releases a path's run goes through, Hop the index (0-based) of the hop it is
	// at (len(Hops) once every hop is applied).
	Hops []string `json:"hops,omitempty"`
	Hop  int      `json:"hop,omitempty"`
	// Instruction: the path stopped before hop Hop+1 because a person must act first.
	Instruction string `json:"instruction,omitempty"`
	steps
}

// steps are what the upgrade of the hop a run is at (a release's, for a release) did: the
// steps done, the step it began last, the versions it serves again, what its preflight found.
// A path's next hop starts with none (state.nextHop).
type steps struct {
	// Done are the steps done; nil until the hop's upgrade first records its steps (a path's
	// hop not begun).
	Done []string `json:"done"`
	// Started is the step that writes to the cluster which the run began last (saved before
	// its first write): from then on the objects may have lost what the backup holds.
	Started string `json:"started,omitempty"`
	// Serving are the versions this run is about to serve again (saved before the write that
	// serves them), so that a run killed in between still undoes them when it is refused.
	Serving          []ServedAgain `json:"serving,omitempty"`
	DataLossFound    bool          `json:"dataLossFound"`
	DataLossAccepted bool          `json:"dataLossAccepted"`
	// FixValues: a run of the release was told to convert values of another type.
	FixValues bool `json:"fixValues,omitempty"`
}

// nextHop records that the hop the path is at was applied: the path is at the next, whose
// steps start afresh, or, after its last, complete (the last hop's steps kept, as a release's).
func (s *state) nextHop() {
	if s.Hop++; s.Hop < len(s.Hops) {
		s.steps = steps{}
		return
	}
	s.complete()
}

// belongs reports whether s may be used on the cluster now reached (cluster: its identity,
// live: the UIDs of the release's CRDs it has now, by name); why says in a few words why not.
func (s *binding) belongs(release, cluster string, live map[string]string) (bool, string) {
	if s.Release != release {
		return false, "it is for another release"
	}
	if ok, why := migrate.SameCluster(s.Cluster, cluster); !ok {
		return false, why
	}
	if (s.Cluster == "" || cluster == "") && len(s.CRDs) == 0 {
		return false, "it does not say which cluster it was written for"
	}
	names := make([]string, 0, len(s.CRDs))
	for n := range s.CRDs {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		switch uid := live[n]; {
		case uid == "":
			return false, fmt.Sprintf("%s, which it was written for, is no longer in the cluster", n)
		case uid != s.CRDs[n]:
			return false, fmt.Sprintf("%s is another object than the one it was written for (uid %s, now %s)", n, migrate.ShortUID(s.CRDs[n]), migrate.ShortUID(uid))
		}
	}
	return true, ""
}

// openCheckpoint reads the checkpoint at path into s, the one way a checkpoint is resumed:
// found says whether the file exists; why, when it does, why it may not be used (it was
// written for another release than key, another cluster than cluster, or CRD objects other
// than live: belongs), "" when it may.
func openCheckpoint(path string, s *state, key, cluster string, live map[string]string) (found bool, why string, err error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return false, "", nil
	}
	if err != nil {
		return false, "", fmt.Errorf("reading the upgrade checkpoint %s: %w", path, err)
	}
	if err := json.Unmarshal(b, s); err != nil {
		return true, "", fmt.Errorf("the upgrade checkpoint %s is not valid (%v): remove it to start over", path, err)
	}
	_, why = s.belongs(key, cluster, live)
	return true, why, nil
}

// writeCheckpoint replaces the checkpoint at path with s, in this build's layout
// (migrate.WriteJSONAtomic: internal/atomicfile, synced before and after the rename); what
// names it in the error.
func writeCheckpoint(path, what string, s *state) error {
	s.Layout = layoutOneFile
	if err := migrate.WriteJSONAtomic(path, s); err != nil {
		return fmt.Errorf("writing %s %s: %w", what, path, err)
	}
	return nil
}

// DefaultCheckpointPath is the upgrade's state file for a release (its CRD names) on a
// cluster (its address and, when known, its identity: two clusters reached at the same
// address have two files): <cache>/kubectl-crdver/upgrade/<hash>.json.
func DefaultCheckpointPath(server, cluster string, next []*apiextensionsv1.CustomResourceDefinition) (string, error) {
	dir, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("finding the cache folder for the upgrade's checkpoint: %w", err)
	}
	key := releaseKey(server, next)
	if cluster != "" {
		sum := sha256.Sum256([]byte(key + "\x00" + cluster))
		key = hex.EncodeToString(sum[:])
	}
	return filepath.Join(dir, "kubectl-crdver", "upgrade", key[:16]+".json"), nil
}

// releaseKey identifies a release on a cluster: the server and each CRD's name and spec.
func releaseKey(server string, next []*apiextensionsv1.CustomResourceDefinition) string {
	h := sha256.New()
	h.Write([]byte(server))
	names := make([]string, 0, len(next))
	specs := map[string][]byte{}
	for _, c := range next {
		names = append(names, c.Name)
		specs[c.Name], _ = json.Marshal(c.Spec)
	}
	sort.Strings(names)
	for _, n := range names {
		h.Write([]byte("\x00" + n + "\x00"))
		h.Write(specs[n])
	}
	return hex.EncodeToString(h.Sum(nil))
}

// openRelease is the checkpoint of a release (next) on the cluster c reaches, as a run resumes
// it and GetStatus reads it: its file (checkpoint, else DefaultCheckpointPath), and the state
// in it when found, with why it may not be used (openCheckpoint). live are the UIDs of next's
// CRDs the cluster has.
func openRelease(c *migrate.Clients, cluster string, next []*apiextensionsv1.CustomResourceDefinition, live map[string]string, checkpoint string) (path string, s *state, why string, err error) {
	path = checkpoint
	if path == "" {
		if path, err = DefaultCheckpointPath(c.Server, cluster, next); err != nil {
			return "", nil, "", err
		}
	}
	s = &state{}
	found, why, err := openCheckpoint(path, s, releaseKey(c.Server, next), cluster, live)
	if err != nil || !found {
		return path, nil, "", err
	}
	return path, s, why, nil
}

// loadCheckpoint finds the state of an earlier run of the same release and keeps it only when
// it was written for this cluster and these CRD objects (belongs); otherwise the run starts
// afresh and says why in one line. A finished run's state is not resumed: whether its release
// is still in place is read from the cluster (inPlace).
func (r *runner) loadCheckpoint(ctx context.Context) error {
	c, o := r.c, r.o
	cluster := c.ClusterID(ctx)
	live, err := liveUIDs(ctx, c, o.Next)
	if err != nil {
		return err
	}
	if pc := o.inPath; pc != nil {
		r.resumeHop(pc, live)
		return nil
	}
	path, cp, why, err := openRelease(c, cluster, o.Next, live, o.Checkpoint)
	if err != nil {
		return err
	}
	r.cpPath, r.rep.Checkpoint = path, path
	r.cp = &state{binding: binding{Release: releaseKey(c.Server, o.Next), Cluster: cluster, Server: c.Server, CRDs: live}, steps: steps{Done: []string{}}}
	switch {
	case cp == nil:
		return nil
	case why != "":
		r.rep.CheckpointIgnored = fmt.Sprintf("the checkpoint %s is not used (%s): starting afresh", path, why)
		r.notify("%s", r.rep.CheckpointIgnored)
		return nil
	case cp.Complete:
		r.earlier = cp
		return nil
	}
	r.cp, r.rep.Resumed = cp, true
	if cp.Cluster == "" {
		cp.Cluster = cluster
	}
	if cp.CRDs == nil {
		cp.CRDs = map[string]string{}
	}
	for n, uid := range live {
		cp.CRDs[n] = uid // CRDs the release creates, once they exist
	}
	if o.BackupFile == "" {
		r.o.BackupFile = cp.BackupFile
	}
	return nil
}

// resumeHop takes as the run's checkpoint the one of the path this release is a hop of (pc):
// its steps are the hop's, resumed when a run of the hop recorded them; live are the UIDs of
// the hop's CRDs the cluster has (those the path's earlier hops created, once they exist).
func (r *runner) resumeHop(pc *pathCheckpoint, live map[string]string) {
	r.cpPath, r.rep.Checkpoint, r.cp = pc.file, pc.file, pc.st
	r.rep.Resumed = r.cp.Done != nil
	if r.cp.CRDs == nil {
		r.cp.CRDs = map[string]string{}
	}
	for n, uid := range live {
		r.cp.CRDs[n] = uid
	}
	if r.o.BackupFile == "" {
		r.o.BackupFile = r.cp.BackupFile
	}
}

// save writes the run's checkpoint (none when the run has no file: a dry run); a path's hop
// writes the path's, with its steps.
func (r *runner) save() error {
	if r.cpPath == "" {
		return nil
	}
	r.cp.BackupFile = r.o.BackupFile
	if r.cp.Done == nil {
		r.cp.Done = []string{} // the hop's steps are recorded (resumeHop)
	}
	return writeCheckpoint(r.cpPath, "the upgrade checkpoint", r.cp)
}

// liveUIDs are the UIDs of the release's CRDs the cluster has, by name.
func liveUIDs(ctx context.Context, c *migrate.Clients, next []*apiextensionsv1.CustomResourceDefinition) (map[string]string, error) {
	out := map[string]string{}
	for _, n := range next {
		crd, err := c.CRDs.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, n.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("getting CustomResourceDefinition %q: %w", n.Name, err)
		}
		out[n.Name] = string(crd.UID)
	}
	return out, nil
}

// inPlace reports whether the release is already in place (releaseInPlace) and why.
func (r *runner) inPlace(ctx context.Context) (bool, string) {
	pairs := make([][2]*apiextensionsv1.CustomResourceDefinition, 0, len(r.items))
	for i := range r.items {
		live, next := r.items[i].CRDs()
		pairs = append(pairs, [2]*apiextensionsv1.CustomResourceDefinition{live, next})
	}
	if !releaseInPlace(ctx, r.c, r.o.FieldManager, pairs) {
		return false, ""
	}
	why := "every CRD of the release is applied as it is and stored at its storage version alone"
	if r.earlier != nil && r.earlier.CompletedAt != nil {
		why = fmt.Sprintf("an earlier run finished it at %s; %s", r.earlier.CompletedAt.Format("2006-01-02 15:04:05 MST"), why)
	}
	return true, why
}

// releaseInPlace is the one rule for "the release is in place" (upgrade and upgrade status):
// every CRD of it exists (pairs: live, next), its status.storedVersions is its storage version
// alone, and applying it would change nothing: a server-side dry-run apply, as the apply step
// sends it, returns the live spec.
func releaseInPlace(ctx context.Context, c *migrate.Clients, fieldManager string, pairs [][2]*apiextensionsv1.CustomResourceDefinition) bool {
	if fieldManager == "" {
		fieldManager = plan.FieldManager
	}
	for _, p := range pairs {
		live, next := p[0], p[1]
		if live == nil {
			return false
		}
		if !slices.Equal(live.Status.StoredVersions, []string{crdinfo.StorageVersion(live)}) {
			return false
		}
		body, err := ApplyBody(next)
		if err != nil {
			return false
		}
		force := true
		got, err := c.CRDs.ApiextensionsV1().CustomResourceDefinitions().Patch(ctx, next.Name, types.ApplyPatchType, body,
			metav1.PatchOptions{FieldManager: fieldManager, Force: &force, DryRun: []string{metav1.DryRunAll}})
		if err != nil || !equality.Semantic.DeepEqual(got.Spec, live.Spec) {
			return false
		}
	}
	return len(pairs) > 0
}

// finished ends a run whose release is already in place: the steps that write are already
// done, nothing is written (no backup is needed), and the verify step reads how the release
// stands, so the run ends as the one that finished it did.
func (r *runner) finished(ctx context.Context, why string) error {
	r.rep.AlreadyInPlace = why
	r.notify("the release is already in place (%s): nothing to write", why)
	for i := range r.rep.Steps {
		s := &r.rep.Steps[i]
		switch s.Action {
		case plan.ActionVerify, plan.ActionFixRecreate, plan.ActionChangeWriters:
			// read-only, or the user's: as in any run
		default:
			s.State, s.Detail = StateAlready, "the release is in place"
		}
	}
	r.invalidOnRecreate()
	// The local record says so too (a file of this machine, not a write to the cluster), so
	// that a run killed after its apply is not reported as left to continue.
	if r.cp != nil && !r.cp.Complete {
		if err := r.markComplete(); err != nil {
			return err
		}
	}
	err := r.run(ctx)
	r.notReached()
	return err
}

// markComplete records that the release was applied and the run ran to its end: nothing is
// left to resume, and the next run of the release is a new upgrade with a backup of its own.
func (r *runner) markComplete() error {
	if r.o.inPath != nil {
		// A path's hop: the path records it applied (state.nextHop) once the hop ends, and is
		// complete after its last.
		return nil
	}
	r.cp.complete()
	return r.save()
}

// notReached marks the steps the run did not get to.
func (r *runner) notReached() {
	for i := range r.rep.Steps {
		if r.rep.Steps[i].State == StatePending {
			r.rep.Steps[i].State = StateNotRun
		}
	}
}

// servedByKilledRun are the versions an earlier run of this release recorded it was about to
// serve again (state.Serving) and that are served now, when that run wrote nothing after
// them: this run undoes them, as that run would have, if it stops before its first step.
func (r *runner) servedByKilledRun() []ServedAgain {
	if r.cp == nil || len(r.cp.Serving) == 0 || r.cp.Started != "" || len(r.cp.Done) > 0 {
		return nil
	}
	var out []ServedAgain
	for _, sa := range r.cp.Serving {
		it := r.item(sa.CRD)
		if it == nil {
			continue
		}
		live, _ := it.CRDs()
		if live == nil {
			continue
		}
		if v, err := crdinfo.Lookup(live, sa.Version); err == nil && v.Served && !slices.ContainsFunc(r.rep.ServedAgain, func(x ServedAgain) bool { return x.CRD == sa.CRD && x.Version == sa.Version }) {
			out = append(out, ServedAgain{CRD: sa.CRD, Version: sa.Version, State: ServeServed})
			r.notify("%s: %s was served again by a run that stopped before recording it: unserved again if this run is refused", sa.CRD, sa.Version)
		}
	}
	return out
}

// recordServing saves, before the write that serves them, the versions this run serves
// again (state.Serving).
func (r *runner) recordServing() error {
	if r.cp == nil {
		return nil
	}
	var planned []string
	for _, sa := range r.rep.ServedAgain {
		if sa.State == ServePlanned || sa.State == ServeServed {
			if !slices.ContainsFunc(r.cp.Serving, func(x ServedAgain) bool { return x.CRD == sa.CRD && x.Version == sa.Version }) {
				r.cp.Serving = append(r.cp.Serving, ServedAgain{CRD: sa.CRD, Version: sa.Version, State: ServePlanned})
			}
			planned = append(planned, sa.CRD+" "+sa.Version)
		}
	}
	if len(planned) == 0 {
		return nil
	}
	if err := r.save(); err != nil {
		return fmt.Errorf("%w (before serving %s again)", err, strings.Join(planned, ", "))
	}
	return nil
}
