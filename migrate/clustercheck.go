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
// (RunCluster, apiVersion storagemigration.k8s.io/version) and checks it object by object (see
// above), writing back with opts (this process's engine) what the migration left. crd must be
// fresh, and the API server must already encode writes at its storage version
// (WaitStorageVersion). The result's Evidence is the check's.
func RewriteCluster(ctx context.Context, c *Clients, crd *apiextensionsv1.CustomResourceDefinition, version string, startTimeout time.Duration, opts RewriteOptions, onChange func(cond, message string)) (*ClusterResult, error) {
	read, err := crdinfo.AccessVersion(crd)
	if err != nil {
		return nil, err
	}
	md := c.Metadata.Resource(crdinfo.GVR(crd, read))
	before := map[string]int64{}
	since := ""
	pg := pager.Metadata(md, pager.Options{Limit: opts.ChunkSize})
	err = pager.Each(ctx, pg, func(l *metav1.PartialObjectMetadataList) error {
		if since == "" {
			since = l.ResourceVersion // every page of a list is of its first page's snapshot
		}
		for i := range l.Items {
			countManagers(before, l.Items[i].ManagedFields)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("reading the objects of %s before the migration: %w", crd.Name, err)
	}
	out, err := RunCluster(ctx, c, crd, version, startTimeout, onChange)
	if err != nil {
		return out, err
	}
	ev := out.Evidence
	check, err := checkRewritten(ctx, c, crd, since, before, opts)
	out.Check = check
	if err != nil {
		return out, err
	}
	ev.Complete, ev.Failed = true, check.WrittenHere.Failed
	ev.Engine = fmt.Sprintf("StorageVersionMigration %s, checked object by object by this run", out.Name)
	out.Evidence = ev
	return out, nil
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
	if !r.Succeeded {
		said = "failed (" + r.Message + ")"
	}
	c := r.Check
	if c == nil {
		return fmt.Sprintf("StorageVersionMigration %s %s", r.Name, said)
	}
	h := c.WrittenHere
	return fmt.Sprintf("StorageVersionMigration %s %s; checked here: %d objects, %d written since the storage switch, %d written back here (rewritten %d, already current %d, deleted %d, failed %d)",
		r.Name, said, c.Objects, c.WrittenSince, h.Total(), h.Rewritten, h.Current, h.Deleted, h.Failed)
}
