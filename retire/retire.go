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
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	crdinfo "github.com/crdver/kubectl-crdver/crd"
	"github.com/crdver/kubectl-crdver/migrate"
	"github.com/crdver/kubectl-crdver/ownership"
)

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
	// clusterAPI is the version of storagemigration.k8s.io the cluster engine uses.
	clusterAPI string
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
// Result.Problems, and how the run ended in Result.Outcome (also with an error; the Result
// then has no Plan when the run stopped before planning).
func Run(ctx context.Context, c *migrate.Clients, o Options) (*Result, error) {
	res, err := run(ctx, c, o)
	if res == nil {
		res = &Result{DryRun: o.DryRun, WritersSinceStart: []ownership.Writer{}, Problems: []string{}}
	}
	res.Outcome = end(o, res, err)
	return res, err
}

func run(ctx context.Context, c *migrate.Clients, o Options) (*Result, error) {
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
	if o.Budget && r.step(StepRewrite).State == StatePending {
		at := plan.StorageVersion // the rewrite's version (see preWrite)
		if at == o.Version {
			at = plan.Target
		}
		if plan.Budget, err = migrate.EstimateBudget(ctx, c, crd, at, plan.Objects); err != nil {
			return nil, err
		}
	}
	r.planLast = map[string]time.Time{}
	for _, w := range plan.Writers {
		if w.LastWrite != nil {
			r.planLast[writerKey(w.Manager, w.Operation, w.Subresource)] = w.LastWrite.Time
		}
	}
	r.res = &Result{Plan: plan, DryRun: o.DryRun, WritersSinceStart: []ownership.Writer{}, Problems: []string{}}
	if o.Planned != nil {
		o.Planned(plan)
	}
	preWrite := func() error {
		if o.PreWrite == nil || r.step(StepRewrite).State != StatePending {
			return nil
		}
		// The rewrite is at the storage version, which is the target when it is the version retired.
		at := plan.StorageVersion
		if at == o.Version {
			at = plan.Target
		}
		found, err := o.PreWrite(ctx, crd, at)
		r.res.Preflight = found
		return err
	}
	if o.DryRun {
		return r.res, preWrite()
	}
	// Every right the pending steps need, before anything is written.
	needed := migrate.NeededAccess(crd, plan.StorageVersion == o.Version, slices.Contains(crd.Status.StoredVersions, o.Version))
	if o.Unserve || o.Remove {
		needed = append(needed, migrate.Access{Verb: "update", Group: apiextensionsv1.GroupName, Resource: "customresourcedefinitions", Name: crd.Name})
	}
	if o.Engine == migrate.EngineCluster || plan.Unchecked != nil {
		needed = append(needed, migrate.ClusterEngineAccess()...)
	}
	if err := migrate.CheckAccess(ctx, c, needed); err != nil {
		return r.res, err
	}
	// One run at a time on a CRD: held until this run ends (an upgrade that runs this
	// retire already holds it).
	lease, note, err := migrate.AcquireLease(ctx, c, "kubectl crdver retire", crd.Name)
	if err != nil {
		return r.res, err
	}
	defer lease.Release(ctx)
	if note != "" {
		r.res.Notes = append(r.res.Notes, note)
	}
	// After the rights (the check may write dry runs), before the question and any write.
	if err := preWrite(); err != nil {
		return r.res, err
	}
	if (o.Engine == migrate.EngineCluster || plan.Unchecked != nil) && r.step(StepRewrite).State == StatePending {
		// Before the storage switch: fail early when the API is not there.
		if r.clusterAPI, err = migrate.ServedClusterMigrationVersion(c); err != nil {
			return r.res, err
		}
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
	if slices.Contains(crd.Status.StoredVersions, o.Version) || plan.Unchecked != nil {
		if err := migrate.WaitStorageVersion(ctx, r.c, crd, 30*time.Second); err != nil {
			return err
		}
		ev, err := migrate.CompletedEvidence(r.c.Server, crd, o.Rewrite.Checkpoint)
		if err != nil {
			return err
		}
		if ev != nil {
			rw.State, rw.Detail = StateAlready, fmt.Sprintf("a completed run is recorded in %s", o.Rewrite.Checkpoint)
		} else if o.Engine == migrate.EngineCluster || plan.Unchecked != nil {
			// The recorded migration is followed and checked whichever engine was asked for:
			// a client rewrite beside a migration still running would write every object twice.
			e, err := r.rewriteCluster(ctx, crd)
			if err != nil {
				return err
			}
			ev = e
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
			switch {
			case res.ManagedFieldsLost > 0 && o.OwnershipLossConsented != nil && o.OwnershipLossConsented(res):
				r.res.Notes = append(r.res.Notes, fmt.Sprintf("%d objects lost the field managers the preflight listed, as consented (see managedFieldsLosses)", res.ManagedFieldsLost))
			case res.ManagedFieldsLost > 0:
				r.problem("%d objects lost field managers through their rewrite (see managedFieldsLosses): re-apply them from their source to restore ownership", res.ManagedFieldsLost)
			}
			e := migrate.EvidenceOf(res)
			ev = &e
			rw.State, rw.Detail = StateDone, fmt.Sprintf("%d %s accounted for (rewritten %d, already current %d, deleted %d, failed %d)", res.Total(), objectsWord(res.Total()), res.Rewritten, res.Current, res.Deleted, res.Failed)
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
		r.problem("%s still wrote %s after this run began: stop it (or make it write %s) and run retire again", ownership.DescribeWriters(r.res.WritersSinceStart), o.Version, plan.Target)
	} else if fr.Remaining.Objects > 0 && len(fr.Unresolved)+len(fr.Failed) == 0 {
		r.problem("%d objects still hold managedFields entries of %s (%s): run retire again", fr.Remaining.Objects, o.Version, ownership.DescribeWriters(fr.Remaining.Managers))
	}

	// 5 and 6. Unserve and remove.
	if !o.Unserve && !o.Remove {
		return nil
	}
	blocked := ""
	switch {
	case len(r.res.WritersSinceStart) > 0:
		blocked = fmt.Sprintf("%s wrote %s since the run began", ownership.DescribeWriters(r.res.WritersSinceStart), o.Version)
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

func objName(f migrate.Failure) string {
	if f.Namespace == "" {
		return f.Name
	}
	return f.Namespace + "/" + f.Name
}

func sortFailures(f []migrate.Failure) {
	sort.Slice(f, func(i, j int) bool { return objName(f[i]) < objName(f[j]) })
}

// objectsWord is "object" or "objects" for n.
func objectsWord(n int64) string {
	if n == 1 {
		return "object"
	}
	return "objects"
}

// rewriteCluster rewrites every object with the cluster's StorageVersionMigration, checked
// object by object by this run (migrate.RewriteCluster): the evidence the trim is guarded by.
func (r *runner) rewriteCluster(ctx context.Context, crd *apiextensionsv1.CustomResourceDefinition) (*migrate.Evidence, error) {
	rw := r.step(StepRewrite)
	start := time.Now()
	cr, err := migrate.RewriteCluster(ctx, r.c, crd, r.clusterAPI, r.o.ClusterStartTimeout, r.o.Rewrite, func(cond, msg string) {
		r.notify("StorageVersionMigration of %s: %s after %s", crd.Name, cond, time.Since(start).Round(100*time.Millisecond))
	})
	r.res.Cluster = cr
	var de *migrate.DetachedError
	switch {
	case errors.As(err, &de):
		rw.State, rw.Detail = StateDetached, fmt.Sprintf("%s; recorded in %s: the same command again re-attaches to it", cr.Summary(), de.Checkpoint)
		return nil, err
	case err != nil:
		rw.State, rw.Detail = StateFailed, err.Error()
		return nil, fmt.Errorf("rewriting the objects of %s with the cluster's StorageVersionMigration: %w", crd.Name, err)
	}
	rw.State, rw.Detail = StateDone, cr.Summary()
	for _, l := range cr.Check.ManagersLost {
		r.problem("field manager %s has %d managedFields entries on %s after the cluster's migration, %d before: re-apply from its source to restore its ownership", l.Manager, l.After, crd.Name, l.Before)
	}
	r.notify("rewrote the objects of %s: %s", crd.Name, rw.Detail)
	ev := cr.Evidence
	return &ev, nil
}
