package upgrade

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	crdinfo "github.com/crdver/kubectl-crdver/crd"
	"github.com/crdver/kubectl-crdver/migrate"
	"github.com/crdver/kubectl-crdver/plan"
)

// What a person who comes back to an upgrade should do next (Status.Next).
const (
	NextStart    = "start"    // no run of this release on this cluster is recorded
	NextContinue = "continue" // a run stopped before its end: the same command continues it
	NextWait     = "wait"     // another run holds the CRDs now
	NextNothing  = "nothing"  // a run finished the release
)

// Status is what an earlier upgrade of a release did on this cluster and what is left, read
// from the cluster and from the checkpoint when it belongs to this cluster. Its JSON form is
// `kubectl crdver upgrade status -o json`.
type Status struct {
	// Checkpoint is the state file looked at; Found says whether it exists.
	Checkpoint string `json:"checkpoint"`
	Found      bool   `json:"found"`
	// NotThisCluster says why a checkpoint found is not this cluster's ("" when it is).
	NotThisCluster string `json:"notThisCluster,omitempty"`
	// Complete: the recorded run applied the release and ran to its end (CompletedAt).
	Complete    bool       `json:"complete"`
	CompletedAt *time.Time `json:"completedAt,omitempty"`
	// Done are the steps the recorded run finished; Started the writing step it began last.
	Done    []string `json:"done"`
	Started string   `json:"started,omitempty"`
	// DataLossAccepted: the recorded run was told to go on despite the fields it listed.
	DataLossAccepted bool `json:"dataLossAccepted"`
	// FixValues: the recorded run was told to convert values of another type (--fix-values).
	FixValues bool `json:"fixValues,omitempty"`
	// Backup is the recorded run's backup, BackupProblem why it can no longer be used ("" when
	// it is the same file).
	Backup        *Backup `json:"backup,omitempty"`
	BackupProblem string  `json:"backupProblem,omitempty"`
	// BackupFile is the backup file the recorded run was given (taken or not yet).
	BackupFile string `json:"backupFile,omitempty"`
	// CRDs are the release's CRDs as the cluster has them now.
	CRDs []StatusCRD `json:"crds"`
	// HeldBy is the run that holds the release's CRDs now ("" when none does).
	HeldBy string `json:"heldBy,omitempty"`
	Next   string `json:"next"`
	// InCluster are the StorageVersionMigrations a run of the cluster engine created for the
	// release's CRDs and left running in the cluster (detached, interrupted or killed while
	// following them), recorded in migrate's checkpoint of each CRD: the run that continues
	// the upgrade re-attaches to them.
	InCluster []ClusterRun `json:"inCluster,omitempty"`
	// Command is what to run next, worded by the caller with its own flags ("" when nothing).
	Command string `json:"command,omitempty"`
	// Path is set for an upgrade along a release path (GetPathStatus): the path and the hop
	// it is at; the rest of the status is then that hop's release (its CRDs, its steps).
	Path *PathStatus `json:"path,omitempty"`
}

// PathStatus is where an upgrade along a release path stands.
type PathStatus struct {
	// Checkpoint is the path's checkpoint (the one file of its run: the hops and the steps of
	// the hop it is at); Found whether it exists; NotThisCluster why it is not this cluster's,
	// or is for other releases ("" when it is).
	Checkpoint     string `json:"checkpoint"`
	Found          bool   `json:"found"`
	NotThisCluster string `json:"notThisCluster,omitempty"`
	// Hops are the releases the recorded run chose, in order (empty when none is recorded).
	Hops []string `json:"hops"`
	// Hop (1-based) is the hop the run is at, Release its release; 0 and "" when the path
	// is complete or not started.
	Hop     int    `json:"hop"`
	Release string `json:"release,omitempty"`
	// Complete: every hop was applied.
	Complete    bool       `json:"complete"`
	CompletedAt *time.Time `json:"completedAt,omitempty"`
	// Instruction: the run stopped before Hop because a person must act first.
	Instruction string `json:"instruction,omitempty"`
	// HopCheckpoint is where the steps of hop Hop's upgrade are (Status.Done): Checkpoint, the
	// same file (kept for the readers of earlier builds' JSON, where each hop had its own).
	HopCheckpoint string `json:"hopCheckpoint,omitempty"`
}

// GetPathStatus reads the state of an upgrade along the release path via → target (as given
// to RunPath) on the cluster c reaches, as RunPath resumes it (openPath), from its one
// checkpoint: the hops the recorded run chose, the hop it is at and, as GetStatus says it,
// that hop's release and steps. checkpoint is the path's, as given to RunPath ("" is the
// default). It writes nothing.
func GetPathStatus(ctx context.Context, c *migrate.Clients, via []plan.PathRelease, target plan.PathRelease, checkpoint, fieldManager string) (*Status, error) {
	rec, err := openPath(ctx, c, via, target, checkpoint)
	if err != nil {
		return nil, err
	}
	ps := &PathStatus{Checkpoint: rec.file, Found: rec.found, NotThisCluster: rec.why, Hops: []string{}}
	// The release the status is about: the hop the run is at, else the target.
	rel := target
	cp := rec.st
	if cp != nil {
		ps.Hops = append(ps.Hops, cp.Hops...)
		ps.Complete, ps.CompletedAt, ps.Instruction = cp.Complete, cp.CompletedAt, cp.Instruction
		at := cp.Hop
		if cp.Complete || at >= len(cp.Hops) {
			at = len(cp.Hops) - 1
		} else {
			ps.Hop = at + 1
		}
		if at >= 0 && at < len(cp.Hops) {
			if rel, err = rec.release(at); err != nil {
				return nil, err
			}
		}
	}
	if ps.Hop > 0 {
		ps.Release = rel.Name
	}
	st, pairs, err := liveStatus(ctx, c, rel.CRDs)
	if err != nil {
		return nil, err
	}
	st.Checkpoint, ps.HopCheckpoint = rec.file, rec.file
	st.Path = ps
	st.recorded(rec.found, rec.why, cp)
	switch {
	case st.Next == NextWait:
	case cp != nil && cp.Complete:
		st.Next = NextNothing
	case cp != nil:
		// The hop's release may be in place (applied, not yet recorded): the path goes on.
		st.Next = NextContinue
	case releaseInPlace(ctx, c, fieldManager, pairs):
		st.Next = NextNothing
	}
	return st, nil
}

// backupOf says which backup the run recorded in b took or was given, and whether it can
// still be used.
func (st *Status) backupOf(b *binding) {
	st.BackupFile = b.BackupFile
	if b.Backup != nil {
		st.Backup = b.Backup
		if err := checkBackup(b.Backup); err != nil {
			st.BackupProblem = err.Error()
		}
	}
}

// ClusterRun is a StorageVersionMigration recorded for a CRD (Status.InCluster).
type ClusterRun struct {
	CRD        string `json:"crd"`
	Checkpoint string `json:"checkpoint"`
	migrate.ClusterMigration
}

// clusterRuns are the StorageVersionMigrations recorded, not checked yet, in migrate's
// checkpoint of each live CRD (by name, with its object crds), for that CRD object.
func clusterRuns(server string, crds map[string]*apiextensionsv1.CustomResourceDefinition) []ClusterRun {
	var out []ClusterRun
	for _, name := range slices.Sorted(maps.Keys(crds)) {
		path, err := migrate.DefaultCheckpointPath(server, name)
		if err != nil {
			continue
		}
		cp, err := migrate.LoadCheckpoint(path)
		if err != nil || cp == nil || cp.State != migrate.StateRunning || cp.ClusterMigration == nil || !cp.ClusterMigration.Created || cp.UID != string(crds[name].UID) {
			continue
		}
		out = append(out, ClusterRun{CRD: name, Checkpoint: path, ClusterMigration: *cp.ClusterMigration})
	}
	return out
}

// StatusCRD is one CRD of the release as the cluster has it.
type StatusCRD struct {
	CRD            string   `json:"crd"`
	Exists         bool     `json:"exists"`
	StorageVersion string   `json:"storageVersion,omitempty"`
	StoredVersions []string `json:"storedVersions,omitempty"`
	// Versions of the release that the live CRD lacks, and live versions the release lacks.
	Missing []string `json:"missing,omitempty"`
	Extra   []string `json:"extra,omitempty"`
}

// GetStatus reads the state of an upgrade to next on the cluster c reaches. checkpoint ""
// is DefaultCheckpointPath; fieldManager is the apply's ("" is plan.FieldManager), for the
// server-side dry-run apply that tells whether the release is in place. It writes nothing.
func GetStatus(ctx context.Context, c *migrate.Clients, next []*apiextensionsv1.CustomResourceDefinition, checkpoint, fieldManager string) (*Status, error) {
	cluster := c.ClusterID(ctx)
	st, pairs, err := liveStatus(ctx, c, next)
	if err != nil {
		return nil, err
	}
	live := map[string]string{}
	liveCRDs := map[string]*apiextensionsv1.CustomResourceDefinition{}
	for _, p := range pairs {
		if p[0] != nil {
			live[p[0].Name], liveCRDs[p[0].Name] = string(p[0].UID), p[0]
		}
	}
	path, cp, why, err := openRelease(c, cluster, next, live, checkpoint)
	if err != nil {
		return nil, err
	}
	st.Checkpoint = path
	found := cp != nil
	if why != "" {
		cp = nil
	}
	st.recorded(found, why, cp)
	if (st.Next == NextStart || st.Next == NextContinue) && releaseInPlace(ctx, c, fieldManager, pairs) {
		st.Next = NextNothing
	}
	if st.Next == NextContinue {
		st.InCluster = clusterRuns(c.Server, liveCRDs)
	}
	return st, nil
}

// liveStatus is the status of the release next as the cluster has it: each CRD, the run that
// holds them; pairs are each CRD's live copy (nil when absent) and next's.
func liveStatus(ctx context.Context, c *migrate.Clients, next []*apiextensionsv1.CustomResourceDefinition) (*Status, [][2]*apiextensionsv1.CustomResourceDefinition, error) {
	st := &Status{Done: []string{}, CRDs: []StatusCRD{}, Next: NextStart}
	var pairs [][2]*apiextensionsv1.CustomResourceDefinition
	for _, n := range next {
		sc := StatusCRD{CRD: n.Name}
		crd, err := c.CRDs.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, n.Name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			pairs = append(pairs, [2]*apiextensionsv1.CustomResourceDefinition{nil, n})
		case err != nil:
			return nil, nil, fmt.Errorf("getting CustomResourceDefinition %q: %w", n.Name, err)
		default:
			pairs = append(pairs, [2]*apiextensionsv1.CustomResourceDefinition{crd, n})
			sc.Exists, sc.StorageVersion, sc.StoredVersions = true, crdinfo.StorageVersion(crd), crd.Status.StoredVersions
			for _, v := range crdinfo.VersionNames(n) {
				if _, err := crdinfo.Lookup(crd, v); err != nil {
					sc.Missing = append(sc.Missing, v)
				}
			}
			for _, v := range crdinfo.VersionNames(crd) {
				if _, err := crdinfo.Lookup(n, v); err != nil {
					sc.Extra = append(sc.Extra, v)
				}
			}
			if held, err := migrate.LeaseHolder(ctx, c, n.Name); err == nil && held != nil && st.HeldBy == "" {
				st.HeldBy = held.Holder
			}
		}
		st.CRDs = append(st.CRDs, sc)
	}
	return st, pairs, nil
}

// recorded fills in what the checkpoint says (found: it exists; why: why it is not this
// cluster's; cp: its state when it is) and the next step it implies, unless another run holds
// the CRDs.
func (st *Status) recorded(found bool, why string, cp *state) {
	switch {
	case st.HeldBy != "":
		st.Next = NextWait
	case !found:
	case why != "":
		st.Found, st.NotThisCluster = true, why
	case cp != nil:
		st.Found = true
		st.Complete, st.CompletedAt, st.Done, st.Started, st.DataLossAccepted = cp.Complete, cp.CompletedAt, cp.Done, cp.Started, cp.DataLossAccepted
		st.FixValues = cp.FixValues
		if st.Done == nil {
			st.Done = []string{}
		}
		st.backupOf(&cp.binding)
		st.Next = NextContinue
		if cp.Complete {
			st.Next = NextNothing
		}
	}
}
