// Package upgrade carries out the runbook of a whole release (plan.Runbook) against a cluster,
// losing nothing unless told to: preflight every object under the new CRDs (fields the
// re-encoding drops, writes that would be rejected) and refuse before any write → back up every
// stored version that holds data to a file → per CRD: intermediate CRD where the live one lacks
// the new storage version, storage switch, rewrite, trim and managedFields moved (the migrate
// and retire engines) → one server-side apply of the release → verify (storedVersions, the
// rewrite's evidence, server-side apply, plan of the same release).
//
// It is the library behind `kubectl crdver upgrade`: no flags, no printing; questions, progress
// and notes are callbacks. Each step is found done in the live state or in the upgrade's
// checkpoint, so running it again after an interruption continues where it stopped.
package upgrade

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/crdver/kubectl-crdver/kubeversion"
	"github.com/crdver/kubectl-crdver/migrate"
	"github.com/crdver/kubectl-crdver/outcome"
	"github.com/crdver/kubectl-crdver/plan"
	"github.com/crdver/kubectl-crdver/webhookcheck"
)

// Errors Run returns (wrapped); a Report comes with each.
var (
	// ErrRefused: the preflight found objects that would lose fields or be rejected, or a CRD
	// the API server would reject; nothing was written.
	ErrRefused = errors.New("refused")
	// ErrNotConfirmed: Confirm said no; nothing was written.
	ErrNotConfirmed = errors.New("not confirmed")
	// ErrInterrupted: the context was cancelled; running again resumes.
	ErrInterrupted = errors.New("interrupted")
	// ErrValuesForPerson: the run stopped, after the backup, at the runbook's fix-values step:
	// objects hold values of another type that no lossless conversion fixes; running again
	// once they are changed continues there.
	ErrValuesForPerson = errors.New("values to change first")
)

// Options of an upgrade.
type Options struct {
	// Next are the release's CRDs.
	Next []*apiextensionsv1.CustomResourceDefinition
	// ApplyFile names the release in the runbook's commands (as given to -f).
	ApplyFile string
	// DryRun plans and preflights only: nothing is written.
	DryRun bool
	// AllowDataLoss goes on when objects would lose fields; SkipInvalid when objects' writes
	// would be rejected (they then keep status.storedVersions untrimmed, so the release
	// cannot remove their version: the run stops before the apply).
	AllowDataLoss, SkipInvalid bool
	// AllowOwnershipLoss goes on when the preflight's dry runs show objects losing field
	// managers (AllowDataLoss does not).
	AllowOwnershipLoss bool
	// FixValues goes on when objects hold values whose type does not fit the new storage
	// version's typed schema: after the backup the run converts those that convert without
	// loss, keeping their field managers (FixValues), and stops for a person at the
	// runbook's fix-values step for the others.
	FixValues bool
	// NoApply stops before the release's apply (the storage steps are done).
	NoApply bool
	// FieldManager of the intermediate and final server-side applies ("" is plan.FieldManager:
	// kubectl's, so the next `kubectl apply --server-side` of the release does not conflict).
	FieldManager string
	// BackupFile receives the backup (required unless DryRun). An existing file is never
	// overwritten, except the one a resumed run's checkpoint names (then it is kept as is).
	BackupFile string
	// Checkpoint is the upgrade's own state file ("" is DefaultCheckpointPath).
	Checkpoint string
	// Rewrite tunes the rewrites (Checkpoint is ignored: migrate's default per CRD). Detach,
	// with the cluster engine, stops the run once a step's StorageVersionMigration is created
	// and recorded (a *migrate.DetachedError): the same run started again re-attaches to it.
	Rewrite migrate.RewriteOptions
	// Engine is who rewrites the objects of each CRD ("" is migrate.EngineClient): with
	// migrate.EngineCluster the cluster's StorageVersionMigration does, one CRD at a time in
	// the runbook's order, and this run does what the controller does not — the preflight,
	// the managedFields moves, the check that every object was rewritten (writing back what
	// was not) and the trim (migrate.RewriteCluster). ClusterStartTimeout bounds the wait for
	// a controller to pick a migration up (0: one minute).
	Engine              migrate.Engine
	ClusterStartTimeout time.Duration

	// eachObject, when set, sees every object PlanRelease's plan lists (plan.Options.Each).
	eachObject func(crd string, u *unstructured.Unstructured)
	// ChunkSize of the lists (0: 500).
	ChunkSize int64
	// KubeVersion is the Kubernetes version the release is planned as (the cluster's, or
	// --kube-version; zero: whatever the process emulates).
	KubeVersion kubeversion.Version
	// ServerDryRun: each CRD's apply verdict is the API server's answer to a server-side
	// dry-run (where the user may create or update it), as `kubectl crdver plan` does.
	ServerDryRun bool
	// Webhook, when set, is asked instead of the conversion webhook the new CRDs name, to judge
	// the conversion they rely on (the release's webhook running elsewhere: a local binary, a
	// port-forward, a sandbox namespace; plan.ConversionOptions.Target).
	Webhook *webhookcheck.Target
	// Objects are the release's documents that are not CRDs (plan.ReleaseOptions.Objects):
	// the runbook's deploy-webhook step names those that make the webhook.
	Objects []plan.ReleaseObject
	// OnConvert is called when a CRD's stored objects are round-tripped through its
	// conversion webhook (progress); the function it returns is called when done.
	OnConvert func(crd string, done *atomic.Int64, total int64) func()
	// Preflight, when set, adds findings of a deeper check for every CRD whose objects are
	// re-encoded at target (e.g. a round trip through a conversion webhook).
	Preflight func(ctx context.Context, live *apiextensionsv1.CustomResourceDefinition, target string) ([]ObjectFinding, error)

	// Confirm is asked once, after the preflight, before the first write; nil means yes.
	Confirm func(*Report) (bool, error)
	// ConfirmServe is asked before the preflight when it can read the objects stored at
	// versions the live CRDs do not serve only by serving them again (Report.ServedAgain):
	// a CRD write, undone when the upgrade is then refused or not confirmed. nil: Confirm.
	ConfirmServe func(*Report) (bool, error)
	// OnEvaluate is called when the objects of a CRD are evaluated (progress); the function
	// it returns is called when done.
	OnEvaluate func(crd string, done *atomic.Int64, total func() int64) func()
	// OnCheck is called when the preflight's deeper check of a CRD's objects starts (its
	// second read of them: what the rewrite at the new storage version loses, and which writes
	// the API server would refuse), with the objects checked so far and their number (-1 while
	// unknown); the function it returns is called when it ends.
	OnCheck func(crd string, done, total func() int64) func()
	// OnBackup is called when the backup step starts writing the backup file, with the
	// objects written to it so far (an object stored at two versions counts twice); the
	// function it returns is called when it ends.
	OnBackup func(done func() int64) func()
	// OnScan is called when a retire step reads every object's managedFields (retire.Options.
	// OnScan), with the CRD's name; the function it returns is called when the read ends.
	OnScan func(crd, what string, done func() int64) func()
	// OnRewrite is called when a rewrite starts; the function it returns when it ends.
	OnRewrite func(crd string, total int64, done func() int64) func()
	// Notify receives a line for every step taken.
	Notify func(string)

	// Hop is set when the release is one hop of a release path (RunPath).
	Hop *HopOptions
	// inPath is the checkpoint of the path this release is a hop of (RunPath): the run keeps
	// its steps there, as the hop's, and Checkpoint is not read (one file per run).
	inPath *pathCheckpoint

	// Memo carries what the first plan found clean to the verify step's plan, which then
	// does not evaluate those objects again when they have not changed (plan.ObjectMemo).
	// Run makes its own (none for a dry run); callers of PlanRelease may leave it nil.
	Memo *plan.ObjectMemo
}

// Step states.
const (
	StatePending = "pending"
	StateDone    = "done"
	StateAlready = "already done"
	StateSkipped = "skipped"
	StateFailed  = "failed"
	StateNotRun  = "not reached"
	StateManual  = "manual"
	// StateDetached: the step's StorageVersionMigration was left rewriting the objects in the
	// cluster (Rewrite.Detach); the same run started again re-attaches to it.
	StateDetached = "running in the cluster"
)

// Report is what an upgrade found and did. Its JSON form is `kubectl crdver upgrade -o json`.
type Report struct {
	// Plan is the plan of the release against the cluster as it was when the run began,
	// with its runbook (Plan.Runbook).
	Plan      *plan.Report `json:"plan"`
	DryRun    bool         `json:"dryRun"`
	Preflight Preflight    `json:"preflight"`
	// ServedAgain are the versions in status.storedVersions the live CRDs do not serve, which
	// the upgrade serves again so that the preflight and the backup read the objects stored
	// at them (empty when none), and what became of each.
	ServedAgain []ServedAgain `json:"servedAgain"`
	Backup      *Backup       `json:"backup,omitempty"`
	// Budgets are what the rewrites of the runbook will ask of the cluster, one per CRD
	// rewritten (migrate.Budget: CRDs of at least migrate.MinBudgetObjects objects), worked out
	// before the first write.
	Budgets []*migrate.Budget `json:"budgets,omitempty"`
	// Hop: the release is this hop of a release path (RunPath).
	Hop *HopOptions `json:"hop,omitempty"`
	// Steps are the runbook's steps and what became of each.
	Steps []StepResult `json:"steps"`
	// FixedValues: what --fix-values converted, per CRD (empty when nothing was to convert).
	FixedValues []*FixValuesReport `json:"fixedValues,omitempty"`
	Verify      *Verify            `json:"verify,omitempty"`
	// Checkpoint is the upgrade's state file (a resumed run continues from it).
	Checkpoint string `json:"checkpoint,omitempty"`
	// Resumed: a checkpoint of an earlier run of the same release on this cluster was found.
	Resumed bool `json:"resumed"`
	// CheckpointIgnored says why a checkpoint found for the release was not used (written for
	// another cluster reached at the same address, or for CRD objects deleted since).
	CheckpointIgnored string `json:"checkpointIgnored,omitempty"`
	// Retries is how many requests were sent again after the network failed them (a
	// connection reset, a response cut short): only requests that cannot change data twice.
	Retries int64 `json:"retries"`
	// AlreadyInPlace says why the release needed no write (an earlier run finished it): every
	// writing step is "already done" and only the verify step ran.
	AlreadyInPlace string `json:"alreadyInPlace,omitempty"`
	// Problems say what keeps the release from being complete (empty when nothing does).
	Problems []string `json:"problems"`
	// Warnings are what the user must still do that does not keep the release from being
	// applied (e.g. change GitOps manifests that write a removed version).
	Warnings []string `json:"warnings"`
	// Outcome is how the run ended, by the decision table (docs/decision-table.md): the
	// result, whether the release is applied and verified, what remains for the user, the exit
	// status and the last line.
	Outcome Outcome `json:"outcome"`
}

// Preflight is what the objects would suffer under the release.
type Preflight struct {
	// DataLoss: objects that lose fields when re-encoded (or read) under the new CRDs.
	DataLoss []ObjectFinding `json:"dataLoss"`
	// Rejected: objects whose no-op update (the rewrite) would be rejected.
	Rejected []ObjectFinding `json:"rejected"`
	// Added: objects whose conversion adds fields or normalises values (Added), which loses
	// nothing (convert's loss rule): reported, never refused.
	Added []ObjectFinding `json:"added,omitempty"`
	// Unknown: what the checks could not evaluate (refused like a loss).
	Unknown []string `json:"unknown"`
	// TypeMismatch: objects holding values whose type does not fit the new storage version's
	// typed schema (plan's type-mismatch finding; Errors are structured-merge-diff's): refused,
	// no flag goes on.
	TypeMismatch []ObjectFinding `json:"typeMismatch,omitempty"`
	// OwnershipLoss: objects whose rewrite drops field managers (Managers), as the API
	// server's dry run of it shows: refused unless AllowOwnershipLoss.
	OwnershipLoss []ObjectFinding `json:"ownershipLoss,omitempty"`
	// InvalidOnRecreate: objects the new CRDs reject on re-create although their writes are
	// accepted (the API server ratchets unchanged fields), with the server's errors. They do
	// not stop the upgrade: they are left for the user (decision table), listed again by verify.
	InvalidOnRecreate []ObjectFinding `json:"invalidOnRecreate"`
	// BlockedCRDs: CRDs the API server would reject for a reason no step removes.
	BlockedCRDs []string `json:"blockedCRDs"`
	// Conversion: CRDs whose conversion cannot convert their stored objects (plan's
	// conversion-webhook finding: the webhook not running, not reachable, failing the API
	// server's checks, or dropped): refused, no flag goes on.
	Conversion []ConversionRefusal `json:"conversion,omitempty"`
	// Refused: the run stops before writing because of the above (without the flags that
	// accept them).
	Refused bool   `json:"refused"`
	Reason  string `json:"reason,omitempty"`
	// Incomplete: the preflight could not complete (a list or a webhook failed): no answer,
	// which no flag accepts (Refused is set too: nothing is written).
	Incomplete bool `json:"incomplete,omitempty"`
	// Totals: how many objects each list would hold, when more were found than it holds
	// (nil when every list is whole; see PreflightTotals and Count).
	Totals *PreflightTotals `json:"totals,omitempty"`
	// Unread: objects may be stored at versions the live CRDs do not serve and --dry-run
	// does not serve them again to read them: what they lose is not evaluated (Refused).
	Unread []string `json:"unread,omitempty"`
	// earlierLoss: a resumed run's checkpoint says the first run found objects losing fields
	// and the loss was not accepted (a data-loss finding, though DataLoss may be empty now).
	earlierLoss bool
}

// ObjectFinding is one object with fields it would lose or errors its write would get.
type ObjectFinding struct {
	CRD       string   `json:"crd"`
	Namespace string   `json:"namespace,omitempty"`
	Name      string   `json:"name"`
	Fields    []string `json:"fields,omitempty"`
	// HeldAt is the version the lost fields are held at, when the preflight package says.
	HeldAt string   `json:"heldAt,omitempty"`
	Errors []string `json:"errors,omitempty"`
	// Added: the fields the conversion adds, and "PATH (normalised)" for the values it
	// writes as another spelling of the same duration or quantity (Preflight.Added).
	Added []string `json:"added,omitempty"`
	// Managers: the field managers the rewrite drops (OwnershipLoss).
	Managers []string `json:"managers,omitempty"`
	// Unknown: what could not be evaluated (no object named), as the check says it.
	Unknown []string `json:"unknown,omitempty"`
	// ReportedInPreflight: (verify's findings) the object was listed by this run's preflight,
	// before the first write.
	ReportedInPreflight bool `json:"reportedInPreflight,omitempty"`
}

// ConversionRefusal is a CRD whose conversion cannot convert its stored objects.
type ConversionRefusal struct {
	CRD string `json:"crd"`
	// Reason is plan's (ConversionCheck.Reason); Instruction what to do first (the runbook
	// step's: deploy the release's webhook and wait until it answers, or fix it).
	Reason      string `json:"reason"`
	Instruction string `json:"instruction"`
	// Objects are the objects it fails, with the first error of each (at most 20).
	Objects []string `json:"objects,omitempty"`
}

// Backup is where the backup went.
type Backup struct {
	File string `json:"file"`
	// Cluster and Release say which cluster (kube-system namespace UID) and release it was
	// taken for; Digest is the file's sha256, checked before a resumed run reuses it.
	Cluster string `json:"cluster,omitempty"`
	Release string `json:"release,omitempty"`
	Digest  string `json:"digest,omitempty"`
	// Resources read, as plural.version.group, and the objects written for each.
	Resources []BackupResource `json:"resources"`
	// Reused: the backup of an earlier, interrupted run of the same release (not taken again:
	// the objects may have been rewritten since).
	Reused bool `json:"reused"`
}

// BackupResource is one resource read at one version.
type BackupResource struct {
	Resource string `json:"resource"`
	Objects  int64  `json:"objects"`
}

// StepResult is a runbook step and what became of it.
type StepResult struct {
	plan.RunbookStep
	State  string `json:"state"`
	Detail string `json:"detail"`
	// Engine is who rewrote the objects of a migrate or retire step (client: this run;
	// cluster: the cluster's StorageVersionMigration, checked by this run: Cluster says what
	// each did).
	Engine  migrate.Engine         `json:"engine,omitempty"`
	Cluster *migrate.ClusterResult `json:"clusterMigration,omitempty"`
}

// Verify is the check after the apply.
type Verify struct {
	CRDs []VerifyCRD `json:"crds"`
	// PlanBreaking lists the CRDs that plan of the same release still finds breaking or
	// unknown: what this upgrade left undone (the release is not complete).
	PlanBreaking []string `json:"planBreaking"`
	// InvalidOnRecreate are the objects plan of the same release finds invalid on re-create:
	// not left undone by the upgrade (it rewrites objects unchanged) but the user's to fix.
	InvalidOnRecreate []ObjectFinding `json:"invalidOnRecreate"`
	// Unchanged counts the objects that plan found clean before the first write and that have
	// not changed since (the same content digest): its answer for them stands, and they were
	// not evaluated again (plan.ObjectMemo).
	Unchanged int64 `json:"unchanged"`
}

// Results of an upgrade (Outcome.Result).
const (
	// ResultComplete: the release is applied and verified, nothing is left (exit 0).
	ResultComplete = "complete"
	// ResultAppliedRemaining: the release is applied and verified; findings reported before
	// the first write remain for the user (Outcome.Remaining; exit 1).
	ResultAppliedRemaining = "applied-with-remaining"
	// ResultNotComplete: something this upgrade should have done is not done (Report.Problems;
	// exit 1).
	ResultNotComplete = "not-complete"
	// ResultRefused: the preflight refused before any write (exit 1).
	ResultRefused = "refused"
	// ResultNotApplied: the storage steps are done; the release's apply was not asked for, or
	// is a deployment tool's (exit 0).
	ResultNotApplied = "not-applied"
	// ResultDryRun: nothing was written (exit 1 when the run would be refused or would leave
	// findings to the user, 0 otherwise).
	ResultDryRun = "dry-run"
	// ResultStopped: not confirmed, interrupted, or the cluster failed (exit 3).
	ResultStopped = "stopped"
	// ResultDetached: a step's StorageVersionMigration was left rewriting the objects in the
	// cluster (Rewrite.Detach): not done; the same run started again re-attaches (exit 3).
	ResultDetached = "detached"
)

// Outcome is how an upgrade ended, by the decision table.
type Outcome struct {
	Result string `json:"result"`
	// Applied: the release's apply is done (by this run or an earlier one of it).
	Applied bool `json:"applied"`
	// Verified: the verification after the apply found nothing this upgrade left undone.
	Verified bool `json:"verified"`
	// Refusals are the finding kinds the preflight refused for (plan.Kind values), or, on a
	// dry run, would refuse for.
	Refusals []plan.Kind `json:"refusals,omitempty"`
	// Outcome: what remains for the user, the exit code (0 complete, 1 the user must act, 3
	// stopped) and the command's last line, as every command ends (package outcome).
	outcome.Outcome
}

// VerifyCRD is the state of one CRD after the upgrade.
type VerifyCRD struct {
	CRD            string   `json:"crd"`
	StorageVersion string   `json:"storageVersion"`
	StoredVersions []string `json:"storedVersions"`
	// StoredOK: status.storedVersions is the storage version only.
	StoredOK bool `json:"storedVersionsOK"`
	// Evidence of the rewrite (every object stored at the storage version), when one ran.
	Evidence string `json:"evidence,omitempty"`
	// SSAChecked objects were sent a dry-run server-side apply (one per set of managedFields
	// versions); SSAFailures are those it failed for.
	SSAChecked  int64    `json:"ssaChecked"`
	SSAFailures []string `json:"ssaFailures"`
	// StaleManagedFields: objects with managedFields entries of versions no longer in the CRD.
	StaleManagedFields int64 `json:"staleManagedFields"`
}
