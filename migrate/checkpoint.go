package migrate

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
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	crdinfo "github.com/crdver/kubectl-crdver/crd"
	"github.com/crdver/kubectl-crdver/internal/atomicfile"
)

// Checkpoint states.
const (
	StateRunning  = "running"  // pages up to Continue are done; resume from Continue
	StateComplete = "complete" // every object was accounted for; a record for `migrate status`
)

// Checkpoint is the progress of a rewrite, saved as pages complete so that an interrupted run
// resumes where it stopped. It only counts pages whose every object is done: a resumed run
// redoes the page it was in the middle of (the objects it had already rewritten come back as
// already current).
type Checkpoint struct {
	Server string `json:"server"`
	// Cluster is the cluster's identity when the run began (Clients.ClusterID: the UID of its
	// kube-system namespace; "" when it could not be read). A checkpoint of another cluster
	// reached at the same address is never resumed.
	Cluster        string `json:"cluster,omitempty"`
	CRD            string `json:"crd"`
	UID            string `json:"uid"`
	StorageVersion string `json:"storageVersion"`
	Generation     int64  `json:"generation"`
	State          string `json:"state"`
	Continue       string `json:"continue,omitempty"`
	// Through is the key (namespace/name, ObjectKey) of the last object of the last page done:
	// a resumed run writes only objects after it (the API server lists in key order).
	Through   string    `json:"through,omitempty"`
	Pages     int64     `json:"pages"`
	Counts    Counts    `json:"counts"`
	Failures  []Failure `json:"failures,omitempty"`
	StartedAt time.Time `json:"startedAt"`
	UpdatedAt time.Time `json:"updatedAt"`
	// TrimmedTo is status.storedVersions as a trim based on this completed run left it (Trim).
	TrimmedTo []string `json:"trimmedTo,omitempty"`
	// ClusterMigration is the StorageVersionMigration of the cluster engine (RewriteCluster):
	// recorded before it is created, so that a run killed, interrupted or detached while it
	// runs is resumed by re-attaching to it, never by creating a second one. It is bound like
	// the rest of the checkpoint: to the cluster, the CRD object, its storage version and
	// generation (matches, SameCluster).
	ClusterMigration *ClusterMigration `json:"clusterMigration,omitempty"`
}

// ClusterMigration is the record of a StorageVersionMigration in a checkpoint.
type ClusterMigration struct {
	// Name and APIVersion (storagemigration.k8s.io/VERSION) of the StorageVersionMigration.
	// The name is chosen before it is created (clusterMigrationName).
	Name       string `json:"name"`
	APIVersion string `json:"apiVersion"`
	// Since is the resourceVersion of the first read (ClusterCheck.Since): an object written
	// after it is stored at the storage version. Managers are the field managers' entries
	// counted by that read (countManagers), compared with the second read's.
	Since    string           `json:"since"`
	Managers map[string]int64 `json:"managers,omitempty"`
	// Created: the API server accepted it (at CreatedAt, this machine's clock). A record
	// not yet created is created by the next run, under the same name.
	Created   bool       `json:"created"`
	CreatedAt *time.Time `json:"createdAt,omitempty"`
	// Detached: a run left it running in the cluster on purpose (at DetachedAt).
	DetachedAt *time.Time `json:"detachedAt,omitempty"`
}

// DefaultCheckpointPath is the checkpoint file for a CRD of the cluster at server, in the
// user's cache folder: <cache>/kubectl-crdver/migrate/<crd>-<hash of server and crd>.json.
func DefaultCheckpointPath(server, crd string) (string, error) {
	dir, err := os.UserCacheDir()
	if err != nil {
		return "", &CheckpointError{Op: CheckpointLocate, Err: err}
	}
	sum := sha256.Sum256([]byte(server + "\x00" + crd))
	return filepath.Join(dir, "kubectl-crdver", "migrate", crd+"-"+hex.EncodeToString(sum[:6])+".json"), nil
}

// LoadCheckpoint reads the checkpoint at path; (nil, nil) when there is none.
func LoadCheckpoint(path string) (*Checkpoint, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, &CheckpointError{Op: CheckpointRead, Path: path, Err: err}
	}
	var cp Checkpoint
	if err := json.Unmarshal(b, &cp); err != nil {
		return nil, &CheckpointError{Op: CheckpointParse, Path: path, Err: err}
	}
	return &cp, nil
}

// Save writes the checkpoint atomically (WriteJSONAtomic). Errors are *CheckpointError.
func (cp *Checkpoint) Save(path string) error {
	if err := WriteJSONAtomic(path, cp); err != nil {
		return &CheckpointError{Op: CheckpointWrite, Path: path, Err: err}
	}
	return nil
}

// WriteJSONAtomic writes v as indented JSON to path (the folder is created 0700, the file is
// 0600) with atomicfile: a reader never sees half a file, and once it returns the content is
// on disk. The migrate checkpoint and upgrade's state file are written with it.
func WriteJSONAtomic(path string, v any) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return atomicfile.WriteFile(path, b, 0o600)
}

// matches reports whether cp was written for the same CRD object, storage version and
// generation; if not, it says why.
func (cp *Checkpoint) matches(server, crd, uid, storage string, generation int64) (bool, string) {
	switch {
	case cp.Server != server || cp.CRD != crd:
		return false, fmt.Sprintf("it is for %s on %s", cp.CRD, cp.Server)
	case cp.UID != uid:
		return false, "the CRD was deleted and created again since"
	case cp.StorageVersion != storage:
		return false, fmt.Sprintf("it was written while %s was the storage version", cp.StorageVersion)
	case cp.Generation != generation:
		return false, fmt.Sprintf("the CRD's spec changed since (generation %d, now %d)", cp.Generation, generation)
	}
	return true, ""
}

// ObjectKey is an object's key in list order: namespace/name, or the name of a cluster-scoped
// object. The API server lists objects in the byte order of these keys (etcd's), so comparing
// two keys as strings says which is listed first.
func ObjectKey(namespace, name string) string {
	if namespace == "" {
		return name
	}
	return namespace + "/" + name
}

// ResumableFor reports whether a rewrite of crd (as it is now) on server would resume from cp:
// cp is a run in progress for the same CRD object, storage version and generation.
func (cp *Checkpoint) ResumableFor(server string, crd *apiextensionsv1.CustomResourceDefinition) bool {
	if cp == nil || cp.State != StateRunning {
		return false
	}
	ok, _ := cp.matches(server, crd.Name, string(crd.UID), crdinfo.StorageVersion(crd), crd.Generation)
	return ok
}

// UncheckedClusterMigration is the StorageVersionMigration recorded in the checkpoint at path
// for crd as it is now on the cluster c reaches (recordedClusterMigration) that was created and
// not yet checked object by object (RewriteCluster re-attaches to it); nil when there is none.
// A workflow that decides from status.storedVersions that nothing is left to rewrite asks it
// first: the controller trims status.storedVersions itself once its migration succeeds (from
// Kubernetes 1.36), before a run that was detached or stopped has checked every object.
func UncheckedClusterMigration(ctx context.Context, c *Clients, crd *apiextensionsv1.CustomResourceDefinition, path string) (*ClusterMigration, error) {
	cp, err := LoadCheckpoint(path)
	if err != nil {
		return nil, err
	}
	rec, _ := cp.recordedClusterMigration(c.Server, c.ClusterID(ctx), crd)
	if rec == nil || !rec.Created {
		return nil, nil
	}
	return rec, nil
}

// recordedClusterMigration is the one answer to "does cp record a StorageVersionMigration of
// crd as it is now, on the cluster reached at server whose identity is cluster
// (Clients.ClusterID), not yet checked object by object": the record (created or about to be:
// ClusterMigration.Created) when cp is a run in progress (StateRunning) written for the same
// server, cluster, CRD object (its UID), storage version and generation (matches,
// SameCluster); else nil, with why when cp records a migration that is not to be followed
// ("" when it records none).
func (cp *Checkpoint) recordedClusterMigration(server, cluster string, crd *apiextensionsv1.CustomResourceDefinition) (rec *ClusterMigration, why string) {
	if cp == nil || cp.ClusterMigration == nil || cp.State != StateRunning {
		return nil, ""
	}
	ok, why := cp.matches(server, crd.Name, string(crd.UID), crdinfo.StorageVersion(crd), crd.Generation)
	if ok {
		ok, why = SameCluster(cp.Cluster, cluster)
	}
	if !ok {
		return nil, why
	}
	return cp.ClusterMigration, ""
}
