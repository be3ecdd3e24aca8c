package plan

import (
	"context"
	"io"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
)

// ObjectSource hands out the live objects of one CRD, a page at a time, as a GET of the live
// cluster returns them (under the live CRD).
type ObjectSource interface {
	// Next returns the next page, or io.EOF after the last one.
	Next(ctx context.Context) ([]unstructured.Unstructured, error)
	// Total is the number of objects, when known (-1 otherwise).
	Total() int64
}

// SliceSource is an ObjectSource over objects held in memory (offline mode, tests).
type SliceSource struct {
	Objects  []unstructured.Unstructured
	PageSize int
	pos      int
}

// Next returns the next page.
func (s *SliceSource) Next(ctx context.Context) ([]unstructured.Unstructured, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if s.pos >= len(s.Objects) {
		return nil, io.EOF
	}
	n := s.PageSize
	if n <= 0 {
		n = 500
	}
	end := min(s.pos+n, len(s.Objects))
	page := s.Objects[s.pos:end]
	s.pos = end
	return page, nil
}

// Total is the number of objects.
func (s *SliceSource) Total() int64 { return int64(len(s.Objects)) }

// ClusterSource lists a CRD's objects across all namespaces with the dynamic client, a page
// (limit/continue) at a time, at one version.
type ClusterSource struct {
	client  dynamic.NamespaceableResourceInterface
	limit   int64
	cont    string
	started bool
	done    bool
	total   int64
}

// NewClusterSource lists resource (group, version, plural) in pages of limit objects.
func NewClusterSource(c dynamic.Interface, gvr schema.GroupVersionResource, limit int64) *ClusterSource {
	if limit <= 0 {
		limit = 500
	}
	return &ClusterSource{client: c.Resource(gvr), limit: limit, total: -1}
}

// Next lists the next page. An expired continue token (410) continues from the inconsistent
// token the error carries, as kube-storage-version-migrator does: objects changed meanwhile
// are listed as they are now.
func (s *ClusterSource) Next(ctx context.Context) ([]unstructured.Unstructured, error) {
	if s.done {
		return nil, io.EOF
	}
	if s.started && s.cont == "" {
		s.done = true
		return nil, io.EOF
	}
	for attempt := 0; ; attempt++ {
		list, err := s.client.List(ctx, metav1.ListOptions{Limit: s.limit, Continue: s.cont})
		if err != nil {
			if apierrors.IsResourceExpired(err) && attempt < 3 {
				if st, ok := err.(apierrors.APIStatus); ok && st.Status().ListMeta.Continue != "" {
					s.cont = st.Status().ListMeta.Continue
					continue
				}
			}
			return nil, err
		}
		if !s.started && list.GetRemainingItemCount() != nil {
			s.total = int64(len(list.Items)) + *list.GetRemainingItemCount()
		} else if !s.started && list.GetContinue() == "" {
			s.total = int64(len(list.Items))
		}
		s.started = true
		s.cont = list.GetContinue()
		if len(list.Items) == 0 && s.cont == "" {
			s.done = true
			return nil, io.EOF
		}
		return list.Items, nil
	}
}

// Total is the number of objects the first page announced (-1 before it, or when the API
// server did not say).
func (s *ClusterSource) Total() int64 { return s.total }
