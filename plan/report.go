// Package plan predicts, read-only, what applying new CustomResourceDefinitions would do to a
// cluster: whether the API server accepts the update (its own CRD validation), the version and
// schema changes, and what every live object becomes under the new CRD (pruned and defaulted
// on read, a strict re-create, a no-op update), evaluated with the API server's code (the
// preview engine of package explain). It has no cobra and prints nothing: Plan returns a
// Report whose JSON form is the stable output of `kubectl crdver plan -o json`.
package plan

import (
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	"github.com/crdver/kubectl-crdver/ownership"
	"github.com/crdver/kubectl-crdver/preflight"
)

// Report is the result of planning one or more CRDs.
type Report struct {
	Items []Item `json:"items"`
	// Runbook is one ordered runbook for the whole input (the release): fix → backup →
	// storage steps per CRD → one apply → verify.
	Runbook []RunbookStep `json:"runbook"`
	// Summary counts the items by verdict (filled by Summarize).
	Summary Summary `json:"summary"`
	// KubernetesVersion is the version the plan was judged as (the cluster's, or
	// --kube-version; "1.37").
	KubernetesVersion string `json:"kubernetesVersion,omitempty"`
}

// Summary counts the items of a report by verdict.
type Summary struct {
	// Verdict is the worst verdict of the items.
	Verdict  string `json:"verdict"`
	CRDs     int    `json:"crds"`
	Breaking int    `json:"breaking"`
	Unknown  int    `json:"unknown"`
	// InvalidOnRecreate counts the CRDs whose verdict is invalid-on-recreate.
	InvalidOnRecreate int `json:"invalidOnRecreate"`
	Stricter          int `json:"stricter"`
	Safe              int `json:"safe"`
	// ExitCode is plan's exit status for the report (the decision table: 1 for breaking,
	// unknown and invalid-on-recreate; 0 for stricter and safe, 1 with --fail-on stricter).
	ExitCode int `json:"exitCode"`
}

// Summarize fills r.Summary from the items.
func (r *Report) Summarize() {
	s := Summary{Verdict: VerdictSafe, CRDs: len(r.Items)}
	for i := range r.Items {
		v := r.Items[i].Verdict
		switch v {
		case VerdictBreaking:
			s.Breaking++
		case VerdictUnknown:
			s.Unknown++
		case VerdictInvalidOnRecreate:
			s.InvalidOnRecreate++
		case VerdictStricter:
			s.Stricter++
		default:
			s.Safe++
		}
		s.Verdict = Worse(s.Verdict, v)
	}
	s.ExitCode = r.ExitCode(false)
	r.Summary = s
}

// Stricter reports whether any item's verdict is stricter.
func (r *Report) Stricter() bool {
	for i := range r.Items {
		if r.Items[i].Verdict == VerdictStricter {
			return true
		}
	}
	return false
}

// Breaking reports whether any item is breaking (see Item.Breaking).
func (r *Report) Breaking() bool {
	for i := range r.Items {
		if r.Items[i].Breaking {
			return true
		}
	}
	return false
}

// Operations of an Item.
const (
	OperationCreate = "create"
	OperationUpdate = "update"
)

// Item is the plan of one CRD.
type Item struct {
	CRD string `json:"crd"`
	// Operation is create when the CRD is not in the cluster, update otherwise.
	Operation string `json:"operation"`
	Apply     Apply  `json:"apply"`
	// ApplyVerdictSource says where Apply comes from: server-dry-run or offline.
	ApplyVerdictSource string `json:"applyVerdictSource,omitempty"`
	// StorageVersion before (the live CRD; "" for a create) and after the apply.
	StorageVersion StorageChange `json:"storageVersion"`
	// StoredVersionsAfterApply is status.storedVersions as the API server leaves it after the
	// apply (it appends the new storage version).
	StoredVersionsAfterApply []string `json:"storedVersionsAfterApply"`
	// MigrationPending: after the apply, storedVersions lists versions other than the storage
	// version, so objects may be encoded at them in etcd (kubectl crdver migrate).
	MigrationPending bool `json:"migrationPending"`
	// MigrationObjects is how many objects the pending migration concerns (every object of
	// the CRD: the API cannot show which are encoded at an old version); 0 when none is pending.
	MigrationObjects int64          `json:"migrationObjects"`
	Versions         VersionChanges `json:"versions"`
	SchemaChanges    []SchemaChange `json:"schemaChanges"`
	// Conversion lists changes of spec.conversion.
	Conversion []string `json:"conversion"`
	// ConversionCheck is the conversion the new CRD relies on, judged where the release makes
	// stored objects read or written at another version (conversion.go); nil when it needs
	// none.
	ConversionCheck *ConversionCheck       `json:"conversionCheck,omitempty"`
	Objects         Objects                `json:"objects"`
	ManagedFields   []ManagedFieldsVersion `json:"managedFields"`
	// Steps are the release runbook's steps for this CRD alone (Report.Runbook orders the
	// whole release; follow that one when the input holds several CRDs).
	Steps []string `json:"steps"`
	// Notes say what the plan could not know or assumed.
	Notes []string `json:"notes"`
	// Breaking: the verdict is breaking or unknown: the apply would be rejected, an object
	// loses data or its next write would be rejected, server-side apply fails on objects, a
	// manager still writes a version that disappears, or the plan cannot tell
	// (BreakingReasons, UnknownReasons). Objects only invalid on re-create do not make an
	// item breaking (see Verdict and the decision table).
	Breaking bool `json:"breaking"`
	// Verdict is safe, stricter, invalid-on-recreate, unknown or breaking (the Verdict
	// constants; docs/decision-table.md).
	Verdict string `json:"verdict"`
	// Kinds are the kinds of finding the plan made (decision table rows), most severe first.
	Kinds []Kind `json:"kinds"`
	// BreakingReasons say what live breaks or loses data, one sentence each.
	BreakingReasons []string `json:"breakingReasons"`
	// UnknownReasons say what the plan could not tell that might break something live.
	UnknownReasons []string `json:"unknownReasons"`
	// InvalidOnRecreateReasons say which objects the new schema rejects on re-create although
	// their writes are accepted (the objects' findings have the API server's errors).
	InvalidOnRecreateReasons []string `json:"invalidOnRecreateReasons"`
	// Stricter are the schema changes that hold new objects and changes to stricter rules
	// (or drop fields no evaluated object holds); no evaluated live object is broken by them
	// unless BreakingReasons says so.
	Stricter []SchemaChange `json:"stricter"`

	// allEvaluated: every live object was evaluated (not a sample, none skipped).
	allEvaluated bool
	// storedVersionsUnknown: the live CRD came without status.storedVersions.
	storedVersionsUnknown bool

	// live and next are the CRDs planned (live nil for a create), for the runbook.
	live, next *apiextensionsv1.CustomResourceDefinition
	// objects is the tally of every finding of the object pass (nil: none ran; tally()
	// makes one from Objects.Findings).
	objects *objectTally
	// census is the managedFields census of every object the pass listed (nil: not all were).
	census *ownership.Census
}

// Census is the managedFields census of every live object, as the plan listed them (nil when
// the plan did not list them all): a later step of the same run need not read them again.
func (it *Item) Census() *ownership.Census { return it.census }

// CRDs are the live (nil for a create) and new CRD the item was planned with.
func (it *Item) CRDs() (live, next *apiextensionsv1.CustomResourceDefinition) {
	return it.live, it.next
}

// Apply is the API server's verdict on the CRD create or update.
type Apply struct {
	Allowed bool `json:"allowed"`
	// Errors are the API server's messages (the same text it would return).
	Errors   []string `json:"errors"`
	Warnings []string `json:"warnings,omitempty"`
}

// StorageChange is the storage version before and after.
type StorageChange struct {
	Before string `json:"before"`
	After  string `json:"after"`
}

// VersionChanges lists the versions the apply adds, removes, stops serving or deprecates.
type VersionChanges struct {
	Added      []string `json:"added"`
	Removed    []string `json:"removed"`
	Unserved   []string `json:"unserved"`
	Deprecated []string `json:"deprecated"`
}

// SchemaChange is one difference between the live and the new schema of the same version, or
// (From set) between the live schema of version From (the old storage version, or a removed
// version still in storedVersions) and the new storage version Version: what objects encoded at
// From become when read and rewritten at Version.
type SchemaChange struct {
	Version string `json:"version"`
	// From is the live version compared with the new Version ("": the same version).
	From string `json:"from,omitempty"`
	// Path is dotted from the root; lists and maps are transparent (as in explain).
	Path   string `json:"path"`
	Change string `json:"change"`
	// Breaking: the change alone can break an object valid before (Effect lossy or stricter);
	// whether one is broken is the objects' evaluation (Item.Verdict).
	Breaking bool `json:"breaking"`
	// Effect is lossy (objects holding the field lose data), stricter (new objects and changes
	// are held to stricter rules or other defaults) or compatible.
	Effect string `json:"effect"`
}

// Versions labels the change: its version, or "FROM → VERSION" when the live version compared
// is another (the one label of the table, the human report and -o markdown).
func (c SchemaChange) Versions() string {
	if c.From != "" {
		return c.From + " → " + c.Version
	}
	return c.Version
}

// Effects of a SchemaChange.
const (
	EffectLossy      = "lossy"
	EffectStricter   = "stricter"
	EffectCompatible = "compatible"
)

// Objects is the evaluation of the live objects under the new CRD.
type Objects struct {
	// Evaluated objects (all, or --sample of them) and the Total in the cluster (-1: unknown).
	Evaluated int64 `json:"evaluated"`
	Total     int64 `json:"total"`
	// ReadVersion is the version reads and no-op updates are evaluated in (the new storage
	// version when served).
	ReadVersion string `json:"readVersion,omitempty"`
	// Findings lists the objects with something to report, in list order: the first
	// Options.MaxFindings of them (DefaultMaxFindings); Omitted counts the others. The verdict,
	// its reasons and the runbook count every one.
	Findings []Finding `json:"findings"`
	Omitted  int64     `json:"omitted,omitempty"`
	Notes    []string  `json:"notes,omitempty"`
}

// Finding is what happens to one object under the new CRD. Paths are dotted as in preview.
type Finding struct {
	Namespace string `json:"namespace,omitempty"`
	Name      string `json:"name"`
	// PrunedOnRead: fields the next GET no longer shows (and the next write removes from etcd).
	PrunedOnRead []string `json:"prunedOnRead"`
	// DefaultedOnRead: fields a new default fills on read.
	DefaultedOnRead []string `json:"defaultedOnRead"`
	// CreateErrors: why re-creating the object as listed (a restore, a GitOps replace, with
	// the chosen fieldValidation) would be rejected.
	CreateErrors []string `json:"createErrors"`
	// CreateErrorsAfterLoss: why re-creating the object as the new storage version holds it
	// after the runbook's migration (read at the read version, once any fields it loses are
	// gone: what the verify step's plan re-creates) would be rejected, where that can differ
	// from the re-create as listed: the object loses fields (the strict re-create as listed
	// stops at the unknown fields the loss drops, so the schema errors behind them, e.g. a
	// required field that replaces a removed one, only show on the object as read), or it is
	// listed at a version whose schema differs from the read version's (one that does not
	// require what the read version requires).
	CreateErrorsAfterLoss []string `json:"createErrorsAfterLoss,omitempty"`
	// UpdateErrors: why a no-op update (a controller's next write) would be rejected.
	UpdateErrors []string `json:"updateErrors"`
	// UpdateWarnings: warnings of the no-op update (CEL rules the object violates that
	// ratcheting lets pass).
	UpdateWarnings []string `json:"updateWarnings,omitempty"`
	// PossiblyPrunedOnRead: fields the next read drops if the object is encoded at another
	// version in etcd than assumed (a migration is pending: the API cannot show which).
	PossiblyPrunedOnRead []string `json:"possiblyPrunedOnRead,omitempty"`
	// Notes: where the answer depends on what the API cannot show (the encoding version).
	Notes []string `json:"notes,omitempty"`
	// TypeMismatches: values whose type (or shape: scalar, list, map) does not fit the typed
	// schema of the read version (the API server's typing for server-side apply and
	// managedFields): every server-side apply of the object fails, a rewrite cannot record
	// field ownership (servers before 1.37 drop all of its managedFields), and a re-create as
	// read is rejected (TypeRecreateErrors).
	TypeMismatches []preflight.TypeMismatch `json:"typeMismatches,omitempty"`
	// ManagersLost: the field managers the runbook's rewrite at the new storage version drops
	// (ownership-loss), or why that cannot be told (its Unknown), as the preflight of that
	// rewrite finds them (ownershiploss.go).
	ManagersLost *ManagersLost `json:"managersLost,omitempty"`
	// TypeRecreateErrors: the API server's errors for a create of the object as read at the
	// read version (the values that do not fit are rejected there).
	TypeRecreateErrors []string `json:"typeRecreateErrors,omitempty"`
	// Kinds are the finding's kinds (decision table): data-loss, unknown, rejected-write,
	// type-mismatch, ownership-loss, invalid-on-recreate.
	Kinds []Kind `json:"kinds,omitempty"`
}

// losesOrRejected reports whether the finding is breaking.
func (f *Finding) losesOrRejected() bool {
	return len(f.PrunedOnRead) > 0 || len(f.PossiblyPrunedOnRead) > 0 || len(f.CreateErrors) > 0 || len(f.UpdateErrors) > 0 || len(f.TypeMismatches) > 0 || f.ManagersLost != nil
}

func (f *Finding) empty() bool {
	return !f.losesOrRejected() && len(f.CreateErrorsAfterLoss) == 0 && len(f.DefaultedOnRead) == 0 && len(f.UpdateWarnings) == 0 && len(f.Notes) == 0
}

// ManagedFieldsVersion summarises the managedFields entries of one apiVersion.
type ManagedFieldsVersion struct {
	Version string `json:"version"`
	// Managers that last wrote this version, sorted.
	Managers []string `json:"managers"`
	// Objects with at least one entry of this version.
	Objects int64 `json:"objects"`
	// RemovedByThisChange: the new CRD no longer has this version; server-side apply fails on
	// these objects and a plain update wipes their managedFields (kubernetes#111937).
	RemovedByThisChange bool `json:"removedByThisChange"`
	// UnservedByThisChange: the version stays but is no longer served: these managers'
	// requests will fail with 404.
	UnservedByThisChange bool `json:"unservedByThisChange,omitempty"`
	// Writers are the managers' entries of this version (manager, operation, subresource,
	// objects, last write) with what each entry says about its manager.
	Writers []ManagerWriter `json:"writers"`
}

// ManagerWriter is one field manager's entries of one version.
type ManagerWriter struct {
	ownership.Writer
	// Role: applier (manifests applied again on every sync: it still writes this version),
	// one-time (a kubectl create, edit, label…: it wrote once), or controller (it may or may
	// not write this version again).
	Role ownership.Role `json:"role"`
	// Summary says what the entry means, e.g. "created at v1alpha2 by kubectl-create".
	Summary string `json:"summary"`
	// Advice, when the change removes or stops serving the version, says what to change,
	// e.g. "change the manifests of kustomize-controller to apiVersion example.com/v1".
	Advice string `json:"advice,omitempty"`
}
