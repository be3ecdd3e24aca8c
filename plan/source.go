package plan

import (
	"context"
	"io"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/crdver/kubectl-crdver/internal/pager"
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
// (limit/continue) at a time, at one version (package pager: an expired continue token is
// followed, transient errors retried).
type ClusterSource struct {
	pg *pager.Pager[*unstructured.UnstructuredList]
}

// NewClusterSource lists resource (group, version, plural) in pages of limit objects.
func NewClusterSource(c dynamic.Interface, gvr schema.GroupVersionResource, limit int64) *ClusterSource {
	return &ClusterSource{pg: pager.Dynamic(c.Resource(gvr), pager.Options{Limit: limit})}
}

// Next lists the next page (io.EOF after the last).
func (s *ClusterSource) Next(ctx context.Context) ([]unstructured.Unstructured, error) {
	for {
		list, err := s.pg.Next(ctx)
		if err != nil {
			return nil, err
		}
		if len(list.Items) > 0 {
			return list.Items, nil
		}
	}
}

// Total is the number of objects the first page announced (-1 before it, or when the API
// server did not say).
func (s *ClusterSource) Total() int64 { return s.pg.Total() }
