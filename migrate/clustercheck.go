package migrate

// clustercheck.go: the cluster engine (a StorageVersionMigration) with what the in-tree
// controller never does, object by object. Before the migration one read of every object
// (metadata only) takes the revision the storage version is in force from (the list's
// resourceVersion, taken after the API server encodes at it) and counts each field manager's
// managedFields entries; after it, a second read proves each object stored at the storage
// version — written after that revision, by the controller or anyone — and writes back, with
// this process's own engine, every object that was not (the controller skipped or failed it),
// and counts the managers' entries again: a manager with fewer entries after than before lost
// ownership through the controller's writes. The evidence that guards the trim is this
// check's, not the controller's word.

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"sort"
	"strconv"
	"sync"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	crdinfo "github.com/crdver/kubectl-crdver/crd"
	"github.com/crdver/kubectl-crdver/internal/pager"
)

// ClusterCheck is what this run checked after the cluster's migration (see above).
type ClusterCheck struct {
	// Since is the resourceVersion from which the API server encoded writes at the storage
	// version (the first read's).
	Since string `json:"since"`
	// Objects is the number of objects the second read listed; WrittenSince those written
	// after Since (stored at the storage version: by the migration, or by anyone).
	Objects      int64 `json:"objects"`
	WrittenSince int64 `json:"writtenSince"`
	// WrittenHere are the others, written back by this run: rewritten (they were stored at an
	// older version), already current, deleted meanwhile, failed (Failures, at most MaxListed).
	WrittenHere Counts    `json:"writtenHere"`
	Failures    []Failure `json:"failures,omitempty"`
	// ManagersLost are the field managers with fewer managedFields entries after the
	// migration than before (objects deleted meanwhile count too).
	ManagersLost []ManagerLoss `json:"managersLost,omitempty"`
}

// ManagerLoss is a field manager (manager/operation[/subresource]) with fewer entries after
// the migration than before.
type ManagerLoss struct {
	Manager string `json:"manager"`
	Before  int64  `json:"before"`
	After   int64  `json:"after"`
}

// RewriteCluster rewrites every object of crd with the cluster's StorageVersionMigration
// (apiVersion storagemigration.k8s.io/version) and checks it object by object (see above),
// writing back with opts (this process's engine) what the migration left. crd must be fresh,
// and the API server must already encode writes at its storage version (WaitStorageVersion).
// The result's Evidence is the check's.
//
// The migration is recorded in the checkpoint opts.Checkpoint ("" records nothing) before it
// is created, under a name chosen then, and the first read's revision and managers with it: a
// run stopped at any moment (Ctrl-C, SIGKILL, opts.Detach) and started again re-attaches to
// the same migration, never creates a second one. A record is used only for the cluster, the
// CRD object, the storage version and the generation it was written for; otherwise the run
// says so (ClusterResult.Notes) and starts a migration of its own. A recorded migration that
// no longer exists, or that failed, is said so, and the check writes back every object it did
// not rewrite.
func RewriteCluster(ctx context.Context, c *Clients, crd *apiextensionsv1.CustomResourceDefinition, version string, startTimeout time.Duration, opts RewriteOptions, onChange func(cond, message string)) (*ClusterResult, error) {
	cp, notes, err := clusterCheckpoint(ctx, c, crd, opts.Checkpoint)
	if err != nil {
		return nil, err
	}
	save := func() error {
		if opts.Checkpoint == "" {
			return nil
		}
		cp.UpdatedAt = time.Now().UTC()
		return cp.Save(opts.Checkpoint)
	}
	rec := cp.ClusterMigration
	if rec == nil {
		rec = &ClusterMigration{APIVersion: ClusterMigrationGroup + "/" + version, Managers: map[string]int64{}}
		if rec.Since, err = firstRead(ctx, c, crd, rec.Managers, opts.ChunkSize); err != nil {
			return nil, err
		}
		rec.Name = clusterMigrationName(crd, rec.Since)
		cp.ClusterMigration = rec
		if err := save(); err != nil { // before the creation: a run killed after it finds the name
			return nil, err
		}
	}
	gv, err := schema.ParseGroupVersion(rec.APIVersion)
	if err != nil {
		return nil, fmt.Errorf("the checkpoint %s records StorageVersionMigration %s at apiVersion %q: %w", opts.Checkpoint, rec.Name, rec.APIVersion, err)
	}
	gvr := clusterGVR(gv.Version)
	out := newClusterResult(crd, rec.Name, gvr)
	out.Notes = notes
	if rec.Created {
		out.Reattached = true
	} else {
		svm := clusterMigrationObject(crd, gv.Version)
		svm.SetName(rec.Name)
		// AlreadyExists: an earlier run created it and was killed before recording so.
		if _, err := c.Dynamic.Resource(gvr).Create(ctx, svm, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return out, fmt.Errorf("creating StorageVersionMigration %s for %s: %w", rec.Name, crd.Name, err)
		}
		now := time.Now().UTC().Truncate(time.Second)
		rec.Created, rec.CreatedAt = true, &now
		if err := save(); err != nil {
			return out, err
		}
	}
	// The wait for a controller counts from this run's look at it: one that re-attaches to a
	// migration created long ago (detached) gives a controller just started its time too.
	deleted, err := followCluster(ctx, c, gvr, out, time.Now(), startTimeout, opts.Detach, onChange)
	switch {
	case errors.Is(err, errStillRunning):
		now := time.Now().UTC().Truncate(time.Second)
		rec.DetachedAt, out.Detached = &now, true
		if err := save(); err != nil {
			return out, err
		}
		return out, &DetachedError{CRD: crd.Name, Name: rec.Name, APIVersion: rec.APIVersion, Checkpoint: opts.Checkpoint}
	case deleted:
		// Nobody processes it: the next run starts afresh (a new first read, a new migration).
		cp.ClusterMigration = nil
		if serr := save(); serr != nil {
			return out, serr
		}
		return out, err
	case err != nil && ctx.Err() != nil && opts.Checkpoint != "":
		return out, fmt.Errorf("%w; recorded in %s: the same run started again re-attaches to it", err, opts.Checkpoint)
	case err != nil:
		return out, err
	case out.Gone:
		out.Notes = append(out.Notes, fmt.Sprintf("StorageVersionMigration %s, recorded in %s, no longer exists: every object it did not rewrite is written back by this run", rec.Name, opts.Checkpoint))
	case !out.Succeeded:
		out.Notes = append(out.Notes, fmt.Sprintf("StorageVersionMigration %s failed: every object it did not rewrite is written back by this run", rec.Name))
	}
	ev := out.Evidence
	check, err := checkRewritten(ctx, c, crd, rec.Since, rec.Managers, opts)
	out.Check = check
	if err != nil {
		return out, err
	}
	ev.Complete, ev.Failed = true, check.WrittenHere.Failed
	ev.Engine = fmt.Sprintf("StorageVersionMigration %s, checked object by object by this run", out.Name)
	ev.Checkpoint = opts.Checkpoint
	out.Evidence = ev
	h := check.WrittenHere
	cp.State, cp.Counts = StateComplete, Counts{Rewritten: h.Rewritten, Current: check.WrittenSince + h.Current, Deleted: h.Deleted, Failed: h.Failed}
	cp.Failures = check.Failures
	return out, save()
}

// clusterCheckpoint is the checkpoint at path a run of the cluster engine on crd starts from:
// the one found when it records a migration of this cluster's crd as it is now (its UID,
// storage version and generation) that has not been checked yet; else a new one, and a note
// saying why a recorded migration is not used.
func clusterCheckpoint(ctx context.Context, c *Clients, crd *apiextensionsv1.CustomResourceDefinition, path string) (*Checkpoint, []string, error) {
	cluster := c.ClusterID(ctx)
	fresh := &Checkpoint{Server: c.Server, Cluster: cluster, CRD: crd.Name, UID: string(crd.UID), StorageVersion: crdinfo.StorageVersion(crd),
		Generation: crd.Generation, State: StateRunning, StartedAt: time.Now().UTC()}
	if path == "" {
		return fresh, nil, nil
	}
	cp, err := LoadCheckpoint(path)
	if err != nil {
		return nil, nil, err
	}
	rec, why := cp.recordedClusterMigration(c.Server, cluster, crd)
	if why != "" {
		return fresh, []string{fmt.Sprintf("StorageVersionMigration %s, recorded in %s, is not followed (%s): this run starts a migration of its own", cp.ClusterMigration.Name, path, why)}, nil
	}
	if rec == nil {
		return fresh, nil, nil
	}
	return cp, nil, nil
}

// clusterMigrationBeside is the note of a client rewrite of crd started while the
// StorageVersionMigration recorded in the checkpoint at path (UncheckedClusterMigration) still
// rewrites its objects in the cluster, as one look at it says: the client rewrite goes on,
// which is safe (both write each object back unchanged) but writes every object twice, or the
// user re-attaches to the migration instead. "" when none is recorded, or it has ended or
// no longer exists (the client rewrite is then the whole rewrite).
func clusterMigrationBeside(ctx context.Context, c *Clients, crd *apiextensionsv1.CustomResourceDefinition, path string) string {
	rec, err := UncheckedClusterMigration(ctx, c, crd, path)
	if err != nil || rec == nil {
		return ""
	}
	gv, err := schema.ParseGroupVersion(rec.APIVersion)
	if err != nil {
		return ""
	}
	state := "still rewrites the objects in the cluster"
	_, err = followCluster(ctx, c, clusterGVR(gv.Version), &ClusterResult{Name: rec.Name}, time.Now(), 0, true, nil)
	switch {
	case errors.Is(err, errStillRunning):
	case err != nil:
		state = fmt.Sprintf("may still rewrite the objects in the cluster (unknown: %v)", err)
	default:
		return "" // ended or gone
	}
	return fmt.Sprintf("StorageVersionMigration %s, recorded in %s by an earlier run of the cluster engine, %s: this client rewrite goes on beside it, which is safe (both write each object back unchanged) but writes every object twice; to leave the rewrite to the cluster instead, stop this run and re-attach with: kubectl crdver migrate %s --engine cluster", rec.Name, path, state, crd.Name)
}

// firstRead is the read before the migration (see above): the revision it is of, and the
// managers' entries counted into managers.
func firstRead(ctx context.Context, c *Clients, crd *apiextensionsv1.CustomResourceDefinition, managers map[string]int64, chunk int64) (string, error) {
	read, err := crdinfo.AccessVersion(crd)
	if err != nil {
		return "", err
	}
	since := ""
	pg := pager.Metadata(c.Metadata.Resource(crdinfo.GVR(crd, read)), pager.Options{Limit: chunk})
	err = pager.Each(ctx, pg, func(l *metav1.PartialObjectMetadataList) error {
		if since == "" {
			since = l.ResourceVersion // every page of a list is of its first page's snapshot
		}
		for i := range l.Items {
			countManagers(managers, l.Items[i].ManagedFields)
		}
		return nil
	})
	if err != nil {
		return "", fmt.Errorf("reading the objects of %s before the migration: %w", crd.Name, err)
	}
	return since, nil
}

// clusterMigrationName is the name of the migration of crd from the revision since: chosen
// before it is created, the same for every run that resumes the record.
func clusterMigrationName(crd *apiextensionsv1.CustomResourceDefinition, since string) string {
	sum := sha256.Sum256([]byte(string(crd.UID) + "\x00" + crdinfo.StorageVersion(crd) + "\x00" + strconv.FormatInt(crd.Generation, 10) + "\x00" + since))
	prefix := crd.Spec.Names.Plural
	if len(prefix) > 40 {
		prefix = prefix[:40]
	}
	return prefix + "-crdver-" + hex.EncodeToString(sum[:5])
}

// checkRewritten is the second read (see above).
func checkRewritten(ctx context.Context, c *Clients, crd *apiextensionsv1.CustomResourceDefinition, since string, before map[string]int64, opts RewriteOptions) (*ClusterCheck, error) {
	check := &ClusterCheck{Since: since}
	r, err := NewRewriter(c, crd, RewriteOptions{Concurrency: opts.Concurrency, MaxConcurrency: opts.MaxConcurrency, QPS: opts.QPS, ChunkSize: opts.ChunkSize, MaxAttempts: opts.MaxAttempts})
	if err != nil {
		return check, err
	}
	sinceRV, sinceErr := strconv.ParseUint(since, 10, 64)
	after := map[string]int64{}
	type job struct{ ns, name string }
	work := make(chan job, r.opts.ChunkSize)
	var mu sync.Mutex
	var wg sync.WaitGroup
	for w := 0; w < r.gate.workers(); w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range work {
				o, reason := r.writeBack(ctx, j.ns, j.name)
				mu.Lock()
				switch o {
				case outcomeRewritten:
					check.WrittenHere.Rewritten++
				case outcomeCurrent:
					check.WrittenHere.Current++
				case outcomeDeleted:
					check.WrittenHere.Deleted++
				case outcomeFailed:
					check.WrittenHere.Failed++
					if len(check.Failures) < MaxListed {
						check.Failures = append(check.Failures, Failure{Namespace: j.ns, Name: j.name, Reason: reason})
					}
				}
				mu.Unlock()
			}
		}()
	}
	pg := pager.Metadata(r.c.Metadata.Resource(crdinfo.GVR(crd, r.version)), pager.Options{Limit: r.opts.ChunkSize, Wait: r.lim.Wait, MaxAttempts: r.opts.MaxAttempts})
	var listErr error
	for listErr == nil {
		l, err := pg.Next(ctx)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			listErr = fmt.Errorf("reading the objects of %s after the migration: %w", crd.Name, err)
			break
		}
		for i := range l.Items {
			m := &l.Items[i]
			check.Objects++
			countManagers(after, m.ManagedFields)
			if rv, err := strconv.ParseUint(m.ResourceVersion, 10, 64); sinceErr == nil && err == nil && rv > sinceRV {
				check.WrittenSince++
				continue
			}
			select {
			case work <- job{m.Namespace, m.Name}:
			case <-ctx.Done():
				listErr = ctx.Err()
			}
		}
	}
	close(work)
	wg.Wait()
	for id, n := range before {
		if after[id] < n {
			check.ManagersLost = append(check.ManagersLost, ManagerLoss{Manager: id, Before: n, After: after[id]})
		}
	}
	sort.Slice(check.ManagersLost, func(i, j int) bool { return check.ManagersLost[i].Manager < check.ManagersLost[j].Manager })
	if listErr == nil {
		listErr = ctx.Err()
	}
	return check, listErr
}

// writeBack reads one object and writes it back unchanged (migrateOne): the outcome, and why
// it failed.
func (r *Rewriter) writeBack(ctx context.Context, ns, name string) (outcome, string) {
	ri := dynamic.ResourceInterface(r.res)
	if ns != "" {
		ri = r.res.Namespace(ns)
	}
	obj, err := r.getFresh(ctx, ri, name)
	switch {
	case apierrors.IsNotFound(err):
		return outcomeDeleted, ""
	case err != nil:
		return outcomeFailed, "reading it: " + reasonOf(err)
	}
	o, reason, ok := r.migrateOne(ctx, obj)
	if !ok {
		return outcomeFailed, "interrupted"
	}
	return o, reason
}

// countManagers counts an object's managedFields entries by manager (managerID).
func countManagers(m map[string]int64, entries []metav1.ManagedFieldsEntry) {
	for _, e := range entries {
		m[managerID(e)]++
	}
}

// Summary says in a line what the cluster's migration did and what this run checked and
// wrote back after it.
func (r *ClusterResult) Summary() string {
	said := "succeeded"
	switch {
	case r.Detached:
		said = "runs in the cluster (detached)"
	case r.Gone:
		said = "no longer exists"
	case !r.Succeeded:
		said = "failed (" + r.Message + ")"
	}
	if r.Reattached {
		said = "(re-attached) " + said
	}
	c := r.Check
	if c == nil {
		return fmt.Sprintf("StorageVersionMigration %s %s", r.Name, said)
	}
	h := c.WrittenHere
	return fmt.Sprintf("StorageVersionMigration %s %s; checked here: %d objects, %d written since the storage switch, %d written back here (rewritten %d, already current %d, deleted %d, failed %d)",
		r.Name, said, c.Objects, c.WrittenSince, h.Total(), h.Rewritten, h.Current, h.Deleted, h.Failed)
}
