// Package retire prepares a cluster so that a version of a CRD can be dropped, in a safe
// order, each step re-checked against a fresh read of the CRD and resumable from the live
// state: switch the storage version away from it → rewrite every object (the migrate engine,
// checkpointed) → trim status.storedVersions (migrate's evidence guard) → move every
// managedFields entry naming it to the target version keeping each manager's ownership (the
// ownership package) → optionally unserve it and remove it from spec.versions.
//
// It is the library behind `kubectl crdver retire`: a Go program calling Run gets the same
// guarantees. It has no command-line code: questions, progress and printing are callbacks.
package retire

import (
	"context"
	"errors"
	"fmt"
	crdinfo "github.com/crdver/kubectl-crdver/crd"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/version"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/util/retry"

	"github.com/crdver/kubectl-crdver/migrate"
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
	// Confirm is asked once, after planning, before the first write; nil means yes.
	Confirm func(*Plan) (bool, error)
	// OnRewrite is called when the object rewrite starts (e.g. to show progress); the
	// function it returns is called when the rewrite ends.
	OnRewrite func(r *migrate.Rewriter, total int64) func()
	// Notify receives a line for every step taken.
	Notify func(string)
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
	// "failed".
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
	// ManagedBy says which tool seems to manage the CRD ("" when none was recognised).
	ManagedBy string `json:"managedBy,omitempty"`
	Steps     []Step `json:"steps"`
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
}

// Result is what Run did.
type Result struct {
	Plan    *Plan               `json:"plan"`
	DryRun  bool                `json:"dryRun"`
	Rewrite *migrate.Result     `json:"rewrite,omitempty"`
	Trim    *migrate.TrimResult `json:"trim,omitempty"`
	Fields  *FieldsResult       `json:"managedFields,omitempty"`
	// WritersSinceStart are managers that wrote Version after the run began.
	WritersSinceStart []ownership.Writer `json:"writersSinceStart"`
	// Problems say what keeps Version from being dropped safely (empty when nothing does).
	Problems []string `json:"problems"`
}

type runner struct {
	c     *migrate.Clients
	o     Options
	res   *Result
	plan  *Plan
	start time.Time

	mu      sync.Mutex
	writers map[string]ownership.Writer // entries of Version written since start
	// planLast is each manager's last write of Version in the plan's census.
	planLast map[string]time.Time
}

func writerKey(manager, op, sub string) string { return manager + "\x00" + op + "\x00" + sub }

// addWriter records w as a writer of Version since the run began.
func (r *runner) addWriter(w ownership.Writer) {
	r.mu.Lock()
	defer r.mu.Unlock()
	k := writerKey(w.Manager, w.Operation, w.Subresource)
	old, ok := r.writers[k]
	if ok {
		w.Objects += old.Objects
		if w.LastWrite == nil || (old.LastWrite != nil && w.LastWrite.Before(old.LastWrite)) {
			w.LastWrite = old.LastWrite
		}
	}
	r.writers[k] = w
}

// sawEntries records the entries of apiVersion from that were written since the run began:
// a time at or after the start (one-second precision) that is later than the manager's last
// write in the plan's census, or a manager the census did not see.
func (r *runner) sawEntries(entries []metav1.ManagedFieldsEntry, from string) {
	for _, e := range entries {
		if e.APIVersion != from || e.Time == nil || e.Time.Time.Before(r.start) {
			continue
		}
		if last, ok := r.planLast[writerKey(e.Manager, string(e.Operation), e.Subresource)]; ok && !e.Time.Time.After(last) {
			continue
		}
		t := *e.Time
		r.addWriter(ownership.Writer{Manager: e.Manager, Operation: string(e.Operation), Subresource: e.Subresource, Objects: 1, LastWrite: &t})
	}
}

func (r *runner) notify(format string, args ...any) {
	if r.o.Notify != nil {
		r.o.Notify(fmt.Sprintf(format, args...))
	}
}

func (r *runner) step(name string) *Step {
	for i := range r.plan.Steps {
		if r.plan.Steps[i].Name == name {
			return &r.plan.Steps[i]
		}
	}
	return &Step{}
}

func (r *runner) getCRD(ctx context.Context) (*apiextensionsv1.CustomResourceDefinition, error) {
	crd, err := r.c.CRDs.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, r.o.CRD, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("getting %s: %w", r.o.CRD, err)
	}
	return crd, nil
}

// Run plans the retirement and, unless DryRun, carries it out. Steps found done in the live
// state (and in migrate's checkpoint) are not done again, so an interrupted run is resumed by
// running it again. The error is for what stopped the run (unreachable, forbidden,
// interrupted, not confirmed); what keeps the version from being dropped safely is in
// Result.Problems.
func Run(ctx context.Context, c *migrate.Clients, o Options) (*Result, error) {
	if o.Rewrite.ChunkSize <= 0 {
		o.Rewrite.ChunkSize = 500
	}
	if o.Rewrite.Concurrency <= 0 {
		o.Rewrite.Concurrency = 16
	}
	if o.Rewrite.MaxAttempts <= 0 {
		o.Rewrite.MaxAttempts = 8
	}
	if o.Rewrite.Checkpoint == "" {
		p, err := migrate.DefaultCheckpointPath(c.Server, o.CRD)
		if err != nil {
			return nil, err
		}
		o.Rewrite.Checkpoint = p
	}
	// managedFields times have a precision of one second: a write in the second the run
	// began counts as written since.
	start := time.Now().Truncate(time.Second)
	r := &runner{c: c, o: o, start: start, writers: map[string]ownership.Writer{}}
	crd, err := r.getCRD(ctx)
	if err != nil {
		return nil, err
	}
	plan, err := BuildPlan(ctx, c, crd, o)
	if err != nil {
		return nil, err
	}
	r.plan = plan
	r.planLast = map[string]time.Time{}
	for _, w := range plan.Writers {
		if w.LastWrite != nil {
			r.planLast[writerKey(w.Manager, w.Operation, w.Subresource)] = w.LastWrite.Time
		}
	}
	r.res = &Result{Plan: plan, DryRun: o.DryRun, WritersSinceStart: []ownership.Writer{}, Problems: []string{}}
	if o.DryRun {
		return r.res, nil
	}
	// Every right the pending steps need, before anything is written.
	needed := migrate.NeededAccess(crd, plan.StorageVersion == o.Version, slices.Contains(crd.Status.StoredVersions, o.Version))
	if o.Unserve || o.Remove {
		needed = append(needed, migrate.Access{Verb: "update", Group: apiextensionsv1.GroupName, Resource: "customresourcedefinitions", Name: crd.Name})
	}
	if err := migrate.CheckAccess(ctx, c, needed); err != nil {
		return r.res, err
	}
	if o.Confirm != nil {
		ok, err := o.Confirm(plan)
		if err != nil {
			return r.res, err
		}
		if !ok {
			return r.res, ErrNotConfirmed
		}
	}
	if err := r.run(ctx, start); err != nil {
		for i := range plan.Steps {
			if plan.Steps[i].State == StatePending {
				plan.Steps[i].State = StateUnreachd
			}
		}
		return r.res, err
	}
	return r.res, nil
}

// BuildPlan works out the target version and which steps are still to do, from crd (fresh from
// the cluster) and a census of the objects' managedFields.
func BuildPlan(ctx context.Context, c *migrate.Clients, crd *apiextensionsv1.CustomResourceDefinition, o Options) (*Plan, error) {
	ver, ok := lookup(crd, o.Version)
	if !ok {
		return nil, fmt.Errorf("%w: %s: version %q is not in spec.versions (have: %s); if an earlier retire removed it, nothing is left to do", ErrUsage, crd.Name, o.Version, strings.Join(names(crd), ", "))
	}
	target, err := pickTarget(crd, o.Version, o.To)
	if err != nil {
		return nil, err
	}
	storage := crdinfo.StorageVersion(crd)
	p := &Plan{CRD: crd.Name, Version: o.Version, Target: target, StorageVersion: storage,
		StoredVersions: append([]string{}, crd.Status.StoredVersions...), Served: ver.Served, ManagedBy: ManagedBy(crd)}
	census, err := ownership.Take(ctx, c.Metadata, crdinfo.GVR(crd, target), o.Rewrite.ChunkSize)
	if err != nil {
		return nil, fmt.Errorf("reading the managedFields of %s: %w", crd.Name, err)
	}
	p.Objects = census.Objects
	row := census.Of(o.Version)
	p.EntryObjects, p.Writers = row.Objects, row.Managers

	add := func(name, state, detail string) {
		p.Steps = append(p.Steps, Step{Name: name, State: state, Detail: detail})
	}
	if storage == o.Version {
		add(StepSwitch, StatePending, fmt.Sprintf("make %s the storage version (now %s)", target, storage))
	} else {
		add(StepSwitch, StateAlready, fmt.Sprintf("the storage version is %s", storage))
	}
	stored := slices.Contains(crd.Status.StoredVersions, o.Version)
	newStorage := storage
	if storage == o.Version {
		newStorage = target
	}
	if stored {
		detail := fmt.Sprintf("rewrite %d objects so that each is stored at %s (resumes from the checkpoint)", p.Objects, newStorage)
		if storage != o.Version {
			if ev, _ := migrate.CompletedEvidence(c.Server, crd, o.Rewrite.Checkpoint); ev != nil {
				detail = fmt.Sprintf("a completed run is recorded in %s: not rewritten again", o.Rewrite.Checkpoint)
			}
		}
		add(StepRewrite, StatePending, detail)
		add(StepTrim, StatePending, fmt.Sprintf("if every object is accounted for, set status.storedVersions to [%s]", newStorage))
	} else {
		add(StepRewrite, StateAlready, fmt.Sprintf("%s is not in status.storedVersions [%s]: no object is stored at it", o.Version, strings.Join(crd.Status.StoredVersions, " ")))
		add(StepTrim, StateAlready, fmt.Sprintf("status.storedVersions is [%s]", strings.Join(crd.Status.StoredVersions, " ")))
	}
	if row.Objects > 0 {
		add(StepManagedFields, StatePending, fmt.Sprintf("move the managedFields entries of %s in %d objects to %s, keeping each manager's fields", o.Version, row.Objects, target))
	} else {
		add(StepManagedFields, StateAlready, fmt.Sprintf("no object has managedFields entries of %s", o.Version))
	}
	switch {
	case !o.Unserve && !o.Remove:
		add(StepUnserve, StateSkipped, "not asked (--unserve)")
	case !ver.Served:
		add(StepUnserve, StateAlready, fmt.Sprintf("%s is not served", o.Version))
	default:
		add(StepUnserve, StatePending, fmt.Sprintf("set served: false on %s", o.Version))
	}
	if o.Remove {
		add(StepRemove, StatePending, fmt.Sprintf("remove %s from spec.versions", o.Version))
	} else {
		add(StepRemove, StateSkipped, "not asked (--remove)")
	}
	return p, nil
}

func (r *runner) run(ctx context.Context, start time.Time) error {
	o := r.o
	plan := r.plan

	// 1. Switch the storage version away from o.Version.
	crd, err := r.getCRD(ctx)
	if err != nil {
		return err
	}
	if s := r.step(StepSwitch); crdinfo.StorageVersion(crd) == o.Version {
		if crd, err = migrate.SwitchStorage(ctx, r.c, crd.Name, plan.Target); err != nil {
			s.State, s.Detail = StateFailed, err.Error()
			return fmt.Errorf("making %s the storage version of %s: %w", plan.Target, crd.Name, err)
		}
		s.State, s.Detail = StateDone, fmt.Sprintf("the storage version is now %s", plan.Target)
		r.notify("storage version of %s is now %s", crd.Name, plan.Target)
	} else if s.State == StatePending {
		s.State = StateAlready
	}

	// 2 and 3. Rewrite every object, then trim, unless the live state shows it done.
	if crd, err = r.getCRD(ctx); err != nil {
		return err
	}
	rw, tr := r.step(StepRewrite), r.step(StepTrim)
	if slices.Contains(crd.Status.StoredVersions, o.Version) {
		if err := migrate.WaitStorageVersion(ctx, r.c, crd, 30*time.Second); err != nil {
			return err
		}
		ev, err := migrate.CompletedEvidence(r.c.Server, crd, o.Rewrite.Checkpoint)
		if err != nil {
			return err
		}
		if ev != nil {
			rw.State, rw.Detail = StateAlready, fmt.Sprintf("a completed run is recorded in %s", o.Rewrite.Checkpoint)
		} else {
			rwr, err := migrate.NewRewriter(r.c, crd, o.Rewrite)
			if err != nil {
				return err
			}
			stop := func() {}
			if o.OnRewrite != nil {
				stop = o.OnRewrite(rwr, plan.Objects)
			}
			res, err := rwr.Run(ctx)
			stop()
			r.res.Rewrite = res
			if err != nil {
				rw.State, rw.Detail = StateFailed, err.Error()
				return fmt.Errorf("rewriting the objects of %s: %w", crd.Name, err)
			}
			if res.Interrupted {
				rw.State, rw.Detail = StateFailed, fmt.Sprintf("interrupted after %d objects; progress saved in %s", res.Total(), res.Checkpoint)
				return fmt.Errorf("%w: %d objects of %s done, progress saved in %s", ErrInterrupted, res.Total(), crd.Name, res.Checkpoint)
			}
			e := migrate.EvidenceOf(res)
			ev = &e
			rw.State, rw.Detail = StateDone, fmt.Sprintf("%d objects accounted for (rewritten %d, already current %d, deleted %d, failed %d)", res.Total(), res.Rewritten, res.Current, res.Deleted, res.Failed)
			r.notify("rewrote the objects of %s: %s", crd.Name, rw.Detail)
		}
		t, err := migrate.Trim(ctx, r.c, *ev)
		if err != nil {
			tr.State, tr.Detail = StateFailed, err.Error()
			return err
		}
		r.res.Trim = t
		switch {
		case t.Trimmed:
			tr.State, tr.Detail = StateDone, fmt.Sprintf("status.storedVersions [%s] -> [%s]", strings.Join(t.Before, " "), strings.Join(t.After, " "))
			r.notify("%s", tr.Detail)
		case t.Safe:
			tr.State, tr.Detail = StateAlready, t.Reason
		default:
			tr.State, tr.Detail = StateRefused, t.Reason
			r.problem("status.storedVersions still lists %s: %s", o.Version, t.Reason)
		}
	} else {
		if rw.State == StatePending {
			rw.State = StateAlready
		}
		if tr.State == StatePending {
			tr.State = StateAlready
		}
	}

	// 4. Move the managedFields entries.
	if crd, err = r.getCRD(ctx); err != nil {
		return err
	}
	if _, ok := lookup(crd, o.Version); !ok {
		return fmt.Errorf("%s: version %q was removed from spec.versions during the run: its managedFields entries can no longer be converted", crd.Name, o.Version)
	}
	mf := r.step(StepManagedFields)
	fr, err := r.moveFields(ctx, crd)
	r.res.Fields = fr
	if err != nil {
		mf.State, mf.Detail = StateFailed, err.Error()
		return err
	}
	r.notify("moved the managedFields entries of %s in %d objects; checking for writers of %s", o.Version, fr.Updated, o.Version)
	if err := r.checkWriters(ctx, crd, fr); err != nil {
		return err
	}
	switch {
	case fr.Updated == 0 && fr.Remaining.Objects == 0:
		mf.State, mf.Detail = StateAlready, fmt.Sprintf("no object has managedFields entries of %s", o.Version)
	case fr.Remaining.Objects == 0:
		mf.State, mf.Detail = StateDone, fmt.Sprintf("%d objects updated: %d entries moved to %s (%d with renamed fields converted, %d merged)", fr.Updated, fr.Moved, plan.Target, fr.Converted, fr.Merged)
	default:
		mf.State = StateFailed
		mf.Detail = fmt.Sprintf("%d objects updated; %d objects still hold entries of %s", fr.Updated, fr.Remaining.Objects, o.Version)
	}
	r.notify("managedFields: %s", mf.Detail)
	for _, u := range fr.Unresolved {
		r.problem("%s: the managedFields entries of %s were not moved: %s", objName(u), o.Version, u.Reason)
	}
	for _, f := range fr.Failed {
		r.problem("%s: updating its managedFields failed: %s", objName(f), f.Reason)
	}
	if len(r.res.WritersSinceStart) > 0 {
		r.problem("%s still wrote %s after this run began: stop it (or make it write %s) and run retire again", describeWriters(r.res.WritersSinceStart), o.Version, plan.Target)
	} else if fr.Remaining.Objects > 0 && len(fr.Unresolved)+len(fr.Failed) == 0 {
		r.problem("%d objects still hold managedFields entries of %s (%s): run retire again", fr.Remaining.Objects, o.Version, describeWriters(fr.Remaining.Managers))
	}

	// 5 and 6. Unserve and remove.
	if !o.Unserve && !o.Remove {
		return nil
	}
	blocked := ""
	switch {
	case len(r.res.WritersSinceStart) > 0:
		blocked = fmt.Sprintf("%s wrote %s since the run began", describeWriters(r.res.WritersSinceStart), o.Version)
	case fr.Remaining.Objects > 0:
		blocked = fmt.Sprintf("%d objects still hold managedFields entries of %s", fr.Remaining.Objects, o.Version)
	case r.res.Trim != nil && !r.res.Trim.Safe:
		blocked = "status.storedVersions was not trimmed"
	}
	if blocked != "" && !o.Force {
		for _, n := range []string{StepUnserve, StepRemove} {
			if s := r.step(n); s.State == StatePending {
				s.State, s.Detail = StateRefused, blocked+" (--force to do it anyway)"
			}
		}
		r.problem("not unserving or removing %s: %s (--force to do it anyway)", o.Version, blocked)
		return nil
	}
	if err := r.changeCRD(ctx, StepUnserve, o.Unserve || o.Remove); err != nil {
		return err
	}
	if o.Remove {
		return r.changeCRD(ctx, StepRemove, true)
	}
	return nil
}

func (r *runner) problem(format string, args ...any) {
	r.res.Problems = append(r.res.Problems, fmt.Sprintf(format, args...))
}

// checkWriters reads every object's managedFields again after the pass. An entry of Version on
// an object whose entries were all moved was written after the move: its manager writes
// Version now. fr.Remaining gets the census of what is left.
func (r *runner) checkWriters(ctx context.Context, crd *apiextensionsv1.CustomResourceDefinition, fr *FieldsResult) error {
	kept := map[string]bool{}
	for _, f := range append(append([]migrate.Failure{}, fr.Unresolved...), fr.Failed...) {
		kept[objName(f)] = true
	}
	from := crd.Spec.Group + "/" + r.o.Version
	gvr := crdinfo.GVR(crd, r.plan.Target)
	err := ownership.EachObject(ctx, r.c.Metadata, gvr, r.o.Rewrite.ChunkSize, func(m *metav1.PartialObjectMetadata) error {
		if kept[objName(migrate.Failure{Namespace: m.Namespace, Name: m.Name})] {
			return nil
		}
		for _, e := range m.ManagedFields {
			if e.APIVersion == from {
				w := ownership.Writer{Manager: e.Manager, Operation: string(e.Operation), Subresource: e.Subresource, Objects: 1}
				if e.Time != nil {
					t := *e.Time
					w.LastWrite = &t
				}
				r.addWriter(w)
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("reading the managedFields of %s: %w", crd.Name, err)
	}
	census, err := ownership.Take(ctx, r.c.Metadata, gvr, r.o.Rewrite.ChunkSize)
	if err != nil {
		return fmt.Errorf("reading the managedFields of %s: %w", crd.Name, err)
	}
	fr.Remaining = census.Of(r.o.Version)
	for _, w := range r.writers {
		r.res.WritersSinceStart = append(r.res.WritersSinceStart, w)
	}
	sort.Slice(r.res.WritersSinceStart, func(i, j int) bool {
		a, b := r.res.WritersSinceStart[i], r.res.WritersSinceStart[j]
		return writerKey(a.Manager, a.Operation, a.Subresource) < writerKey(b.Manager, b.Operation, b.Subresource)
	})
	return nil
}

// changeCRD unserves or removes the version: a fresh GET, the guards re-checked, an update
// carrying the resourceVersion just read (re-read and re-checked on conflict).
func (r *runner) changeCRD(ctx context.Context, name string, wanted bool) error {
	s := r.step(name)
	if !wanted || s.State != StatePending {
		return nil
	}
	v := r.o.Version
	var detail string
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		crd, err := r.getCRD(ctx)
		if err != nil {
			return err
		}
		detail = ""
		if by := ManagedBy(crd); by != "" && !r.o.Force {
			detail = fmt.Sprintf("%s looks managed by %s, which would put %s back or fight the change: change the CRD there (--force to do it anyway)", crd.Name, by, v)
			return nil
		}
		ver, ok := lookup(crd, v)
		switch {
		case !ok:
			s.State, s.Detail = StateAlready, fmt.Sprintf("%s is not in spec.versions", v)
			return nil
		case name == StepUnserve && !ver.Served:
			s.State, s.Detail = StateAlready, fmt.Sprintf("%s is not served", v)
			return nil
		case ver.Storage:
			detail = fmt.Sprintf("%s is the storage version again", v)
			return nil
		case name == StepRemove && slices.Contains(crd.Status.StoredVersions, v):
			detail = fmt.Sprintf("%s is still in status.storedVersions [%s]", v, strings.Join(crd.Status.StoredVersions, " "))
			return nil
		}
		if name == StepUnserve {
			served := 0
			for i := range crd.Spec.Versions {
				if crd.Spec.Versions[i].Name == v {
					crd.Spec.Versions[i].Served = false
				}
				if crd.Spec.Versions[i].Served {
					served++
				}
			}
			if served == 0 {
				detail = fmt.Sprintf("%s is the only served version", v)
				return nil
			}
		} else {
			kept := crd.Spec.Versions[:0]
			for _, x := range crd.Spec.Versions {
				if x.Name != v {
					kept = append(kept, x)
				}
			}
			crd.Spec.Versions = kept
		}
		// crd carries the resourceVersion just read: a concurrent change is a conflict.
		_, err = r.c.CRDs.ApiextensionsV1().CustomResourceDefinitions().Update(ctx, crd, metav1.UpdateOptions{})
		if err == nil {
			s.State = StateDone
			if name == StepUnserve {
				s.Detail = fmt.Sprintf("%s is no longer served", v)
			} else {
				s.Detail = fmt.Sprintf("%s removed from spec.versions", v)
			}
		}
		return err
	})
	if err != nil {
		s.State, s.Detail = StateFailed, err.Error()
		return fmt.Errorf("%s %s of %s: %w", name, v, r.o.CRD, err)
	}
	if detail != "" {
		s.State, s.Detail = StateRefused, detail
		r.problem("not %s %s: %s", map[string]string{StepUnserve: "unserving", StepRemove: "removing"}[name], v, detail)
		if name == StepUnserve {
			if rs := r.step(StepRemove); rs.State == StatePending {
				rs.State, rs.Detail = StateRefused, "not unserved first"
			}
		}
		return nil
	}
	r.notify("%s", s.Detail)
	return nil
}

// moveFields moves the managedFields entries of Version on every object that has some, with
// Concurrency workers: each object is read at the target version (and, when the conversion
// renamed owned fields, at Version too, same resourceVersion), and updated at the target
// version with its resourceVersion; a conflict re-reads and retries (MaxAttempts).
func (r *runner) moveFields(ctx context.Context, crd *apiextensionsv1.CustomResourceDefinition) (*FieldsResult, error) {
	fr := &FieldsResult{Unresolved: []migrate.Failure{}, Failed: []migrate.Failure{}}
	from := crd.Spec.Group + "/" + r.o.Version
	to := crd.Spec.Group + "/" + r.plan.Target
	atTarget := r.c.Dynamic.Resource(crdinfo.GVR(crd, r.plan.Target))
	atOld := r.c.Dynamic.Resource(crdinfo.GVR(crd, r.o.Version))
	work := make(chan metav1.PartialObjectMetadata)
	var mu sync.Mutex
	var wg sync.WaitGroup
	for w := 0; w < r.o.Rewrite.Concurrency; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for m := range work {
				res, reason, err := r.moveOne(ctx, atTarget, atOld, m.Namespace, m.Name, from, to)
				mu.Lock()
				f := migrate.Failure{Namespace: m.Namespace, Name: m.Name}
				switch {
				case err != nil:
					f.Reason = err.Error()
					fr.Failed = append(fr.Failed, f)
				case reason != "":
					f.Reason = reason
					fr.Unresolved = append(fr.Unresolved, f)
				case res.Moved > 0:
					fr.Updated++
					fr.Moved += int64(res.Moved)
					fr.Converted += int64(res.Converted)
					fr.Merged += int64(res.Merged)
				}
				mu.Unlock()
			}
		}()
	}
	listErr := ownership.EachObject(ctx, r.c.Metadata, crdinfo.GVR(crd, r.plan.Target), r.o.Rewrite.ChunkSize, func(m *metav1.PartialObjectMetadata) error {
		has := false
		for _, e := range m.ManagedFields {
			has = has || e.APIVersion == from
		}
		if !has {
			return nil
		}
		select {
		case work <- *m:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	})
	close(work)
	wg.Wait()
	sortFailures(fr.Unresolved)
	sortFailures(fr.Failed)
	if listErr != nil {
		return fr, listErr
	}
	return fr, ctx.Err()
}

// moveOne moves one object's entries. reason is set when they cannot be moved (ownership
// unknown); err when the object could not be read or written.
func (r *runner) moveOne(ctx context.Context, atTarget, atOld dynamic.NamespaceableResourceInterface, ns, name, from, to string) (ownership.MoveResult, string, error) {
	ti, oi := dynamic.ResourceInterface(atTarget), dynamic.ResourceInterface(atOld)
	if ns != "" {
		ti, oi = atTarget.Namespace(ns), atOld.Namespace(ns)
	}
	var none ownership.MoveResult
	for attempt := 1; ; attempt++ {
		if ctx.Err() != nil {
			return none, "", ctx.Err()
		}
		wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		res, reason, err := r.tryMove(wctx, ti, oi, name, from, to)
		cancel()
		switch {
		case err == nil:
			return res, reason, nil
		case apierrors.IsNotFound(err):
			return none, "", nil // deleted meanwhile: nothing to move
		case (apierrors.IsConflict(err) || errors.Is(err, errMoved)) && attempt < r.o.Rewrite.MaxAttempts:
			continue // changed since read: read again
		default:
			return none, "", err
		}
	}
}

var errMoved = errors.New("the object changed between the two reads")

func (r *runner) tryMove(ctx context.Context, ti, oi dynamic.ResourceInterface, name, from, to string) (ownership.MoveResult, string, error) {
	var none ownership.MoveResult
	target, err := ti.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return none, "", err
	}
	entries := target.GetManagedFields()
	r.sawEntries(entries, from)
	need, err := ownership.NeedsSource(entries, from, target.Object)
	if err != nil {
		return none, "", err
	}
	var source map[string]any
	if need {
		s, err := oi.Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			// The object is there (read at the target version): the old version is not served.
			return none, fmt.Sprintf("some owned fields are not in the object at %s, and it cannot be read at %s to convert them (is %s served?): serve it again (served: true) and run retire again",
				to, from, from), nil
		}
		if err != nil {
			return none, "", err
		}
		if s.GetResourceVersion() != target.GetResourceVersion() {
			return none, "", errMoved
		}
		source = s.Object
	}
	moved, res, err := ownership.Move(entries, from, to, source, target.Object)
	if err != nil {
		return none, "", err
	}
	if res.Unresolved != "" || res.Moved == 0 {
		return res, res.Unresolved, nil
	}
	if len(moved) == 0 {
		return none, "", fmt.Errorf("refusing to send empty managedFields") // never clears them
	}
	u := &unstructured.Unstructured{Object: target.Object}
	u.SetManagedFields(moved)
	// target carries the resourceVersion read: a write in between is a conflict.
	if _, err := ti.Update(ctx, u, metav1.UpdateOptions{}); err != nil {
		return none, "", err
	}
	return res, "", nil
}

// pickTarget is to, or the highest-priority served version other than v.
func pickTarget(crd *apiextensionsv1.CustomResourceDefinition, v, to string) (string, error) {
	if to != "" {
		if to == v {
			return "", fmt.Errorf("%w: --to %s is the version being retired: name the version to move to", ErrUsage, to)
		}
		if err := migrate.CheckTarget(crd, to); err != nil {
			return "", fmt.Errorf("%w: %w", ErrUsage, err)
		}
		return to, nil
	}
	var served []string
	for _, x := range crd.Spec.Versions {
		if x.Served && x.Name != v {
			served = append(served, x.Name)
		}
	}
	if len(served) == 0 {
		return "", fmt.Errorf("%w: %s: no other version is served, so there is nothing to move %s's objects to: add and serve a new version first", ErrUsage, crd.Name, v)
	}
	sort.Slice(served, func(i, j int) bool { return version.CompareKubeAwareVersionStrings(served[i], served[j]) > 0 })
	return served[0], nil
}

func lookup(crd *apiextensionsv1.CustomResourceDefinition, v string) (apiextensionsv1.CustomResourceDefinitionVersion, bool) {
	for _, x := range crd.Spec.Versions {
		if x.Name == v {
			return x, true
		}
	}
	return apiextensionsv1.CustomResourceDefinitionVersion{}, false
}

func names(crd *apiextensionsv1.CustomResourceDefinition) []string {
	var out []string
	for _, x := range crd.Spec.Versions {
		out = append(out, x.Name)
	}
	sort.Slice(out, func(i, j int) bool { return version.CompareKubeAwareVersionStrings(out[i], out[j]) > 0 })
	return out
}

func objName(f migrate.Failure) string {
	if f.Namespace == "" {
		return f.Name
	}
	return f.Namespace + "/" + f.Name
}

func sortFailures(f []migrate.Failure) {
	sort.Slice(f, func(i, j int) bool { return objName(f[i]) < objName(f[j]) })
}

// describeWriters names managers with their last write: `ctl (Apply, last 2026-…)`.
func describeWriters(ws []ownership.Writer) string {
	var parts []string
	for _, w := range ws {
		s := fmt.Sprintf("%s (%s", w.Manager, w.Operation)
		if w.Subresource != "" {
			s += " " + w.Subresource
		}
		if w.LastWrite != nil {
			s += ", last " + w.LastWrite.UTC().Format(time.RFC3339)
		}
		parts = append(parts, s+")")
	}
	return strings.Join(parts, ", ")
}
