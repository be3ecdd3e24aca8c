package retire

import (
	"context"
	"errors"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	"github.com/crdver/kubectl-crdver/migrate"
	"github.com/crdver/kubectl-crdver/outcome"
	"github.com/crdver/kubectl-crdver/ownership"
)

// ErrUsage is wrapped by errors about the arguments (an unknown version, no version to move to).
var ErrUsage = errors.New("usage")

// ErrNotConfirmed is returned when Confirm said no: nothing was written.
var ErrNotConfirmed = errors.New("not confirmed")

// ErrInterrupted is wrapped when the context was cancelled during the rewrite; the progress is
// in the checkpoint and a new Run resumes.
var ErrInterrupted = errors.New("interrupted")

// Options of a retirement.
type Options struct {
	// CRD is the CRD's name, Version the version to retire.
	CRD, Version string
	// To is the version to move to; "" picks the highest-priority served version that stays.
	To string
	// DryRun only plans: nothing is written.
	DryRun bool
	// Unserve sets served: false on Version at the end; Remove drops it from spec.versions.
	Unserve, Remove bool
	// Force unserves/removes even when a field manager still writes Version, entries of it
	// remain, or the CRD looks managed by Helm, Argo CD, Flux or OLM.
	Force bool
	// Rewrite tunes the object rewrite (Checkpoint "" = migrate's default path) and the
	// managedFields pass (Concurrency, ChunkSize, MaxAttempts).
	Rewrite migrate.RewriteOptions
	// Budget works out, before the first write, what the rewrite will ask of the cluster
	// (Plan.Budget: migrate.EstimateBudget).
	Budget bool
	// Engine is who rewrites the objects ("" is migrate.EngineClient); with
	// migrate.EngineCluster the cluster's StorageVersionMigration does, checked object by
	// object by this run (migrate.RewriteCluster). ClusterStartTimeout bounds the wait for a
	// controller to pick the migration up (0: one minute). With Rewrite.Detach, the run stops
	// once the migration is created and recorded (a *migrate.DetachedError; the rewrite step
	// StateDetached); the same run started again re-attaches to it, checks and goes on.
	Engine              migrate.Engine
	ClusterStartTimeout time.Duration
	// Census, when set, is the managedFields census of the CRD's objects from the caller's
	// own recent read of every one of them (upgrade's plan): the plan uses it instead of
	// reading them all again. The pass after the rewrite reads them anyway.
	Census *ownership.Census
	// Planned, when set, is called with the plan as soon as it is made (also on a dry run),
	// before PreWrite and Confirm.
	Planned func(*Plan)
	// Confirm is asked once, after planning, before the first write; nil means yes.
	Confirm func(*Plan) (bool, error)
	// OnRewrite is called when the object rewrite starts (e.g. to show progress); the
	// function it returns is called when the rewrite ends.
	OnRewrite func(r *migrate.Rewriter, total int64) func()
	// OnScan is called when a read of every object's managedFields starts (the move of the
	// retired version's entries, then the check for its writers), with what it reads them for
	// ("for managedFields entries of v1beta1") and the objects read so far; the function it
	// returns is called when the read ends.
	OnScan func(what string, done func() int64) func()
	// Notify receives a line for every step taken.
	Notify func(string)
	// PreWrite, when set, is called after planning and the rights check, before the question
	// and any write (on a dry run, after planning), when the objects are still to be rewritten, with the CRD and the version they
	// will be rewritten at: a check of what the rewrite would lose or be refused (package
	// preflight). What it returns is kept in Result.Preflight; an error stops the run before
	// any write and is returned as it is.
	PreWrite func(ctx context.Context, crd *apiextensionsv1.CustomResourceDefinition, target string) (any, error)
	// OwnershipLossConsented, when set, says whether the field managers the rewrite dropped
	// (res.ManagedFieldsLosses) are exactly what the user consented to lose (the preflight
	// listed them): then they are reported in Notes, not as a problem.
	OwnershipLossConsented func(res *migrate.Result) bool
}

// Step names.
const (
	StepSwitch        = "switch storage"
	StepRewrite       = "rewrite objects"
	StepTrim          = "trim storedVersions"
	StepManagedFields = "move managedFields"
	StepUnserve       = "unserve"
	StepRemove        = "remove"
)

// Step is one step of the plan and what became of it.
type Step struct {
	Name string `json:"name"`
	// State: "pending" (planned), "done" (by this run), "already done" (found done in the
	// live state), "skipped" (not asked for), "refused" (a guard said no; Detail says why),
	// "failed", "running in the cluster" (the rewrite's StorageVersionMigration, detached).
	State  string `json:"state"`
	Detail string `json:"detail"`
}

// Step states.
const (
	StatePending  = "pending"
	StateDone     = "done"
	StateAlready  = "already done"
	StateSkipped  = "skipped"
	StateRefused  = "refused"
	StateFailed   = "failed"
	StateUnreachd = "not reached"
	// StateDetached: the rewrite's StorageVersionMigration was left rewriting the objects in
	// the cluster (Options.Rewrite.Detach); the same run started again re-attaches to it.
	StateDetached = "running in the cluster"
)

// Plan is what a retirement will do, worked out from the live state before anything is written.
type Plan struct {
	CRD            string   `json:"crd"`
	Version        string   `json:"version"`
	Target         string   `json:"target"`
	StorageVersion string   `json:"storageVersion"`
	StoredVersions []string `json:"storedVersions"`
	Served         bool     `json:"served"`
	Objects        int64    `json:"objects"`
	// EntryObjects is the number of objects holding managedFields entries of Version.
	EntryObjects int64 `json:"objectsWithEntries"`
	// Writers are the field managers holding entries of Version, most recent write first.
	Writers []ownership.Writer `json:"writers"`
	// ManagedBy says which tool manages the CRD, for people (Manager.String; "" when none).
	ManagedBy string `json:"managedBy,omitempty"`
	// Manager is the same as data: the tool, the rule that matched and what owns the CRD
	// (nil when no tool manages it).
	Manager *Manager `json:"manager,omitempty"`
	Steps   []Step   `json:"steps"`
	// Unchecked is the StorageVersionMigration an earlier run created for the CRD as it is now
	// and did not check object by object (detached or stopped; migrate.UncheckedClusterMigration):
	// the controller may have trimmed status.storedVersions already, but the rewrite step still
	// re-attaches to it and checks every object (nil when none is recorded).
	Unchecked *migrate.ClusterMigration `json:"unchecked,omitempty"`
	// Budget is what the rewrite will ask of the cluster (Options.Budget, a rewrite of at least
	// migrate.MinBudgetObjects objects; nil otherwise).
	Budget *migrate.Budget `json:"budget,omitempty"`
}

// FieldsResult is what the managedFields pass did.
type FieldsResult struct {
	// Objects whose entries were rewritten (one update each).
	Updated int64 `json:"updated"`
	// Entries moved to the target version, of which Converted had renamed fields translated.
	Moved     int64 `json:"entriesMoved"`
	Converted int64 `json:"entriesConverted"`
	Merged    int64 `json:"entriesMerged"`
	// Unresolved objects keep their entries: why, per object.
	Unresolved []migrate.Failure `json:"unresolved"`
	// Failed objects could not be updated.
	Failed []migrate.Failure `json:"failed"`
	// Remaining is the census of entries of Version after the pass.
	Remaining ownership.VersionCount `json:"remaining"`

	// listed is the census of the pass's read when it found no entry of Version (nil
	// otherwise): what is left, without a second read.
	listed *ownership.Tally
}

// Result is what Run did.
type Result struct {
	Plan   *Plan `json:"plan"`
	DryRun bool  `json:"dryRun"`
	// Preflight is what Options.PreWrite found before anything was written.
	Preflight any `json:"preflight,omitempty"`
	// Cluster is what the cluster's StorageVersionMigration did and what this run checked
	// after it (Options.Engine cluster; nil otherwise).
	Cluster *migrate.ClusterResult `json:"clusterMigration,omitempty"`
	Rewrite *migrate.Result        `json:"rewrite,omitempty"`
	Trim    *migrate.TrimResult    `json:"trim,omitempty"`
	Fields  *FieldsResult          `json:"managedFields,omitempty"`
	// WritersSinceStart are managers that wrote Version after the run began.
	WritersSinceStart []ownership.Writer `json:"writersSinceStart"`
	// Problems say what keeps Version from being dropped safely (empty when nothing does).
	Problems []string `json:"problems"`
	// Notes say what the run could not guard (e.g. no lease: two runs at once not detected).
	Notes []string `json:"notes,omitempty"`
	// Outcome is how the run ended (set by Run, also when it returns an error).
	Outcome outcome.Outcome `json:"-"`
}
