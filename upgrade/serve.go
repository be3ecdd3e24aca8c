package upgrade

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	crdinfo "github.com/crdver/kubectl-crdver/crd"
	"github.com/crdver/kubectl-crdver/migrate"
	"github.com/crdver/kubectl-crdver/plan"
	"github.com/crdver/kubectl-crdver/preflight"
)

// States of a version served again.
const (
	// ServePlanned: to be served before the preflight (not yet: --dry-run, or before the
	// question).
	ServePlanned = "planned"
	// ServeServed: served by this run; the release's apply sets served as the release has it.
	ServeServed = "served"
	// ServeRestored: served for the preflight, then unserved again because the upgrade was
	// refused, not confirmed or could not go on: the CRD is as it was.
	ServeRestored = "unserved again"
)

// serveFieldManager writes the served flags (the storage steps' CRD writes are kubectl-crdver's too).
const serveFieldManager = "kubectl-crdver"

// ServedAgain is a version in status.storedVersions that the live CRD has but does not serve:
// the objects stored at it can be read as stored only at it, so the upgrade serves it again
// (a CRD write, asked for like any other) before its preflight and backup read them.
type ServedAgain struct {
	CRD     string `json:"crd"`
	Version string `json:"version"`
	State   string `json:"state"`
}

// toServe are the versions the runbook's serve-stored step serves again, and the new storage
// versions that a live CRD has but does not serve (going back to a release that stores at a
// version the live CRD stopped serving, e.g. Gateway API 0.6's ReferenceGrant v1alpha2): the
// preflight's dry-run writes and its comparison are made at that version, so it must be
// served for them; the runbook's intermediate CRD serves it anyway before the rewrite.
func (r *runner) toServe() []ServedAgain {
	out := []ServedAgain{}
	add := func(crd, v string) {
		if !slices.ContainsFunc(out, func(s ServedAgain) bool { return s.CRD == crd && s.Version == v }) {
			out = append(out, ServedAgain{CRD: crd, Version: v, State: ServePlanned})
		}
	}
	r.eachLive(rewriteSteps, func(n string, it *plan.Item, live *apiextensionsv1.CustomResourceDefinition) {
		v := it.StorageVersion.After
		if lv, err := crdinfo.Lookup(live, v); err == nil && !lv.Served {
			add(n, v)
		}
	})
	r.eachLive([]string{plan.ActionServeStored}, func(n string, _ *plan.Item, live *apiextensionsv1.CustomResourceDefinition) {
		for _, v := range plan.UnservedStored(live) {
			add(n, v)
		}
	})
	return out
}

// rewriteSteps are the runbook's actions that rewrite objects at a new storage version.
var rewriteSteps = []string{plan.ActionMigrate, plan.ActionRetire, plan.ActionIntermediate}

// eachLive calls fn, in runbook order, with each CRD that the runbook's steps of these actions
// name and the cluster has: its name, its plan item and its live copy.
func (r *runner) eachLive(actions []string, fn func(name string, it *plan.Item, live *apiextensionsv1.CustomResourceDefinition)) {
	for _, s := range r.rep.Plan.Runbook {
		if !slices.Contains(actions, s.Action) {
			continue
		}
		for _, n := range s.CRDs {
			if it := r.item(n); it != nil {
				if live, _ := it.CRDs(); live != nil {
					fn(n, it, live)
				}
			}
		}
	}
}

// servedAgain reports whether this run serves (or will serve) version v of crd again, and
// whether it is served now.
func (r *runner) servedAgain(crd, v string) (listed, served bool) {
	for _, s := range r.rep.ServedAgain {
		if s.CRD == crd && s.Version == v {
			return true, s.State == ServeServed
		}
	}
	return false, false
}

// readable is crd as the preflight must judge it: the versions served again by this run
// served, those it would serve but has not (--dry-run) not served, so that the preflight
// reads every version the live API server serves and calls the others unknown.
func (r *runner) readable(crd *apiextensionsv1.CustomResourceDefinition) *apiextensionsv1.CustomResourceDefinition {
	out := crd
	for i, v := range crd.Spec.Versions {
		if listed, served := r.servedAgain(crd.Name, v.Name); listed && v.Served != served {
			if out == crd {
				out = crd.DeepCopy()
			}
			out.Spec.Versions[i].Served = served
		}
	}
	return out
}

// serveAccess is what serving the versions again (and undoing it) needs.
func (r *runner) serveAccess() []migrate.Access {
	var out []migrate.Access
	for _, s := range r.rep.ServedAgain {
		a := migrate.Access{Verb: "patch", Group: apiextensionsv1.GroupName, Resource: "customresourcedefinitions", Name: s.CRD}
		if !slices.Contains(out, a) {
			out = append(out, a)
		}
	}
	return out
}

// serve serves every planned version again, then waits until the API server lists objects at
// each. What it served is recorded in the report, so that unserve can undo exactly that.
func (r *runner) serve(ctx context.Context) error {
	for i := range r.rep.ServedAgain {
		s := &r.rep.ServedAgain[i]
		if s.State != ServePlanned {
			continue
		}
		changed, err := r.setServed(ctx, s.CRD, s.Version, true)
		if err != nil {
			return fmt.Errorf("serving %s of %s again (to read the objects stored at it): %w", s.Version, s.CRD, err)
		}
		if changed {
			s.State = ServeServed
			r.notify("%s: %s served again, to read the objects stored at it", s.CRD, s.Version)
		}
		if err := r.waitListable(ctx, s.CRD, s.Version); err != nil {
			return err
		}
	}
	return nil
}

// unserve undoes serve: every version it served is unserved again, even when ctx is done
// (Ctrl-C must not leave the CRD changed). It says what it could not undo.
func (r *runner) unserve(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	var failed []string
	for i := range r.rep.ServedAgain {
		s := &r.rep.ServedAgain[i]
		if s.State != ServeServed {
			continue
		}
		if _, err := r.setServed(ctx, s.CRD, s.Version, false); err != nil {
			failed = append(failed, fmt.Sprintf("%s %s (%v)", s.CRD, s.Version, err))
			continue
		}
		s.State = ServeRestored
		r.notify("%s: %s not served again, as before the upgrade", s.CRD, s.Version)
	}
	if len(failed) > 0 {
		return fmt.Errorf("the versions served again for the preflight could not all be unserved: %s", strings.Join(failed, "; "))
	}
	return nil
}

// restoreNote undoes serve and says so in words that end a refusal.
func (r *runner) restoreNote(ctx context.Context) string {
	if !slices.ContainsFunc(r.rep.ServedAgain, func(s ServedAgain) bool { return s.State == ServeServed }) {
		return ""
	}
	if err := r.unserve(ctx); err != nil {
		return "; " + err.Error() + ": unserve them yourself"
	}
	var vs []string
	for _, s := range r.rep.ServedAgain {
		if s.State == ServeRestored {
			vs = append(vs, s.CRD+" "+s.Version)
		}
	}
	return fmt.Sprintf(" (the versions served again to read them, %s, are unserved again)", strings.Join(vs, ", "))
}

// setServed sets served on version v of the CRD by a JSON patch that first tests the
// version's name and its current served flag, so that a CRD changed since it was read is not
// patched blindly. changed is false when v already had the flag.
func (r *runner) setServed(ctx context.Context, name, v string, served bool) (changed bool, err error) {
	crd, err := r.c.CRDs.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return false, err
	}
	i := slices.IndexFunc(crd.Spec.Versions, func(x apiextensionsv1.CustomResourceDefinitionVersion) bool { return x.Name == v })
	if i < 0 {
		return false, fmt.Errorf("%s is no longer in spec.versions", v)
	}
	if crd.Spec.Versions[i].Served == served {
		return false, nil
	}
	path := fmt.Sprintf("/spec/versions/%d", i)
	body, _ := json.Marshal([]map[string]any{
		{"op": "test", "path": path + "/name", "value": v},
		{"op": "test", "path": path + "/served", "value": !served},
		{"op": "replace", "path": path + "/served", "value": served},
	})
	_, err = r.c.CRDs.ApiextensionsV1().CustomResourceDefinitions().Patch(ctx, name, types.JSONPatchType, body, metav1.PatchOptions{FieldManager: serveFieldManager})
	return err == nil, err
}

// waitListable waits (at most 30 s) until objects of crd are listed at v: the API server
// serves a version shortly after the CRD says so.
func (r *runner) waitListable(ctx context.Context, name, v string) error {
	crd, err := r.c.CRDs.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	gvr := crdinfo.GVR(crd, v)
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, err := r.c.Dynamic.Resource(gvr).List(ctx, metav1.ListOptions{Limit: 1})
		if err == nil {
			return nil
		}
		if !apierrors.IsNotFound(err) || time.Now().After(deadline) {
			return fmt.Errorf("listing %s at %s after serving it again: %w", name, v, err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w: %w", ErrInterrupted, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// blocked: the API server would reject a CRD of the release: the preflight refuses whatever
// it reads, so nothing is served again for it.
func (r *runner) blocked() bool {
	return slices.ContainsFunc(r.rep.Plan.Runbook, func(s plan.RunbookStep) bool { return s.Action == plan.ActionFixCRDs })
}

// askServe checks the rights, asks (ConfirmServe, else Confirm) and serves the versions
// again; on any failure what was served is unserved again.
func (r *runner) askServe(ctx context.Context) error {
	if err := migrate.CheckAccess(ctx, r.c, r.serveAccess()); err != nil {
		return err
	}
	confirm := r.o.ConfirmServe
	if confirm == nil {
		confirm = r.o.Confirm
	}
	if confirm != nil {
		ok, err := confirm(r.rep)
		if err != nil {
			r.markUnread()
			return err
		}
		if !ok {
			r.markUnread()
			return ErrNotConfirmed
		}
	}
	if err := r.recordServing(); err != nil {
		r.markUnread()
		return err
	}
	if err := r.serve(ctx); err != nil {
		err = fmt.Errorf("%w; nothing else was written%s", err, r.restoreNote(ctx))
		r.markUnread()
		return err
	}
	return nil
}

// markUnread lists in the preflight the versions not served (again) whose objects it did not
// read: what they lose is not evaluated.
func (r *runner) markUnread() {
	pf := &r.rep.Preflight
	pf.Unread = pf.Unread[:0]
	for _, sa := range r.rep.ServedAgain {
		if sa.State != ServeServed {
			pf.Unread = append(pf.Unread, sa.CRD+" "+sa.Version)
		}
	}
}

// serveStep is the runbook's serve-stored step: done before the preflight.
func (r *runner) serveStep(s *StepResult) {
	var done []string
	for _, sa := range r.rep.ServedAgain {
		if sa.State == ServeServed {
			done = append(done, sa.CRD+" "+sa.Version)
		}
	}
	if len(done) == 0 {
		s.State, s.Detail = StateAlready, "every stored version is served"
		return
	}
	s.State, s.Detail = StateDone, "served again before the preflight: "+strings.Join(done, ", ")
}

// wroteBeyondServe: a step after serving the versions again wrote to the cluster (the backup
// and the steps for a person do not), so unserving them would no longer restore the CRD as
// it was: a resumed run goes on from there instead.
func (r *runner) wroteBeyondServe() bool {
	return slices.ContainsFunc(r.rep.Steps, func(s StepResult) bool {
		switch s.Action {
		case plan.ActionServeStored, plan.ActionBackup, plan.ActionFixObjects, plan.ActionConvertObjects, plan.ActionChangeWriters, plan.ActionVerify:
			return false
		}
		return s.State == StateDone || s.State == StateFailed
	})
}

// unreadNote: u is the preflight's unknown answer for a version this run serves again but
// has not (--dry-run): Preflight.Unread says it once, with what to do.
func (r *runner) unreadNote(crd, u string) bool {
	return slices.ContainsFunc(r.rep.ServedAgain, func(s ServedAgain) bool {
		return s.CRD == crd && s.State == ServePlanned && (strings.HasPrefix(u, s.Version+" is in status.storedVersions but not served") || strings.HasPrefix(u, s.Version+" is not served: "))
	})
}

// dropEmptyUnserved: the preflight calls a version in status.storedVersions that live does
// not serve unknown, since the objects stored at it cannot be read as stored. When the API
// server lists no object of the CRD at all (read at a served version, after the preflight), no
// object is stored at that version either: there is nothing to read, so nothing unknown. A
// version that is also the storage version keeps its answer (new objects are stored there).
func (r *runner) dropEmptyUnserved(ctx context.Context, live *apiextensionsv1.CustomResourceDefinition, rep *preflight.Report) error {
	if len(rep.NotServed) == 0 {
		return nil
	}
	served := crdinfo.ServedVersions(live)
	if len(served) == 0 {
		return nil
	}
	l, err := r.c.Dynamic.Resource(crdinfo.GVR(live, served[0])).List(ctx, metav1.ListOptions{Limit: 1})
	if err != nil {
		return fmt.Errorf("listing %s at %s (to know whether objects are stored at the versions it does not serve): %w", live.Name, served[0], err)
	}
	if len(l.Items) > 0 {
		return nil
	}
	storage := crdinfo.StorageVersion(live)
	keep := rep.NotServed[:0]
	for _, n := range rep.NotServed {
		if n.Version == storage {
			keep = append(keep, n)
			continue
		}
		rep.Unknown = slices.DeleteFunc(rep.Unknown, func(u string) bool {
			return strings.HasPrefix(u, n.Version+" is in status.storedVersions but not served")
		})
	}
	rep.NotServed = keep
	return nil
}
