package migrate

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/client-go/util/retry"

	crdinfo "github.com/crdver/kubectl-crdver/crd"
)

// Evidence is what a finished run proves: which CRD object, storage version and generation it
// started with, and whether it accounted for every object with none failed.
type Evidence struct {
	CRD            string
	UID            string
	StorageVersion string
	Generation     int64
	Complete       bool
	Failed         int64
	// Engine names what did the rewrite, for messages ("this run", "StorageVersionMigration x").
	Engine string
	// Checkpoint is the file of the run ("" when none): Trim records there what it left in
	// status.storedVersions, so that a later change of it (through /status only, which leaves
	// the generation alone) makes the recorded run stale (CompletedEvidence).
	Checkpoint string
}

// EvidenceOf is the evidence a rewrite Result gives.
func EvidenceOf(r *Result) Evidence {
	return Evidence{CRD: r.CRD, UID: r.UID, StorageVersion: r.StorageVersion, Generation: r.Generation, Complete: r.Complete, Failed: r.Failed, Engine: "this run", Checkpoint: r.Checkpoint}
}

// TrimResult says what happened to status.storedVersions.
type TrimResult struct {
	// Trimmed: status.storedVersions was set to After by this call.
	Trimmed bool     `json:"trimmed"`
	Before  []string `json:"before"`
	After   []string `json:"after"`
	// Reason says why nothing was changed ("" when trimmed).
	Reason string `json:"reason,omitempty"`
	// Safe: every object is known to be stored at the storage version.
	Safe bool `json:"safe"`
}

// Trim sets status.storedVersions of the CRD to [storage version] when ev proves it safe: the
// run accounted for every object with none failed, since the CRD (same UID, same generation)
// had its current storage version. The new list is checked with the API server's own
// ValidateCustomResourceDefinitionStoredVersions (the /status strategy does not check it), and
// written through /status with the CRD's resourceVersion as precondition (re-checked on
// conflict). When it is not safe, nothing is written and Reason says why.
func Trim(ctx context.Context, c *Clients, ev Evidence) (*TrimResult, error) {
	out := &TrimResult{}
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		crd, err := c.CRDs.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, ev.CRD, metav1.GetOptions{})
		if err != nil {
			return err
		}
		out.Before = append([]string{}, crd.Status.StoredVersions...)
		out.After = out.Before
		if reason := unsafeReason(crd, ev); reason != "" {
			out.Reason = reason
			return nil
		}
		out.Safe = true
		want := []string{ev.StorageVersion}
		if slices.Equal(crd.Status.StoredVersions, want) {
			out.Reason = fmt.Sprintf("status.storedVersions is already [%s]", ev.StorageVersion)
			return nil
		}
		if err := ValidateStoredVersions(crd, want); err != nil {
			out.Reason = err.Error()
			out.Safe = false
			return nil
		}
		crd.Status.StoredVersions = want
		updated, err := c.CRDs.ApiextensionsV1().CustomResourceDefinitions().UpdateStatus(ctx, crd, metav1.UpdateOptions{})
		if err != nil {
			return err
		}
		out.Trimmed = true
		out.After = append([]string{}, updated.Status.StoredVersions...)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("trimming status.storedVersions of %s: %w", ev.CRD, err)
	}
	if out.Safe && ev.Checkpoint != "" && slices.Equal(out.After, []string{ev.StorageVersion}) {
		if err := recordTrim(ev.Checkpoint, out.After); err != nil {
			return out, err
		}
	}
	return out, nil
}

// recordTrim notes in the completed run's checkpoint at path what status.storedVersions was
// left as.
func recordTrim(path string, after []string) error {
	cp, err := LoadCheckpoint(path)
	if err != nil || cp == nil || cp.State != StateComplete {
		return err
	}
	cp.TrimmedTo = append([]string{}, after...)
	return cp.Save(path)
}

// unsafeReason says why ev does not prove that every object of crd is stored at its storage
// version ("" when it does).
func unsafeReason(crd *apiextensionsv1.CustomResourceDefinition, ev Evidence) string {
	storage := crdinfo.StorageVersion(crd)
	switch {
	case string(crd.UID) != ev.UID:
		return "the CRD was deleted and created again during the run"
	case storage != ev.StorageVersion:
		return fmt.Sprintf("the storage version changed during the run (%s, now %s): run migrate again", ev.StorageVersion, storage)
	case crd.Generation != ev.Generation:
		return fmt.Sprintf("the CRD's spec changed during the run (generation %d, now %d): run migrate again", ev.Generation, crd.Generation)
	case ev.Failed > 0:
		return fmt.Sprintf("%d objects could not be rewritten and may still be stored at an older version: fix them and run migrate again", ev.Failed)
	case !ev.Complete:
		return fmt.Sprintf("%s did not reach every object: run migrate again (it resumes from the checkpoint)", ev.Engine)
	}
	return ""
}

// ValidateStoredVersions checks storedVersions for crd with the API server's own rules
// (non-empty, contains the storage version, only versions in spec.versions).
func ValidateStoredVersions(crd *apiextensionsv1.CustomResourceDefinition, storedVersions []string) error {
	versions := make([]apiextensions.CustomResourceDefinitionVersion, len(crd.Spec.Versions))
	for i, v := range crd.Spec.Versions {
		versions[i] = apiextensions.CustomResourceDefinitionVersion{Name: v.Name, Served: v.Served, Storage: v.Storage}
	}
	if errs := validation.ValidateCustomResourceDefinitionStoredVersions(storedVersions, versions, field.NewPath("status", "storedVersions")); len(errs) > 0 {
		return fmt.Errorf("%s: status.storedVersions [%s] would be invalid: %w", crd.Name, strings.Join(storedVersions, " "), errs.ToAggregate())
	}
	return nil
}

// Status is what `migrate status` reports.
type Status struct {
	CRD            string   `json:"crd"`
	StorageVersion string   `json:"storageVersion"`
	StoredVersions []string `json:"storedVersions"`
	// Pending: storedVersions lists versions other than the storage version.
	Pending bool `json:"migrationPending"`
	// TrimSafe: a recorded complete run (the checkpoint) proves every object is stored at
	// the storage version, so storedVersions can be set to [storage version].
	TrimSafe bool   `json:"trimSafe"`
	Reason   string `json:"reason"`
	// Next is what to do next (a command words it: which command to run).
	Next NextStep `json:"next,omitempty"`
	// LastRun is the last run recorded in the checkpoint file, if any.
	LastRun *RunRecord `json:"lastRun,omitempty"`
}

// NextStep is what to do about a CRD's storage, as GetStatus sees it.
type NextStep string

// Next steps.
const (
	NextNone    NextStep = ""
	NextMigrate NextStep = "migrate" // no record of a migration: run one
	NextResume  NextStep = "resume"  // the last run was interrupted: run again with its checkpoint
	NextTrim    NextStep = "trim"    // a complete run proves it safe: a run trims after a re-check
	// NextAttach: a StorageVersionMigration created by the last run rewrites the objects in
	// the cluster: run the same migration again to re-attach (check, trim).
	NextAttach NextStep = "attach"
)

// RunRecord summarises a checkpoint.
type RunRecord struct {
	State          string    `json:"state"`
	StorageVersion string    `json:"storageVersion"`
	Counts         Counts    `json:"counts"`
	UpdatedAt      time.Time `json:"updatedAt"`
	Checkpoint     string    `json:"checkpoint"`
	// ClusterMigration is the StorageVersionMigration of the cluster engine it recorded.
	ClusterMigration *ClusterMigration `json:"clusterMigration,omitempty"`
}

// GetStatus reports the storage state of crd, using the checkpoint at checkpointPath (if any)
// as the record of the last run, when it was written for this CRD object (its UID).
func GetStatus(crd *apiextensionsv1.CustomResourceDefinition, server, checkpointPath string) (*Status, error) {
	st := &Status{CRD: crd.Name, StorageVersion: crdinfo.StorageVersion(crd), StoredVersions: append([]string{}, crd.Status.StoredVersions...)}
	for _, v := range st.StoredVersions {
		if v != st.StorageVersion {
			st.Pending = true
		}
	}
	var cp *Checkpoint
	if checkpointPath != "" {
		var err error
		if cp, err = LoadCheckpoint(checkpointPath); err != nil {
			return nil, err
		}
	}
	// A record is this CRD's only when it was written for this CRD object: another cluster
	// reached at the same address, or the CRD deleted and created again, has another UID.
	if cp != nil && cp.CRD == crd.Name && cp.Server == server && cp.UID == string(crd.UID) {
		st.LastRun = &RunRecord{State: cp.State, StorageVersion: cp.StorageVersion, Counts: cp.Counts, UpdatedAt: cp.UpdatedAt, Checkpoint: checkpointPath, ClusterMigration: cp.ClusterMigration}
	}
	running := st.LastRun != nil && cp.State == StateRunning && cp.ClusterMigration != nil && cp.ClusterMigration.Created
	switch {
	case !st.Pending:
		st.Reason = fmt.Sprintf("status.storedVersions is [%s], only the storage version", strings.Join(st.StoredVersions, " "))
	case cp == nil || st.LastRun == nil:
		st.Reason = fmt.Sprintf("no record of a migration: objects may still be stored at %s", strings.Join(older(st), ", "))
		st.Next = NextMigrate
	case running:
		m := cp.ClusterMigration
		how := "was interrupted while following it"
		if m.DetachedAt != nil {
			how = "left it running (detached) at " + m.DetachedAt.Format(time.RFC3339)
		}
		st.Reason = fmt.Sprintf("the StorageVersionMigration %s (%s), created by the last run at %s, rewrites the objects in the cluster; that run %s; the next run re-attaches to it, checks every object and trims", m.Name, m.APIVersion, m.CreatedAt.Format(time.RFC3339), how)
		st.Next = NextAttach
	case cp.State != StateComplete:
		st.Reason = fmt.Sprintf("the last run was interrupted (%d objects done)", cp.Counts.Total())
		st.Next = NextResume
	default:
		ev := Evidence{CRD: cp.CRD, UID: cp.UID, StorageVersion: cp.StorageVersion, Generation: cp.Generation, Complete: true, Failed: cp.Counts.Failed, Engine: "the last run"}
		if reason := unsafeReason(crd, ev); reason != "" {
			st.Reason = strings.ReplaceAll(reason, "during the run", "since the last run")
		} else if err := ValidateStoredVersions(crd, []string{st.StorageVersion}); err != nil {
			st.Reason = err.Error()
		} else {
			st.TrimSafe = true
			st.Reason = fmt.Sprintf("the run of %s accounted for every object with none failed: storedVersions can be trimmed to [%s]",
				cp.UpdatedAt.Format(time.RFC3339), st.StorageVersion)
			st.Next = NextTrim
		}
	}
	return st, nil
}

func older(st *Status) []string {
	var out []string
	for _, v := range st.StoredVersions {
		if v != st.StorageVersion {
			out = append(out, v)
		}
	}
	return out
}
