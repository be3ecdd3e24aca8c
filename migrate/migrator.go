package migrate

import (
	"context"
	"errors"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	ended "github.com/crdver/kubectl-crdver/outcome"
)

// Engine says who rewrites the objects.
type Engine string

// Engines.
const (
	// EngineClient: this process lists and writes back every object (Rewriter).
	EngineClient Engine = "client"
	// EngineCluster: the cluster's StorageVersionMigration controller does (RunCluster).
	EngineCluster Engine = "cluster"
)

// Options are what a migration does. The zero value migrates to the current storage version
// with the client engine and trims status.storedVersions afterwards.
type Options struct {
	// To makes this version the storage version first ("" keeps the current one).
	To string
	// DryRun stops after the plan: nothing is written.
	DryRun bool
	// NoTrim leaves status.storedVersions as it is after the rewrite.
	NoTrim bool
	// Engine is who rewrites the objects ("" is EngineClient).
	Engine Engine
	// Rewrite tunes the client engine. Rewrite.Checkpoint "" means DefaultCheckpointPath.
	// Rewrite.ChunkSize is also the page size of the plan's count.
	Rewrite RewriteOptions
	// ClusterStartTimeout bounds the wait for a controller to pick up a StorageVersionMigration
	// (0: one minute).
	ClusterStartTimeout time.Duration
	// StorageTimeout bounds the wait for the API server to encode writes at the storage
	// version (0: 30 seconds).
	StorageTimeout time.Duration
	// Budget works out, before the first write, what the rewrite will ask of the cluster
	// (Plan.Budget: EstimateBudget).
	Budget bool
}

// Report is what a migration did. Its JSON form is the -o json|yaml output of
// `kubectl crdver migrate`: fields may be added, never renamed or removed.
type Report struct {
	Plan   *Plan  `json:"plan"`
	DryRun bool   `json:"dryRun"`
	Engine Engine `json:"engine"`
	// Preflight is what Migrator.PreWrite found before anything was written (nil without it).
	Preflight any            `json:"preflight,omitempty"`
	Result    *Result        `json:"result,omitempty"`
	Cluster   *ClusterResult `json:"clusterMigration,omitempty"`
	Trim      *TrimResult    `json:"trim,omitempty"`
	// Notes say what the run could not guard (e.g. no lease: two runs at once not detected).
	Notes []string `json:"notes,omitempty"`
	// Retries is how many requests were sent again after the network failed them (a
	// connection reset, a response cut short): only requests that cannot change data twice.
	Retries int64 `json:"retries"`
	// Outcome is how the run ended (set by Migrator.Run, also when it returns an error).
	Outcome ended.Outcome `json:"-"`
}

// Failed is the number of objects that could not be rewritten.
func (r *Report) Failed() int64 {
	switch {
	case r.Result != nil:
		return r.Result.Failed
	case r.Cluster != nil && r.Cluster.Check != nil:
		return r.Cluster.Check.WrittenHere.Failed
	}
	return 0
}

// StorageVersion is the storage version the rewrite ran at ("" before the rewrite).
func (r *Report) StorageVersion() string {
	switch {
	case r.Result != nil:
		return r.Result.StorageVersion
	case r.Cluster != nil:
		return r.Cluster.Evidence.StorageVersion
	}
	return ""
}

// EventKind is what an Event reports.
type EventKind string

// Event kinds.
const (
	// EventStorageSwitched: Version is now the storage version of CRD.
	EventStorageSwitched EventKind = "StorageSwitched"
	// EventClusterCondition: the StorageVersionMigration reached Condition (with Message)
	// after Elapsed.
	EventClusterCondition EventKind = "ClusterCondition"
	// EventNote: Message is a note the user may act on now, before the rewrite (also kept in
	// the report).
	EventNote EventKind = "Note"
)

// Event is a step of a migration as it happens, for a progress display.
type Event struct {
	Kind      EventKind
	CRD       string
	Version   string
	Condition string
	Message   string
	Elapsed   time.Duration
}

// Migrator runs the whole storage-version migration of one CRD, with its safety rules:
//
//  1. the target version is checked once (it exists and is served), then the plan is built;
//  2. nothing is written on a dry run, nor before your rights are checked (and, for the cluster
//     engine, before the StorageVersionMigration API is known to be served);
//  3. a storage switch is confirmed first (Confirm) and followed by a wait until the API server
//     encodes writes at the new version; without a switch the CRD is read fresh and the same
//     wait is done (someone may just have switched it);
//  4. the rewrite resumes from its checkpoint (read once) and is not trimmed after when it was
//     interrupted (InterruptedError);
//  5. status.storedVersions is trimmed only when the rewrite's evidence proves every object
//     is stored at the storage version (Trim), never after failures.
//
// Run returns the report even when the run found problems (Report.Failed, Cluster.Succeeded,
// Trim.Safe say so) or stopped (then with no Plan before planning); errors are *StepError,
// *InterruptedError, or the target check's (*crd.VersionNotFoundError, *NotServedError). How
// the run ended is in Report.Outcome either way.
type Migrator struct {
	Clients *Clients
	Options Options

	// Planned is called with the plan before anything is written (also on a dry run).
	Planned func(p *Plan)
	// PreWrite, when set, is called after Planned and your rights are checked, before anything
	// is written (on a dry run, right after Planned) with the CRD and the version the objects will be rewritten at: a check of
	// what the rewrite would lose or be refused (package preflight). What it returns is kept
	// in Report.Preflight; an error stops the run before the storage switch (a *StepError
	// of StepPreWrite wrapping it), and the report is returned with it.
	PreWrite func(ctx context.Context, crd *apiextensionsv1.CustomResourceDefinition, target string) (any, error)
	// Confirm is asked before the storage version is changed; false stops the run with
	// ErrNotConfirmed. nil means yes: the caller asked for Options.To.
	Confirm func(ctx context.Context, p *Plan) (bool, error)
	// BeforeRewrite, when set, is called once the storage version is the target and the API
	// server encodes writes at it, before the rewrite (either engine), with the CRD as read
	// then: writes that must be encoded at the new storage version and precede the rewrite
	// (upgrade.FixValues, migrate --fix-values). An error stops the run (StepBeforeRewrite)
	// before the rewrite and the trim.
	BeforeRewrite func(ctx context.Context, crd *apiextensionsv1.CustomResourceDefinition) error
	// Progress is called when the client engine's rewrite starts, with the number of objects
	// planned and the live counts; the function it returns is called when the rewrite ends.
	Progress func(total int64, counts func() Counts) (stop func())
	// Event reports the steps as they happen (storage switched, cluster conditions).
	Event func(Event)
	// OwnershipLossConsented says whether the field managers the rewrite dropped (res) were
	// consented to. nil: never.
	OwnershipLossConsented func(res *Result) bool
}

// Run migrates crd (as read by the caller; it is read again before anything is written).
func (m *Migrator) Run(ctx context.Context, crd *apiextensionsv1.CustomResourceDefinition) (*Report, error) {
	before := m.Clients.Retries()
	rep, err := m.run(ctx, crd)
	if rep == nil {
		rep = &Report{DryRun: m.Options.DryRun}
	}
	rep.Retries = m.Clients.Retries() - before
	rep.Outcome = m.end(crd.Name, rep, err)
	return rep, err
}

func (m *Migrator) run(ctx context.Context, crd *apiextensionsv1.CustomResourceDefinition) (*Report, error) {
	o := m.Options
	if o.Engine == "" {
		o.Engine = EngineClient
	}
	if o.StorageTimeout <= 0 {
		o.StorageTimeout = 30 * time.Second
	}
	c := m.Clients
	fail := func(step Step, err error) error {
		return &StepError{Step: step, CRD: crd.Name, Version: o.To, Err: err}
	}

	if o.To != "" {
		if err := CheckTarget(crd, o.To); err != nil {
			return nil, err
		}
	}
	trim := !o.NoTrim
	plan, err := buildPlan(ctx, c, crd, o.To, o.Rewrite.ChunkSize, trim)
	if err != nil {
		return nil, fail(StepPlan, err)
	}
	if o.Budget {
		if plan.Budget, err = EstimateBudget(ctx, c, crd, budgetVersion(crd, plan.TargetVersion), plan.Objects); err != nil {
			return nil, fail(StepPlan, err)
		}
		if plan.Budget != nil && o.Engine == EngineCluster {
			plan.Budget.Unknown = append(plan.Budget.Unknown, "the cluster engine's rate: kube-controller-manager writes the objects one at a time, and only once its garbage collector's cache has seen the migration's revision (seconds after a storage switch, a minute or more on a resource nobody writes, up to tens of minutes without the API server's watch cache), which is not measured here; the rate above is this client's")
		}
	}
	report := &Report{Plan: plan, DryRun: o.DryRun, Engine: o.Engine}
	if m.Planned != nil {
		m.Planned(plan)
	}
	preWrite := func() error {
		if m.PreWrite == nil {
			return nil
		}
		found, err := m.PreWrite(ctx, crd, plan.TargetVersion)
		report.Preflight = found
		if err != nil {
			return fail(StepPreWrite, err)
		}
		return nil
	}
	if o.DryRun {
		return report, preWrite()
	}

	needed := NeededAccess(crd, plan.SwitchStorage, trim)
	if o.Engine == EngineCluster {
		needed = append(needed, ClusterEngineAccess()...)
	}
	if err := CheckAccess(ctx, c, needed); err != nil {
		return report, fail(StepAccess, err)
	}
	// One run at a time on a CRD: held until this run ends.
	lease, note, err := AcquireLease(ctx, c, "kubectl crdver migrate", crd.Name)
	if err != nil {
		return report, fail(StepLease, err)
	}
	defer lease.Release(ctx)
	if note != "" {
		report.Notes = append(report.Notes, note)
	}
	// After the rights (the check may write dry runs), before the first write.
	if err := preWrite(); err != nil {
		return report, err
	}
	var clusterAPI string
	if o.Engine == EngineCluster {
		// Before the storage switch: fail early when the API is not there.
		if clusterAPI, err = ServedClusterMigrationVersion(c); err != nil {
			return report, fail(StepClusterAPI, err)
		}
	}

	if plan.SwitchStorage {
		if m.Confirm != nil {
			ok, err := m.Confirm(ctx, plan)
			if err != nil {
				return report, fail(StepConfirm, err)
			}
			if !ok {
				return report, fail(StepConfirm, ErrNotConfirmed)
			}
		}
		// SwitchStorage reads the CRD fresh and waits for the API server to use the new version.
		if crd, err = SwitchStorage(ctx, c, crd.Name, plan.TargetVersion); err != nil {
			return report, fail(StepSwitchStorage, err)
		}
		m.event(Event{Kind: EventStorageSwitched, CRD: crd.Name, Version: plan.TargetVersion})
	} else {
		if crd, err = c.CRDs.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, crd.Name, metav1.GetOptions{}); err != nil {
			return report, fail(StepGetCRD, err)
		}
		// Someone may just have switched it: writes must be encoded at the new version.
		if err := WaitStorageVersion(ctx, c, crd, o.StorageTimeout); err != nil {
			return report, fail(StepWaitStorage, err)
		}
	}

	if m.BeforeRewrite != nil {
		if err := m.BeforeRewrite(ctx, crd); err != nil {
			return report, fail(StepBeforeRewrite, err)
		}
	}

	var ev Evidence
	if o.Engine == EngineCluster {
		start := time.Now()
		if o.Rewrite.Checkpoint == "" {
			// The migration's record: a run stopped or detached re-attaches to it.
			if o.Rewrite.Checkpoint, err = DefaultCheckpointPath(c.Server, crd.Name); err != nil {
				return report, fail(StepCheckpoint, err)
			}
		}
		cr, err := RewriteCluster(ctx, c, crd, clusterAPI, o.ClusterStartTimeout, o.Rewrite, func(cond, msg string) {
			m.event(Event{Kind: EventClusterCondition, CRD: crd.Name, Condition: cond, Message: msg, Elapsed: time.Since(start)})
		})
		report.Cluster = cr
		var ce *CheckpointError
		if errors.As(err, &ce) {
			return report, fail(StepCheckpoint, err)
		}
		if err != nil {
			return report, fail(StepCluster, err)
		}
		ev = cr.Evidence
	} else {
		res, err := m.rewrite(ctx, crd, plan.Objects, o.Rewrite)
		report.Result = res
		if err != nil {
			var cpe *CheckpointError
			if errors.As(err, &cpe) {
				return report, fail(StepCheckpoint, err)
			}
			return report, fail(StepRewrite, err)
		}
		if res.Interrupted {
			return report, &InterruptedError{CRD: crd.Name, Done: res.Total(), Checkpoint: res.Checkpoint}
		}
		ev = EvidenceOf(res)
	}

	if trim {
		tr, err := Trim(ctx, c, ev)
		if err != nil {
			return report, fail(StepTrim, err)
		}
		report.Trim = tr
	}
	return report, nil
}

// rewrite runs the client engine with the progress display.
func (m *Migrator) rewrite(ctx context.Context, crd *apiextensionsv1.CustomResourceDefinition, total int64, opts RewriteOptions) (*Result, error) {
	if opts.Checkpoint == "" {
		p, err := DefaultCheckpointPath(m.Clients.Server, crd.Name)
		if err != nil {
			return nil, err
		}
		opts.Checkpoint = p
	}
	r, err := NewRewriter(m.Clients, crd, opts)
	if err != nil {
		return nil, err
	}
	// Said before the first write, when the user can still choose, and kept with the result.
	beside := clusterMigrationBeside(ctx, m.Clients, crd, opts.Checkpoint)
	if beside != "" {
		m.event(Event{Kind: EventNote, CRD: crd.Name, Message: beside})
	}
	stop := func() {}
	if m.Progress != nil {
		stop = m.Progress(total, r.Progress)
	}
	res, err := r.Run(ctx)
	stop()
	if res != nil && beside != "" {
		res.Notes = append([]string{beside}, res.Notes...)
	}
	return res, err
}

func (m *Migrator) event(e Event) {
	if m.Event != nil {
		m.Event(e)
	}
}
