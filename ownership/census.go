package ownership

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/metadata"

	"github.com/crdver/kubectl-crdver/internal/pager"
)

// Census is how many objects of a resource hold managedFields entries of each version, and
// who wrote them last.
type Census struct {
	// Objects is the number of objects listed.
	Objects int64 `json:"objects"`
	// Versions has one row per version named by some entry, in version order of the caller's
	// choosing (sorted by name here).
	Versions []VersionCount `json:"versions"`
}

// VersionCount is one version's row.
type VersionCount struct {
	Version string `json:"version"`
	// Objects holding at least one entry of this version.
	Objects int64 `json:"objects"`
	// Managers that hold entries of this version, most recent write first.
	Managers []Writer `json:"managers"`
}

// Writer is one field manager's entries of one version.
type Writer struct {
	Manager     string `json:"manager"`
	Operation   string `json:"operation"`
	Subresource string `json:"subresource,omitempty"`
	// Objects holding an entry of this manager at this version.
	Objects int64 `json:"objects"`
	// LastWrite is the most recent time of those entries (the API server sets it on each
	// write that changed a field the manager owns).
	LastWrite *metav1.Time `json:"lastWrite,omitempty"`
}

// Of returns the row of version v (objects 0 when no entry names it).
func (c *Census) Of(v string) VersionCount {
	for _, r := range c.Versions {
		if r.Version == v {
			return r
		}
	}
	return VersionCount{Version: v, Managers: []Writer{}}
}

// Take reads the managedFields of every object of gvr with a paged metadata-only list
// (PartialObjectMetadataList, chunk objects a page; memory is bounded by a page) and counts
// them per version. group is the API group, so that only entries of this group's versions are
// counted by version name. counted, when set, is called after each object is counted (a
// progress count).
func Take(ctx context.Context, md metadata.Interface, gvr schema.GroupVersionResource, chunk int64, counted func()) (*Census, error) {
	if chunk <= 0 {
		chunk = 500
	}
	t := NewTally(gvr.Group)
	err := EachObject(ctx, md, gvr, chunk, func(o *metav1.PartialObjectMetadata) error {
		t.Add(o.ManagedFields)
		if counted != nil {
			counted()
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return t.Census(), nil
}

// Tally counts managedFields entries object by object (what Take does over a list), for
// callers that read the objects themselves. It is not safe for concurrent use.
type Tally struct {
	prefix  string
	objects int64
	perV    map[string]int64
	writers map[tallyKey]*Writer
}

type tallyKey struct{ v, manager, op, sub string }

// NewTally counts the entries of objects of API group group: entries of its versions are
// counted by version name, others by their full apiVersion.
func NewTally(group string) *Tally {
	return &Tally{prefix: group + "/", perV: map[string]int64{}, writers: map[tallyKey]*Writer{}}
}

// Add counts one object's managedFields.
func (t *Tally) Add(entries []metav1.ManagedFieldsEntry) {
	t.objects++
	seen := map[string]bool{}
	seenW := map[tallyKey]bool{}
	for _, e := range entries {
		v, ok := strings.CutPrefix(e.APIVersion, t.prefix)
		if !ok {
			v = e.APIVersion
		}
		if !seen[v] {
			seen[v] = true
			t.perV[v]++
		}
		k := tallyKey{v, e.Manager, string(e.Operation), e.Subresource}
		w := t.writers[k]
		if w == nil {
			w = &Writer{Manager: e.Manager, Operation: string(e.Operation), Subresource: e.Subresource}
			t.writers[k] = w
		}
		if !seenW[k] {
			seenW[k] = true
			w.Objects++
		}
		if e.Time != nil && (w.LastWrite == nil || w.LastWrite.Before(e.Time)) {
			tm := *e.Time
			w.LastWrite = &tm
		}
	}
}

// Census is the count so far: one row per version, managers most recent write first.
func (t *Tally) Census() *Census {
	c := &Census{Objects: t.objects, Versions: []VersionCount{}}
	for v, n := range t.perV {
		row := VersionCount{Version: v, Objects: n, Managers: []Writer{}}
		for k, w := range t.writers {
			if k.v == v {
				row.Managers = append(row.Managers, *w)
			}
		}
		sort.Slice(row.Managers, func(i, j int) bool {
			a, b := row.Managers[i], row.Managers[j]
			switch {
			case (a.LastWrite == nil) != (b.LastWrite == nil):
				return b.LastWrite == nil // an entry without a time (an apply's may have none) after the others
			case a.LastWrite != nil && !a.LastWrite.Equal(b.LastWrite):
				return b.LastWrite.Before(a.LastWrite)
			}
			return a.Manager+a.Operation+a.Subresource < b.Manager+b.Operation+b.Subresource
		})
		c.Versions = append(c.Versions, row)
	}
	sort.Slice(c.Versions, func(i, j int) bool { return c.Versions[i].Version < c.Versions[j].Version })
	return c
}

// WritersSince are the managers of version v whose last write is at or after since.
func (r VersionCount) WritersSince(since time.Time) []Writer {
	var out []Writer
	for _, w := range r.Managers {
		if w.LastWrite != nil && !w.LastWrite.Time.Before(since) {
			out = append(out, w)
		}
	}
	return out
}

// EachObject calls fn for every object of gvr, listed in pages of chunk with the metadata
// client (package pager: an expired continue token is followed, transient errors retried).
func EachObject(ctx context.Context, md metadata.Interface, gvr schema.GroupVersionResource, chunk int64, fn func(*metav1.PartialObjectMetadata) error) error {
	pg := pager.Metadata(md.Resource(gvr), pager.Options{Limit: chunk})
	for {
		list, err := pg.Next(ctx)
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("listing %s: %w", gvr.GroupResource(), err)
		}
		for i := range list.Items {
			if err := fn(&list.Items[i]); err != nil {
				return err
			}
		}
	}
}
