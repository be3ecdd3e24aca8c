// Package plan predicts, read-only, what applying new CustomResourceDefinitions would do to a
// cluster: whether the API server accepts the update (its own CRD validation), the version and
// schema changes, and what every live object becomes under the new CRD (pruned and defaulted
// on read, a strict re-create, a no-op update), evaluated with the API server's code (the
// preview engine of package explain). It has no cobra and prints nothing: Plan returns a
// Report whose JSON form is the stable output of `kubectl crdver plan -o json`.
package plan

// Report is the result of planning one or more CRDs.
type Report struct {
	Items []Item `json:"items"`
	// KubernetesVersion is the version the plan was judged as (the cluster's, or
	// --kube-version; "1.37").
	KubernetesVersion string `json:"kubernetesVersion,omitempty"`
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
	// ConversionSample: live objects round-tripped through the new webhook (--convert-sample).
	ConversionSample []ConversionSample     `json:"conversionSample,omitempty"`
	Objects          Objects                `json:"objects"`
	ManagedFields    []ManagedFieldsVersion `json:"managedFields"`
	// Steps is the runbook: the commands that make the change safe, in order.
	Steps []string `json:"steps"`
	// Notes say what the plan could not know or assumed.
	Notes []string `json:"notes"`
	// Breaking: the apply would be rejected, a schema change is breaking, or an object loses
	// data or would be rejected on create or update (exit status 1).
	Breaking bool `json:"breaking"`
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

// SchemaChange is one difference between the live and the new schema of the same version.
type SchemaChange struct {
	Version string `json:"version"`
	// Path is dotted from the root; lists and maps are transparent (as in explain).
	Path     string `json:"path"`
	Change   string `json:"change"`
	Breaking bool   `json:"breaking"`
}

// Objects is the evaluation of the live objects under the new CRD.
type Objects struct {
	// Evaluated objects (all, or --sample of them) and the Total in the cluster (-1: unknown).
	Evaluated int64 `json:"evaluated"`
	Total     int64 `json:"total"`
	// ReadVersion is the version reads and no-op updates are evaluated in (the new storage
	// version when served).
	ReadVersion string `json:"readVersion,omitempty"`
	// Findings lists the objects with something to report, in list order.
	Findings []Finding `json:"findings"`
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
}

// losesOrRejected reports whether the finding is breaking.
func (f *Finding) losesOrRejected() bool {
	return len(f.PrunedOnRead) > 0 || len(f.PossiblyPrunedOnRead) > 0 || len(f.CreateErrors) > 0 || len(f.UpdateErrors) > 0
}

func (f *Finding) empty() bool {
	return !f.losesOrRejected() && len(f.DefaultedOnRead) == 0 && len(f.UpdateWarnings) == 0 && len(f.Notes) == 0
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
}
