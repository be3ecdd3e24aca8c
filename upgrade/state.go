package upgrade

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	crdinfo "github.com/crdver/kubectl-crdver/crd"
	"github.com/crdver/kubectl-crdver/migrate"
	"github.com/crdver/kubectl-crdver/plan"
)

// loadCheckpoint finds the state of an earlier run of the same release and keeps it only when
// it was written for this cluster and these CRD objects (state.belongs); otherwise the run
// starts afresh and says why in one line. A finished run's state is not resumed: whether its
// release is still in place is read from the cluster (inPlace).
func (r *runner) loadCheckpoint(ctx context.Context) error {
	c, o := r.c, r.o
	cluster := c.ClusterID(ctx)
	release := releaseKey(c.Server, o.Next)
	live, err := liveUIDs(ctx, r, o.Next)
	if err != nil {
		return err
	}
	path := o.Checkpoint
	if path == "" {
		if path, err = DefaultCheckpointPath(c.Server, cluster, o.Next); err != nil {
			return err
		}
	}
	r.cpPath, r.rep.Checkpoint = path, path
	cp, err := loadState(path)
	if err != nil {
		return err
	}
	fresh := &state{Release: release, Cluster: cluster, Server: c.Server, CRDs: live, Done: []string{}}
	r.cp = fresh
	if cp == nil {
		return nil
	}
	if ok, why := cp.belongs(release, cluster, live); !ok {
		r.rep.CheckpointIgnored = fmt.Sprintf("the checkpoint %s is not used (%s): starting afresh", path, why)
		r.notify("%s", r.rep.CheckpointIgnored)
		return nil
	}
	if cp.Complete {
		r.earlier = cp
		return nil
	}
	r.cp, r.rep.Resumed = cp, true
	if cp.Cluster == "" {
		cp.Cluster = cluster
	}
	if cp.CRDs == nil {
		cp.CRDs = map[string]string{}
	}
	for n, uid := range live {
		cp.CRDs[n] = uid // CRDs the release creates, once they exist
	}
	if o.BackupFile == "" {
		r.o.BackupFile = cp.BackupFile
	}
	return nil
}

// liveUIDs are the UIDs of the release's CRDs the cluster has, by name.
func liveUIDs(ctx context.Context, r *runner, next []*apiextensionsv1.CustomResourceDefinition) (map[string]string, error) {
	out := map[string]string{}
	for _, n := range next {
		crd, err := r.c.CRDs.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, n.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("getting CustomResourceDefinition %q: %w", n.Name, err)
		}
		out[n.Name] = string(crd.UID)
	}
	return out, nil
}

// inPlace reports whether the release is already in place (releaseInPlace) and why.
func (r *runner) inPlace(ctx context.Context) (bool, string) {
	pairs := make([][2]*apiextensionsv1.CustomResourceDefinition, 0, len(r.items))
	for i := range r.items {
		live, next := r.items[i].CRDs()
		pairs = append(pairs, [2]*apiextensionsv1.CustomResourceDefinition{live, next})
	}
	if !releaseInPlace(ctx, r.c, r.o.FieldManager, pairs) {
		return false, ""
	}
	why := "every CRD of the release is applied as it is and stored at its storage version alone"
	if r.earlier != nil && r.earlier.CompletedAt != nil {
		why = fmt.Sprintf("an earlier run finished it at %s; %s", r.earlier.CompletedAt.Format("2006-01-02 15:04:05 MST"), why)
	}
	return true, why
}

// releaseInPlace is the one rule for "the release is in place" (upgrade and upgrade status):
// every CRD of it exists (pairs: live, next), its status.storedVersions is its storage version
// alone, and applying it would change nothing: a server-side dry-run apply, as the apply step
// sends it, returns the live spec.
func releaseInPlace(ctx context.Context, c *migrate.Clients, fieldManager string, pairs [][2]*apiextensionsv1.CustomResourceDefinition) bool {
	if fieldManager == "" {
		fieldManager = plan.FieldManager
	}
	for _, p := range pairs {
		live, next := p[0], p[1]
		if live == nil {
			return false
		}
		if !slices.Equal(live.Status.StoredVersions, []string{crdinfo.StorageVersion(live)}) {
			return false
		}
		body, err := ApplyBody(next)
		if err != nil {
			return false
		}
		force := true
		got, err := c.CRDs.ApiextensionsV1().CustomResourceDefinitions().Patch(ctx, next.Name, types.ApplyPatchType, body,
			metav1.PatchOptions{FieldManager: fieldManager, Force: &force, DryRun: []string{metav1.DryRunAll}})
		if err != nil || !equality.Semantic.DeepEqual(got.Spec, live.Spec) {
			return false
		}
	}
	return len(pairs) > 0
}

// finished ends a run whose release is already in place: the steps that write are already
// done, nothing is written (no backup is needed), and the verify step reads how the release
// stands, so the run ends as the one that finished it did.
func (r *runner) finished(ctx context.Context, why string) error {
	r.rep.AlreadyInPlace = why
	r.notify("the release is already in place (%s): nothing to write", why)
	for i := range r.rep.Steps {
		s := &r.rep.Steps[i]
		switch s.Action {
		case plan.ActionVerify, plan.ActionFixRecreate, plan.ActionChangeWriters:
			// read-only, or the user's: as in any run
		default:
			s.State, s.Detail = StateAlready, "the release is in place"
		}
	}
	r.invalidOnRecreate()
	// The local record says so too (a file of this machine, not a write to the cluster), so
	// that a run killed after its apply is not reported as left to continue.
	if r.cp != nil && !r.cp.Complete {
		if err := r.markComplete(); err != nil {
			return err
		}
	}
	err := r.run(ctx)
	r.notReached()
	return err
}

// markComplete records that the release was applied and the run ran to its end: nothing is
// left to resume, and the next run of the release is a new upgrade with a backup of its own.
func (r *runner) markComplete() error {
	now := time.Now().UTC().Truncate(time.Second)
	r.cp.Complete, r.cp.CompletedAt = true, &now
	return r.save()
}

// notReached marks the steps the run did not get to.
func (r *runner) notReached() {
	for i := range r.rep.Steps {
		if r.rep.Steps[i].State == StatePending {
			r.rep.Steps[i].State = StateNotRun
		}
	}
}

// servedByKilledRun are the versions an earlier run of this release recorded it was about to
// serve again (state.Serving) and that are served now, when that run wrote nothing after
// them: this run undoes them, as that run would have, if it stops before its first step.
func (r *runner) servedByKilledRun() []ServedAgain {
	if r.cp == nil || len(r.cp.Serving) == 0 || r.cp.Started != "" || len(r.cp.Done) > 0 {
		return nil
	}
	var out []ServedAgain
	for _, sa := range r.cp.Serving {
		it := r.item(sa.CRD)
		if it == nil {
			continue
		}
		live, _ := it.CRDs()
		if live == nil {
			continue
		}
		if v, err := crdinfo.Lookup(live, sa.Version); err == nil && v.Served && !slices.ContainsFunc(r.rep.ServedAgain, func(x ServedAgain) bool { return x.CRD == sa.CRD && x.Version == sa.Version }) {
			out = append(out, ServedAgain{CRD: sa.CRD, Version: sa.Version, State: ServeServed})
			r.notify("%s: %s was served again by a run that stopped before recording it: unserved again if this run is refused", sa.CRD, sa.Version)
		}
	}
	return out
}

// recordServing saves, before the write that serves them, the versions this run serves
// again (state.Serving).
func (r *runner) recordServing() error {
	if r.cp == nil {
		return nil
	}
	var planned []string
	for _, sa := range r.rep.ServedAgain {
		if sa.State == ServePlanned || sa.State == ServeServed {
			if !slices.ContainsFunc(r.cp.Serving, func(x ServedAgain) bool { return x.CRD == sa.CRD && x.Version == sa.Version }) {
				r.cp.Serving = append(r.cp.Serving, ServedAgain{CRD: sa.CRD, Version: sa.Version, State: ServePlanned})
			}
			planned = append(planned, sa.CRD+" "+sa.Version)
		}
	}
	if len(planned) == 0 {
		return nil
	}
	if err := r.save(); err != nil {
		return fmt.Errorf("%w (before serving %s again)", err, strings.Join(planned, ", "))
	}
	return nil
}
