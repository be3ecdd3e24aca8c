package retire

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"

	crdinfo "github.com/crdver/kubectl-crdver/crd"
	"github.com/crdver/kubectl-crdver/migrate"
	"github.com/crdver/kubectl-crdver/ownership"
)

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

// checkWriters reads every object's managedFields again after the pass. An entry of Version on
// an object whose entries were all moved was written after the move: its manager writes
// Version now. fr.Remaining gets the census of what is left.
func (r *runner) checkWriters(ctx context.Context, crd *apiextensionsv1.CustomResourceDefinition, fr *FieldsResult) error {
	if fr.listed != nil && !r.o.Unserve && !r.o.Remove {
		// The move's own read found no entry of Version on any object: nothing was moved, so
		// what it read is what is left (no second read). Not before unserving or removing the
		// version: a writer of it between that read and now must still stop them (a second read).
		fr.Remaining = fr.listed.Census().Of(r.o.Version)
		r.sortWritersSinceStart()
		return nil
	}
	kept := map[string]bool{}
	for _, f := range append(append([]migrate.Failure{}, fr.Unresolved...), fr.Failed...) {
		kept[objName(f)] = true
	}
	from := crd.Spec.Group + "/" + r.o.Version
	gvr := crdinfo.GVR(crd, r.plan.Target)
	// One read of every object: the writers since the move and the census of what is left.
	tally := ownership.NewTally(gvr.Group)
	var read atomic.Int64
	defer r.scan("for writers of "+r.o.Version, &read)()
	err := ownership.EachObject(ctx, r.c.Metadata, gvr, r.o.Rewrite.ChunkSize, func(m *metav1.PartialObjectMetadata) error {
		read.Add(1)
		tally.Add(m.ManagedFields)
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
	fr.Remaining = tally.Census().Of(r.o.Version)
	r.sortWritersSinceStart()
	return nil
}

// sortWritersSinceStart fills the result's WritersSinceStart from the writers seen, sorted.
func (r *runner) sortWritersSinceStart() {
	for _, w := range r.writers {
		r.res.WritersSinceStart = append(r.res.WritersSinceStart, w)
	}
	sort.Slice(r.res.WritersSinceStart, func(i, j int) bool {
		a, b := r.res.WritersSinceStart[i], r.res.WritersSinceStart[j]
		return writerKey(a.Manager, a.Operation, a.Subresource) < writerKey(b.Manager, b.Operation, b.Subresource)
	})
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
	tally, sent := ownership.NewTally(crd.Spec.Group), false
	var read atomic.Int64
	defer r.scan("for managedFields entries of "+r.o.Version, &read)()
	listErr := ownership.EachObject(ctx, r.c.Metadata, crdinfo.GVR(crd, r.plan.Target), r.o.Rewrite.ChunkSize, func(m *metav1.PartialObjectMetadata) error {
		read.Add(1)
		tally.Add(m.ManagedFields)
		has := false
		for _, e := range m.ManagedFields {
			has = has || e.APIVersion == from
		}
		if !has {
			return nil
		}
		sent = true
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
	if !sent {
		fr.listed = tally // checkWriters: nothing moved, no second read
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
		wctx, cancel := migrate.WriteContext(ctx)
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

// scan shows (Options.OnScan) the progress of a read of every object's managedFields, the
// objects read counted in read; the function it returns ends it.
func (r *runner) scan(what string, read *atomic.Int64) func() {
	if r.o.OnScan == nil {
		return func() {}
	}
	return r.o.OnScan(what, read.Load)
}
