package upgrade

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	crdinfo "github.com/crdver/kubectl-crdver/crd"
	"github.com/crdver/kubectl-crdver/migrate"
	"github.com/crdver/kubectl-crdver/plan"
	"github.com/crdver/kubectl-crdver/preflight"
	"github.com/crdver/kubectl-crdver/preview"
	"github.com/crdver/kubectl-crdver/retire"
)

type runner struct {
	c      *migrate.Clients
	o      Options
	rep    *Report
	cp     *state
	cpPath string
	// earlier is the state of a run of this release on this cluster that finished.
	earlier *state
	items   []plan.Item
	// checked counts, per CRD and kind, the objects the preflight check found (totals.go).
	checked map[string]map[plan.Kind]int64
}

func (r *runner) notify(format string, args ...any) {
	if r.o.Notify != nil {
		r.o.Notify(fmt.Sprintf(format, args...))
	}
}

func (r *runner) problem(format string, args ...any) {
	r.rep.Problems = append(r.rep.Problems, fmt.Sprintf(format, args...))
}

// PlanRelease plans the release against the cluster with plan.Release (what `kubectl crdver
// plan` runs): each CRD of next with its live copy and every live object, judged as
// o.KubeVersion, the apply verdict from the server's dry-run when o.ServerDryRun, and the
// release runbook.
func PlanRelease(ctx context.Context, c *migrate.Clients, o Options) (*plan.Report, error) {
	rep, err := plan.Release(ctx, plan.ReleaseClients{CRDs: c.CRDs, Dynamic: c.Dynamic, Kube: c.Kube}, plan.ReleaseOptions{
		Next: o.Next, KubeVersion: o.KubeVersion, ServerDryRun: o.ServerDryRun, ChunkSize: o.ChunkSize,
		Plan:       plan.Options{FieldValidation: preview.FieldValidationStrict, Memo: o.Memo},
		OnEvaluate: o.OnEvaluate,
		Conversion: plan.ConversionOptions{Target: o.Webhook}, Objects: o.Objects, OnConvert: o.OnConvert,
		Runbook:    plan.RunbookOptions{ApplyFile: o.ApplyFile, BackupFile: o.BackupFile},
		EachObject: o.eachObject,
	})
	if err != nil {
		return nil, interrupted(ctx, err)
	}
	return rep, nil
}

// interrupted is err, said to be ErrInterrupted when ctx was cancelled (running again resumes).
func interrupted(ctx context.Context, err error) error {
	if err != nil && ctx.Err() != nil && !errors.Is(err, ErrInterrupted) {
		return fmt.Errorf("%w: %w", ErrInterrupted, err)
	}
	return err
}

// holdLease takes for who the lease of every CRD of the releases (each name once): one run at
// a time on them, held until the lease is released. A release's run (Run) holds its own; a
// path (RunPath) holds every hop's at once, and each hop's run finds them held by this process
// and goes on under them (migrate.AcquireLease).
func holdLease(ctx context.Context, c *migrate.Clients, who string, releases ...[]*apiextensionsv1.CustomResourceDefinition) (*migrate.Lease, string, error) {
	var names []string
	for _, crds := range releases {
		for _, n := range crds {
			if !slices.Contains(names, n.Name) {
				names = append(names, n.Name)
			}
		}
	}
	return migrate.AcquireLease(ctx, c, who, names...)
}

// runUpgrade is Run without the outcome (outcome.go): the one runner of a release, which
// RunPath runs once per hop. Its skeleton: the checkpoint of an earlier run (resumed, or the
// release found in place), the lease, the preflight, the gate before the first write, the
// steps, each saved in the checkpoint as it is done.
func runUpgrade(ctx context.Context, c *migrate.Clients, o Options) (*Report, error) {
	if o.FieldManager == "" {
		o.FieldManager = plan.FieldManager
	}
	if o.ChunkSize <= 0 {
		o.ChunkSize = 500
	}
	if o.Rewrite.ChunkSize <= 0 {
		o.Rewrite.ChunkSize = o.ChunkSize
	}
	if o.Memo == nil && !o.DryRun { // a dry run has no verify step to reuse the plan for
		memo, err := plan.NewObjectMemo()
		if err != nil {
			return nil, err
		}
		defer memo.Close()
		o.Memo = memo
	}
	r := &runner{c: c, o: o, rep: &Report{DryRun: o.DryRun, Steps: []StepResult{}, Problems: []string{}, Warnings: []string{}}}
	r.rep.Preflight = Preflight{DataLoss: []ObjectFinding{}, Rejected: []ObjectFinding{}, Unknown: []string{}, BlockedCRDs: []string{}}
	if inPlace, err := r.start(ctx); inPlace || err != nil {
		return r.rep, err
	}
	// One run at a time on the release's CRDs: held until this run ends. A second run is
	// refused here, before its first write.
	if !o.DryRun {
		lease, note, err := holdLease(ctx, c, "kubectl crdver upgrade", o.Next)
		if err != nil {
			return r.rep, err
		}
		defer lease.Release(ctx)
		if note != "" {
			r.rep.Warnings = append(r.rep.Warnings, note)
		}
	}
	if err := r.judge(ctx); err != nil || o.DryRun {
		return r.rep, err
	}
	if err := r.gate(ctx); err != nil {
		return r.rep, err
	}
	return r.rep, r.carryOut(ctx)
}

// start reads the checkpoint of an earlier run of the same release on this cluster, if any,
// and plans the release. A release already in place (an earlier run finished it, here or on
// another machine) is finished here: nothing is written, the verify step says how it stands.
func (r *runner) start(ctx context.Context) (inPlace bool, err error) {
	if !r.o.DryRun {
		if err := r.loadCheckpoint(ctx); err != nil {
			return false, err
		}
	}
	p, err := PlanRelease(ctx, r.c, r.o)
	if err != nil {
		return false, err
	}
	r.rep.Plan = p
	r.items = p.Items
	for _, s := range p.Runbook {
		r.rep.Steps = append(r.rep.Steps, StepResult{RunbookStep: s, State: StatePending})
	}
	if !r.o.DryRun {
		if done, why := r.inPlace(ctx); done {
			return true, r.finished(ctx, why)
		}
	}
	return false, nil
}

// judge is the preflight. Versions stored but not served are read by serving them again:
// asked for before the preflight, undone whenever the run stops before its first step.
func (r *runner) judge(ctx context.Context) error {
	r.rep.ServedAgain = append(r.toServe(), r.servedByKilledRun()...)
	if len(r.rep.ServedAgain) > 0 && !r.o.DryRun && !r.blocked() {
		if err := r.askServe(ctx); err != nil {
			return err
		}
	}
	r.preflight(ctx)
	r.invalidOnRecreate()
	r.totals()
	if !r.rep.Preflight.Refused || r.o.DryRun {
		return r.budgets(ctx)
	}
	return nil
}

// gate is what stops the run before its first write: the preflight's refusal, no backup file,
// rights missing, no cluster engine, or no confirmation. Each undoes the versions served again
// (restoreNote).
func (r *runner) gate(ctx context.Context) error {
	o := r.o
	if r.rep.Preflight.Refused {
		return fmt.Errorf("%w: %s; nothing was written%s", ErrRefused, r.rep.Preflight.Reason, r.restoreNote(ctx))
	}
	if o.BackupFile == "" && r.needsBackup() {
		return fmt.Errorf("no backup file given%s", r.restoreNote(ctx))
	}
	if err := migrate.CheckAccess(ctx, r.c, r.neededAccess()); err != nil {
		return fmt.Errorf("%w%s", err, r.restoreNote(ctx))
	}
	if o.Engine == migrate.EngineCluster && r.rewrites() {
		if _, err := migrate.ServedClusterMigrationVersion(r.c); err != nil {
			return fmt.Errorf("%w%s", err, r.restoreNote(ctx))
		}
	}
	if o.Confirm != nil && r.writes() {
		ok, err := o.Confirm(r.rep)
		if err != nil {
			return fmt.Errorf("%w%s", err, r.restoreNote(ctx))
		}
		if !ok {
			return fmt.Errorf("%w%s", ErrNotConfirmed, r.restoreNote(ctx))
		}
	}
	return nil
}

// carryOut saves the preflight's verdict and carries out the steps; a run that applied the
// release is recorded complete.
func (r *runner) carryOut(ctx context.Context) error {
	// The preflight's verdict is kept: a resumed run must not lose what the first one found.
	r.cp.DataLossAccepted = r.cp.DataLossAccepted || (len(r.rep.Preflight.DataLoss) > 0 && !r.o.Consent().Refuses(plan.KindDataLoss))
	r.cp.FixValues = r.cp.FixValues || (len(r.rep.Preflight.TypeMismatch) > 0 && r.o.FixValues)
	if err := r.save(); err != nil {
		return err
	}
	err := r.run(ctx)
	if err != nil && !r.wroteBeyondServe() {
		err = fmt.Errorf("%w%s", err, r.restoreNote(ctx))
	}
	if err == nil && slices.ContainsFunc(r.rep.Steps, func(s StepResult) bool { return s.Action == plan.ActionApply && s.State == StateDone }) {
		// Nothing left to resume: the next run of this release is a new upgrade (e.g. after
		// `upgrade -f OLD` took the cluster back), which must not reuse this backup.
		if serr := r.markComplete(); serr != nil {
			err = serr
		}
	}
	r.notReached()
	return interrupted(ctx, err)
}

// preflight collects the objects that would lose fields or be rejected, and decides whether
// the run may go on.
func (r *runner) preflight(ctx context.Context) {
	pf := &r.rep.Preflight
	rewritten := map[string]bool{}
	for _, s := range r.rep.Plan.Runbook {
		if slices.Contains(rewriteSteps, s.Action) {
			for _, n := range s.CRDs {
				rewritten[n] = true
			}
		}
		if s.Action == plan.ActionFixCRDs {
			pf.BlockedCRDs = append(pf.BlockedCRDs, s.CRDs...)
		}
	}
	if err := r.ownWebhooks(ctx, pf); err != nil {
		pf.Refused, pf.Incomplete, pf.Reason = true, true, fmt.Sprintf("the preflight could not complete: %v", err)
		return
	}
	for i := range r.items {
		it := &r.items[i]
		planFindings(it, r.rep.Plan.Runbook, pf)
		if r.conversionUnasked(it) {
			continue // its conversion cannot be asked: refused (or unknown) above, no deeper check
		}
		check := r.o.Preflight
		if check == nil {
			check = r.deepCheck(it)
		}
		if rewritten[it.CRD] {
			live, _ := it.CRDs()
			if live != nil {
				more, err := check(ctx, r.readable(live), it.StorageVersion.After)
				if err != nil {
					pf.Refused, pf.Incomplete, pf.Reason = true, true, fmt.Sprintf("%s: the preflight could not complete: %v", it.CRD, err)
					return
				}
				r.addFindings(pf, more)
			}
		}
	}
	var why []string
	r.totals()
	r.markUnread()
	if len(pf.Unread) > 0 && len(pf.BlockedCRDs) == 0 {
		// --dry-run: what the objects stored there lose is unknown, and no flag accepts that.
		why = append(why, fmt.Sprintf("objects may be stored at versions the live CRDs do not serve (%s), which the upgrade reads by serving them again after asking, and serves no longer if it is then refused; --dry-run writes nothing, so what they would lose is not evaluated", strings.Join(pf.Unread, ", ")))
	}
	// A resumed run keeps what the first one found: a loss it found and nobody accepted.
	pf.earlierLoss = r.cp != nil && r.cp.DataLossFound && !r.cp.DataLossAccepted
	if r.cp != nil && len(pf.DataLoss) > 0 {
		r.cp.DataLossFound = true
	}
	// Each kind found that the consent given does not override (plan.Consent: the decision
	// table), most severe first.
	for _, k := range r.o.Consent().Refusals(pf.Kinds()) {
		switch k {
		case plan.KindApplyRejected:
			why = append(why, fmt.Sprintf("the API server would reject %s (see the plan's apply errors)", strings.Join(pf.BlockedCRDs, ", ")))
		case plan.KindConversionWebhook:
			why = append(why, conversionRefusal(pf.Conversion))
		case plan.KindDataLoss:
			why = append(why, fmt.Sprintf("%s would lose fields (listed in the preflight); back them up and convert them, or accept the loss", countObjects(pf.Count(plan.KindDataLoss))))
		case plan.KindUnknown:
			why = append(why, fmt.Sprintf("what the rewrite loses is unknown for %s", strings.Join(pf.Unknown, "; ")))
		case plan.KindRejectedWrite:
			why = append(why, fmt.Sprintf("%s would be rejected on their next write (listed in the preflight): fix them first", countObjects(pf.Count(plan.KindRejectedWrite))))
		case plan.KindTypeMismatch:
			why = append(why, fmt.Sprintf("%s hold values whose type does not fit the new storage version's typed schema (server-side apply would fail on them after the apply): %s converts them after the backup, keeping their field managers (those with no lossless conversion are then for you, after the backup: the plan's fix-values step)", countObjects(pf.Count(plan.KindTypeMismatch)), plan.OverrideFlag(plan.KindTypeMismatch)))
		case plan.KindOwnershipLoss:
			why = append(why, fmt.Sprintf("%s would lose field managers through the rewrite (listed in the preflight; --allow-data-loss does not accept this): fix what the API server cannot type, or accept it with %s", countObjects(pf.Count(plan.KindOwnershipLoss)), plan.OverrideFlag(plan.KindOwnershipLoss)))
		}
	}
	if w := r.unfixableValues(); w != "" {
		why = append(why, w)
	}
	if len(why) > 0 {
		pf.Refused, pf.Reason = true, strings.Join(why, "; ")
	}
}

// unreadDryRun is the line a dry run ends with when objects may be stored at versions it did
// not serve again to read (Preflight.Unread): the preflight's reason, and how to complete it.
func unreadDryRun(reason string) string {
	return fmt.Sprintf("the preflight is not complete: %s (--dry-run: nothing was written); run the upgrade without --dry-run: it asks before serving them", reason)
}

// addFindings adds to pf what the deeper check found (deepCheck, or Options.Preflight), each
// object once: its fields merged with plan's, an unread version's note said once.
func (r *runner) addFindings(pf *Preflight, more []ObjectFinding) {
	for _, m := range more {
		if len(m.Added) > 0 {
			pf.Added = append(pf.Added, m)
			continue
		}
		if len(m.Fields) > 0 {
			for j, f := range m.Fields {
				m.Fields[j] = strings.TrimPrefix(f, ".") // plan's paths have no leading dot
			}
			pf.DataLoss = joinObject(pf.DataLoss, m, func(f *ObjectFinding) *[]string { return &f.Fields })
		}
		if len(m.Unknown) > 0 {
			for _, u := range m.Unknown {
				if !r.unreadNote(m.CRD, u) {
					pf.Unknown = append(pf.Unknown, m.CRD+": "+u)
				}
			}
		}
		if len(m.Managers) > 0 {
			if r.fixesValuesOf(m) {
				continue
			}
			pf.OwnershipLoss = joinObject(pf.OwnershipLoss, m, func(f *ObjectFinding) *[]string { return &f.Managers })
			continue
		}
		if len(m.Errors) > 0 && !slices.ContainsFunc(pf.Rejected, sameObject(m)) {
			pf.Rejected = append(pf.Rejected, m)
		}
	}
}

// planFindings adds plan's findings of an item to pf, each object by its kinds (the ones its
// runbook's steps name): a rejected write is refused whether or not a step of the run
// rewrites the object (a controller's next write is rejected as well).
func planFindings(it *plan.Item, runbook []plan.RunbookStep, pf *Preflight) {
	conversionFindings(it, runbook, pf)
	for _, f := range it.Objects.Findings {
		if slices.Contains(f.Kinds, plan.KindDataLoss) || slices.Contains(f.Kinds, plan.KindUnknown) {
			lost := append(append([]string{}, f.PrunedOnRead...), f.PossiblyPrunedOnRead...)
			pf.DataLoss = append(pf.DataLoss, ObjectFinding{CRD: it.CRD, Namespace: f.Namespace, Name: f.Name, Fields: lost})
		}
		if slices.Contains(f.Kinds, plan.KindRejectedWrite) {
			pf.Rejected = append(pf.Rejected, ObjectFinding{CRD: it.CRD, Namespace: f.Namespace, Name: f.Name, Errors: f.UpdateErrors})
		}
		if slices.Contains(f.Kinds, plan.KindTypeMismatch) {
			var errs []string
			for _, m := range f.TypeMismatches {
				errs = append(errs, m.Error)
			}
			pf.TypeMismatch = append(pf.TypeMismatch, ObjectFinding{CRD: it.CRD, Namespace: f.Namespace, Name: f.Name, Errors: errs})
		}
		if f.InvalidOnRecreate() {
			pf.InvalidOnRecreate = append(pf.InvalidOnRecreate, ObjectFinding{CRD: it.CRD, Namespace: f.Namespace, Name: f.Name, Errors: f.RecreateErrors()})
		}
		// plan's prediction of the rewrite's field managers stands in where the deeper check
		// cannot send the dry run (under the intermediate CRD); where it can, addFindings
		// merges the dry run's answer into the same object's row.
		if slices.Contains(f.Kinds, plan.KindOwnershipLoss) && len(f.ManagersLost.Lost) > 0 {
			pf.OwnershipLoss = append(pf.OwnershipLoss, ObjectFinding{CRD: it.CRD, Namespace: f.Namespace, Name: f.Name, Managers: slices.Clone(f.ManagersLost.Lost)})
		}
	}
}

// deepCheck is the preflight package's check of a CRD whose objects are re-encoded at its new
// storage version: under the live CRD, or, when the live CRD lacks that version, under the
// intermediate CRD the runbook applies (then without the dry-run writes, which need the
// version served: plan's no-op update evaluation stands in for them).
func (r *runner) deepCheck(it *plan.Item) func(ctx context.Context, live *apiextensionsv1.CustomResourceDefinition, target string) ([]ObjectFinding, error) {
	return func(ctx context.Context, live *apiextensionsv1.CustomResourceDefinition, target string) ([]ObjectFinding, error) {
		crd := live
		so := preflight.Options{Target: target, ChunkSize: r.o.ChunkSize, MaxListed: plan.DefaultMaxFindings}
		if inter := plan.IntermediateFor(it); inter != nil {
			inter.Status = *live.Status.DeepCopy()
			// The preflight reads from the live API server, which serves what live serves (and
			// what this run served again), not what the intermediate will: read those, no
			// others, and every one of those (a version the intermediate stops serving is still
			// read as stored, e.g. the live storage version of a CRD with no object at it).
			for i, v := range inter.Spec.Versions {
				if lv, err := crdinfo.Lookup(live, v.Name); err == nil {
					inter.Spec.Versions[i].Served = lv.Served
				}
			}
			crd, so.SkipRejections = inter, true
		}
		so.Transport = preflight.WebhookTransport(ctx, crd, r.c.Kube.CoreV1().RESTClient())
		if r.o.OnCheck != nil {
			var done, total atomic.Int64
			total.Store(-1)
			so.Progress = func(d, t int64) { done.Store(d); total.Store(t) }
			defer r.o.OnCheck(it.CRD, done.Load, total.Load)()
		}
		rep, err := preflight.Check(ctx, r.c.Dynamic, crd, so)
		if err != nil {
			return nil, err
		}
		if err := r.dropEmptyUnserved(ctx, live, rep); err != nil {
			return nil, err
		}
		r.countFound(it.CRD, plan.KindDataLoss, rep.LossCount)
		r.countFound(it.CRD, plan.KindRejectedWrite, rep.RejectedCount)
		r.countFound(it.CRD, plan.KindOwnershipLoss, rep.OwnershipLossCount)
		var out []ObjectFinding
		for _, l := range rep.Losses {
			out = append(out, ObjectFinding{CRD: it.CRD, Namespace: l.Namespace, Name: l.Name, Fields: l.Fields, HeldAt: l.HeldAt})
		}
		for _, j := range rep.Rejected {
			out = append(out, ObjectFinding{CRD: it.CRD, Namespace: j.Namespace, Name: j.Name, Errors: j.Errors})
		}
		for _, a := range rep.Added {
			added := slices.Clone(a.Added)
			for _, p := range a.Normalised {
				added = append(added, p+" (normalised)")
			}
			for j, p := range added {
				added[j] = strings.TrimPrefix(p, ".") // plan's paths have no leading dot
			}
			out = append(out, ObjectFinding{CRD: it.CRD, Namespace: a.Namespace, Name: a.Name, Added: added, HeldAt: a.HeldAt})
		}
		for _, l := range rep.OwnershipLosses {
			out = append(out, ObjectFinding{CRD: it.CRD, Namespace: l.Namespace, Name: l.Name, Managers: l.Lost})
		}
		if len(rep.Unknown) > 0 {
			out = append(out, ObjectFinding{CRD: it.CRD, Unknown: rep.Unknown})
		}
		return out, nil
	}
}

func countObjects(n int) string {
	if n == 1 {
		return "1 object"
	}
	return fmt.Sprintf("%d objects", n)
}

// joinObject adds m to list: to the row of the same object, the values of what (its fields,
// its managers) it lacks, or as a row of its own.
func joinObject(list []ObjectFinding, m ObjectFinding, what func(*ObjectFinding) *[]string) []ObjectFinding {
	i := slices.IndexFunc(list, sameObject(m))
	if i < 0 {
		return append(list, m)
	}
	to := what(&list[i])
	for _, v := range *what(&m) {
		if !slices.Contains(*to, v) {
			*to = append(*to, v)
		}
	}
	return list
}

func sameObject(a ObjectFinding) func(ObjectFinding) bool {
	return func(b ObjectFinding) bool { return a.CRD == b.CRD && a.Namespace == b.Namespace && a.Name == b.Name }
}

func (r *runner) needsBackup() bool {
	return slices.ContainsFunc(r.rep.Plan.Runbook, func(s plan.RunbookStep) bool { return s.Action == plan.ActionBackup })
}

// rewrites reports whether a step rewrites the objects of a CRD.
func (r *runner) rewrites() bool {
	return slices.ContainsFunc(r.rep.Plan.Runbook, func(s plan.RunbookStep) bool {
		return s.Action == plan.ActionMigrate || s.Action == plan.ActionRetire
	})
}

// writes reports whether any step would write.
func (r *runner) writes() bool {
	return slices.ContainsFunc(r.rep.Plan.Runbook, func(s plan.RunbookStep) bool {
		return !s.Manual && s.Action != plan.ActionVerify && !(s.Action == plan.ActionApply && r.o.NoApply)
	})
}

// neededAccess is every right the steps need, checked before the first write.
func (r *runner) neededAccess() []migrate.Access {
	var out []migrate.Access
	crds := func(verb, sub, name string) migrate.Access {
		return migrate.Access{Verb: verb, Group: apiextensionsv1.GroupName, Resource: "customresourcedefinitions", Subresource: sub, Name: name}
	}
	for _, s := range r.rep.Plan.Runbook {
		for _, n := range s.CRDs {
			it := r.item(n)
			if it == nil {
				continue
			}
			live, next := it.CRDs()
			switch s.Action {
			case plan.ActionBackup:
				for _, res := range s.Resources {
					if strings.HasPrefix(res, next.Spec.Names.Plural+".") {
						out = append(out, migrate.Access{Verb: "list", Group: next.Spec.Group, Resource: next.Spec.Names.Plural})
					}
				}
			case plan.ActionIntermediate, plan.ActionServeStored:
				out = append(out, crds("patch", "", n))
			case plan.ActionMigrate, plan.ActionRetire:
				if live != nil {
					out = append(out, migrate.NeededAccess(live, true, true)...)
				}
				if r.o.Engine == migrate.EngineCluster {
					out = append(out, migrate.ClusterEngineAccess()...)
				}
			}
		}
		if s.Action == plan.ActionApply && !r.o.NoApply {
			for i := range r.items {
				live, next := r.items[i].CRDs()
				if live == nil {
					out = append(out, crds("create", "", ""))
				}
				out = append(out, crds("patch", "", next.Name))
			}
		}
	}
	var uniq []migrate.Access
	for _, a := range out {
		if !slices.Contains(uniq, a) {
			uniq = append(uniq, a)
		}
	}
	return uniq
}

func (r *runner) item(name string) *plan.Item {
	for i := range r.items {
		if r.items[i].CRD == name {
			return &r.items[i]
		}
	}
	return nil
}

// run carries out the steps in order; each is saved in the checkpoint when done.
func (r *runner) run(ctx context.Context) error {
	for i := range r.rep.Steps {
		s := &r.rep.Steps[i]
		if s.State != StatePending {
			continue // decided before the run (the release found in place)
		}
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("%w before step %d (%s)", ErrInterrupted, i+1, s.Action)
		}
		if dropsData(s.Action) && !(s.Action == plan.ActionApply && r.o.NoApply) {
			// Saved before the step's first write: from here on a resumed run may not take a
			// new backup in place of a lost one without saying so (dropStarted).
			r.cp.Started = stepKey(s.RunbookStep)
			if err := r.save(); err != nil {
				return err
			}
		}
		var err error
		switch s.Action {
		case plan.ActionFixObjects:
			// Reached only with the consent to skip them (the preflight refuses otherwise).
			s.State, s.Detail = StateSkipped, "invalid objects skipped (--"+plan.OverrideSkipInvalid+"): they are left as they are, their next write is rejected, and a rewrite fails on them and keeps status.storedVersions untrimmed"
		case plan.ActionFixRecreate:
			s.State, s.Detail = StateManual, r.recreateDetail(s)
		case plan.ActionFixValues:
			err = valuesForPerson(s)
		case plan.ActionConvertObjects:
			s.State, s.Detail = StateSkipped, "data loss accepted: the backup keeps the fields"
		case plan.ActionChangeWriters:
			s.State, s.Detail = StateManual, "for you to do: see the warnings"
			r.rep.Warnings = append(r.rep.Warnings, strings.Join(s.CRDs, ", ")+": "+s.Why)
		case plan.ActionFixCRDs, plan.ActionDeployWebhook, plan.ActionFixConversion:
			// Reached only if the preflight did not refuse for it: the step is a person's.
			s.State = StateManual
			return fmt.Errorf("%w: %s", ErrRefused, s.Why)
		case plan.ActionServeStored:
			r.serveStep(s)
		case plan.ActionBackup:
			err = r.backup(ctx, s)
		case plan.ActionIntermediate:
			err = r.intermediate(ctx, s)
		case plan.ActionRetire:
			err = r.retire(ctx, s)
		case plan.ActionMigrate:
			err = r.migrate(ctx, s)
		case plan.ActionApply:
			if r.o.NoApply {
				s.State, s.Detail = StateSkipped, "not asked: apply the release yourself ("+strings.Join(s.Commands, "; ")+")"
				continue
			}
			if len(r.rep.Problems) > 0 {
				s.State, s.Detail = StateSkipped, "not applied: "+strings.Join(r.rep.Problems, "; ")
				return nil
			}
			err = r.apply(ctx, s)
		case plan.ActionToolApply:
			s.State, s.Detail = StateManual, s.Why
			return nil
		case plan.ActionVerify:
			if r.o.NoApply {
				s.State, s.Detail = StateSkipped, "the release was not applied"
				continue
			}
			err = r.verify(ctx, s)
		}
		if err != nil {
			if s.State == StatePending {
				s.State = StateFailed
			}
			if s.Detail == "" {
				s.Detail = err.Error()
			}
			return err
		}
		if s.State == StatePending {
			s.State = StateDone
		}
		if err := r.recordDone(s); err != nil {
			return err
		}
		r.notify("step %d/%d %s: %s", i+1, len(r.rep.Steps), s.Action, s.State)
	}
	return nil
}

// recordDone saves a step done (or found done) in the checkpoint (a path's hop: the path's,
// whose backup, the first hop's, is then recorded for every hop).
func (r *runner) recordDone(s *StepResult) error {
	if s.State != StateDone && s.State != StateAlready {
		return nil
	}
	r.cp.Done = append(r.cp.Done, stepKey(s.RunbookStep))
	return r.save()
}

func (r *runner) retire(ctx context.Context, s *StepResult) error {
	name := s.CRDs[0]
	crd, err := r.c.CRDs.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("getting %s: %w", name, err)
	}
	if _, err := crdinfo.Lookup(crd, s.Version); err != nil {
		s.State, s.Detail = StateAlready, fmt.Sprintf("%s is no longer in spec.versions", s.Version)
		return nil
	}
	// A StorageVersionMigration an earlier run left running (detached, stopped) is re-attached
	// to and checked first: its controller may have trimmed status.storedVersions already,
	// which retire reads as nothing left to rewrite.
	if unchecked(ctx, r.c, crd) {
		if err := r.reattach(ctx, s, crd); err != nil {
			return err
		}
	}
	ro := retire.Options{CRD: name, Version: s.Version, To: s.Target, Unserve: s.Remove, Remove: s.Remove, Rewrite: r.o.Rewrite, Notify: func(l string) { r.notify("%s: %s", name, l) },
		Engine: r.o.Engine, ClusterStartTimeout: r.o.ClusterStartTimeout}
	if it := r.item(name); it != nil {
		ro.Census = it.Census() // the plan read every object: retire's plan need not again
	}
	ro.Rewrite.Checkpoint = ""
	if r.o.OnScan != nil {
		ro.OnScan = func(what string, done func() int64) func() { return r.o.OnScan(name, what, done) }
	}
	if r.o.OnRewrite != nil {
		ro.OnRewrite = func(rw *migrate.Rewriter, total int64) func() {
			return r.o.OnRewrite(name, total, func() int64 { return rw.Progress().Total() })
		}
	}
	res, err := retire.Run(ctx, r.c, ro)
	if res != nil && res.Rewrite != nil {
		s.Engine = migrate.EngineClient
	}
	if res != nil && res.Cluster != nil {
		s.Engine, s.Cluster = migrate.EngineCluster, res.Cluster
	}
	if res != nil && res.Plan != nil { // no plan: stopped before planning
		var done []string
		for _, st := range res.Plan.Steps {
			if st.State == retire.StateDone {
				done = append(done, st.Name)
			}
		}
		s.Detail = "retire: " + strings.Join(done, ", ")
		if len(done) == 0 {
			s.State, s.Detail = StateAlready, "retire found every step done"
		}
		if res.Cluster != nil {
			s.Detail += "; " + res.Cluster.Summary()
		} else if s.Cluster != nil {
			s.Detail += "; " + s.Cluster.Summary()
		}
		for _, p := range res.Problems {
			r.problem("%s: %s", name, p)
		}
		if res.Rewrite != nil && res.Rewrite.Failed > 0 {
			r.problem("%s: %d objects could not be rewritten: status.storedVersions keeps %s, so the release cannot remove it yet", name, res.Rewrite.Failed, s.Version)
		}
	}
	if errors.Is(err, retire.ErrInterrupted) {
		return fmt.Errorf("%w: %w", ErrInterrupted, err)
	}
	detached(s, err)
	return err
}

// detached marks s as left running in the cluster when err says its StorageVersionMigration
// was (migrate.DetachedError).
func detached(s *StepResult, err error) {
	var de *migrate.DetachedError
	if errors.As(err, &de) {
		s.State, s.Detail = StateDetached, fmt.Sprintf("StorageVersionMigration %s rewrites the objects in the cluster (detached); recorded in %s", de.Name, de.Checkpoint)
	}
}

func (r *runner) migrate(ctx context.Context, s *StepResult) error {
	name := s.CRDs[0]
	crd, err := r.c.CRDs.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("getting %s: %w", name, err)
	}
	fix := s.FixValues && r.o.FixValues
	if crdinfo.StorageVersion(crd) == s.Target && slices.Equal(crd.Status.StoredVersions, []string{s.Target}) && !unchecked(ctx, r.c, crd) {
		if fix {
			if err := r.fixValues(ctx, s, mustCheckpoint(r.c.Server, name)); err != nil {
				return err
			}
		}
		if s.Detail == "" {
			s.State = StateAlready
		}
		s.Detail += fmt.Sprintf("%s is the storage version and status.storedVersions is [%s]", s.Target, s.Target)
		return nil
	}
	mo := migrate.Options{Rewrite: r.o.Rewrite, Engine: r.o.Engine, ClusterStartTimeout: r.o.ClusterStartTimeout}
	mo.Rewrite.Checkpoint = ""
	if p, err := migrate.DefaultCheckpointPath(r.c.Server, name); err == nil {
		mo.Rewrite.Checkpoint = p
	}
	if crdinfo.StorageVersion(crd) != s.Target {
		mo.To = s.Target
	}
	m := &migrate.Migrator{Clients: r.c, Options: mo}
	if fix {
		m.BeforeRewrite = func(ctx context.Context, _ *apiextensionsv1.CustomResourceDefinition) error {
			return r.fixValues(ctx, s, mustCheckpoint(r.c.Server, name))
		}
	}
	if r.o.OnRewrite != nil {
		m.Progress = func(total int64, counts func() migrate.Counts) func() {
			return r.o.OnRewrite(name, total, func() int64 { return counts().Total() })
		}
	}
	rep, err := m.Run(ctx, crd)
	if rep != nil && (rep.Result != nil || rep.Cluster != nil) {
		s.Engine, s.Cluster = rep.Engine, rep.Cluster
	}
	detached(s, err)
	if err != nil {
		var ie *migrate.InterruptedError
		if errors.As(err, &ie) {
			return fmt.Errorf("%w: %w", ErrInterrupted, err)
		}
		return err
	}
	switch {
	case rep.Failed() > 0:
		r.problem("%s: %d objects could not be rewritten: status.storedVersions was not trimmed", name, rep.Failed())
		s.Detail += fmt.Sprintf("%d objects failed", rep.Failed())
	case rep.Trim != nil && !rep.Trim.Safe:
		r.problem("%s: status.storedVersions was not trimmed: %s", name, rep.Trim.Reason)
	default:
		s.Detail += fmt.Sprintf("rewritten at %s; status.storedVersions [%s]", rep.StorageVersion(), s.Target)
	}
	if rep.Cluster != nil {
		s.Detail += "; " + rep.Cluster.Summary()
		for _, l := range rep.Cluster.Check.ManagersLost {
			r.problem("%s: field manager %s has %d managedFields entries after the cluster's migration, %d before: re-apply from its source to restore its ownership", name, l.Manager, l.After, l.Before)
		}
	}
	return nil
}

// unchecked reports whether migrate's checkpoint of crd records a StorageVersionMigration
// created for it as it is now and not yet checked object by object.
func unchecked(ctx context.Context, c *migrate.Clients, crd *apiextensionsv1.CustomResourceDefinition) bool {
	p, err := migrate.DefaultCheckpointPath(c.Server, crd.Name)
	if err != nil {
		return false
	}
	m, _ := migrate.UncheckedClusterMigration(ctx, c, crd, p)
	return m != nil
}

// reattach follows the StorageVersionMigration an earlier run of step s left for crd to its
// end, checks every object and trims (migrate.Migrator with the cluster engine, which finds
// it recorded), before the step's retire.
func (r *runner) reattach(ctx context.Context, s *StepResult, crd *apiextensionsv1.CustomResourceDefinition) error {
	mo := migrate.Options{Rewrite: r.o.Rewrite, Engine: migrate.EngineCluster, ClusterStartTimeout: r.o.ClusterStartTimeout}
	mo.Rewrite.Checkpoint = ""
	rep, err := (&migrate.Migrator{Clients: r.c, Options: mo}).Run(ctx, crd)
	if rep != nil && rep.Cluster != nil {
		s.Engine, s.Cluster = migrate.EngineCluster, rep.Cluster
	}
	detached(s, err)
	if err != nil {
		return err
	}
	if rep.Failed() > 0 {
		r.problem("%s: %d objects could not be rewritten: status.storedVersions keeps %s, so the release cannot remove it yet", crd.Name, rep.Failed(), s.Version)
	}
	if rep.Cluster != nil && rep.Cluster.Check != nil {
		for _, l := range rep.Cluster.Check.ManagersLost {
			r.problem("%s: field manager %s has %d managedFields entries after the cluster's migration, %d before: re-apply from its source to restore its ownership", crd.Name, l.Manager, l.After, l.Before)
		}
	}
	return nil
}

// wait polls until cond holds for the CRD (at most a minute).
func (r *runner) waitCRD(ctx context.Context, name string, cond func(*apiextensionsv1.CustomResourceDefinition) bool) (*apiextensionsv1.CustomResourceDefinition, error) {
	deadline := time.Now().Add(time.Minute)
	for {
		crd, err := r.c.CRDs.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, name, metav1.GetOptions{})
		if err == nil && cond(crd) {
			return crd, nil
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("%s: not established a minute after the apply", name)
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("%w: %w", ErrInterrupted, ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func established(crd *apiextensionsv1.CustomResourceDefinition) bool {
	for _, c := range crd.Status.Conditions {
		if c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue {
			return true
		}
	}
	return false
}
