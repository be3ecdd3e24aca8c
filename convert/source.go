package convert

// source.go: where the objects come from, a page at a time: a slice, documents read from
// files or stdin, or the live objects of a CRD listed in pages (the same paging and --limit
// behaviour for every command path).

import (
	"context"
	"errors"
	"fmt"
	"io"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"k8s.io/client-go/dynamic"

	"github.com/crdver/kubectl-crdver/manifest"
)

// Source yields the objects to convert a page at a time.
type Source interface {
	// Next returns the next page; io.EOF when there is none left.
	Next(ctx context.Context) ([]Object, error)
}

// SliceSource yields objects as one page; its Total is len(objects).
func SliceSource(objects []Object) Source { return &sliceSource{objects: objects} }

type sliceSource struct {
	objects []Object
	done    bool
}

func (s *sliceSource) Next(context.Context) ([]Object, error) {
	if s.done {
		return nil, io.EOF
	}
	s.done = true
	return s.objects, nil
}

func (s *sliceSource) Total() int { return len(s.objects) }

// DocumentSource yields the objects of documents read from files, stdin or URLs
// (manifest.Open), a page at a time: memory holds one page, whatever the size of the input,
// and each input is read once (a pipe too). A document that is not a JSON object is a
// *manifest.InputError naming it.
type DocumentSource struct {
	docs     *manifest.Documents
	pageSize int
	read     int
}

// NewDocumentSource reads docs pageSize objects at a time (0: DefaultPageSize).
func NewDocumentSource(docs *manifest.Documents, pageSize int) *DocumentSource {
	if pageSize <= 0 {
		pageSize = DefaultPageSize
	}
	return &DocumentSource{docs: docs, pageSize: pageSize}
}

// Next reads the next page; io.EOF after the last one. The input's errors are manifest's
// (*manifest.InputError, *manifest.InterruptedError when ctx is done).
func (s *DocumentSource) Next(context.Context) ([]Object, error) {
	var page []Object
	for len(page) < s.pageSize {
		d, err := s.docs.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, err
		}
		var m map[string]any
		if err := utiljson.Unmarshal(d.JSON, &m); err != nil || m == nil {
			return nil, &manifest.InputError{Err: fmt.Errorf("%s: not a JSON object", d.Where())}
		}
		page = append(page, Object{Source: d.Where(), Object: m})
	}
	s.read += len(page)
	if len(page) == 0 {
		return nil, io.EOF
	}
	return page, nil
}

// Read is the number of objects read so far.
func (s *DocumentSource) Read() int { return s.read }

// DefaultPageSize is the page size of cluster lists (kubectl's chunk size).
const DefaultPageSize = 500

// Selection says which live objects to read.
type Selection struct {
	// Namespace of a namespaced CRD's objects; "" or AllNamespaces: every namespace.
	Namespace     string
	AllNamespaces bool
	// LabelSelector filters the objects (kubectl -l).
	LabelSelector string
	// Limit is the most objects to read in all (0: all of them).
	Limit int64
	// PageSize is the number of objects per list request (0: DefaultPageSize).
	PageSize int64
}

// ListError is a failure to list the live objects: the cluster, not the webhook.
type ListError struct {
	CRD, Version string
	Err          error
}

func (e *ListError) Error() string {
	return fmt.Sprintf("listing %s at %s: %v", e.CRD, e.Version, e.Err)
}
func (e *ListError) Unwrap() error { return e.Err }

// ClusterSource lists the live objects of a CRD in one version, a page at a time, following
// continue tokens, and stops after Selection.Limit objects.
type ClusterSource struct {
	ri       dynamic.ResourceInterface
	crd      string
	version  string
	opts     metav1.ListOptions
	limit    int64
	read     int64
	done     bool
	pageSize int64
}

// NewClusterSource lists crd's objects in version.
func NewClusterSource(client dynamic.Interface, crd *apiextensionsv1.CustomResourceDefinition, version string, sel Selection) *ClusterSource {
	gvr := schema.GroupVersionResource{Group: crd.Spec.Group, Version: version, Resource: crd.Spec.Names.Plural}
	var ri dynamic.ResourceInterface = client.Resource(gvr)
	if crd.Spec.Scope == apiextensionsv1.NamespaceScoped && !sel.AllNamespaces && sel.Namespace != "" {
		ri = client.Resource(gvr).Namespace(sel.Namespace)
	}
	page := sel.PageSize
	if page <= 0 {
		page = DefaultPageSize
	}
	return &ClusterSource{ri: ri, crd: crd.Name, version: version, opts: metav1.ListOptions{LabelSelector: sel.LabelSelector}, limit: sel.Limit, pageSize: page}
}

// Next lists the next page.
func (s *ClusterSource) Next(ctx context.Context) ([]Object, error) {
	if s.done || (s.limit > 0 && s.read >= s.limit) {
		return nil, io.EOF
	}
	s.opts.Limit = s.pageSize
	if s.limit > 0 && s.limit-s.read < s.opts.Limit {
		s.opts.Limit = s.limit - s.read
	}
	list, err := s.ri.List(ctx, s.opts)
	if err != nil {
		return nil, &ListError{CRD: s.crd, Version: s.version, Err: err}
	}
	out := make([]Object, 0, len(list.Items))
	for i := range list.Items {
		item := &list.Items[i]
		out = append(out, Object{Source: objectName(item.GetNamespace(), item.GetName()), Object: item.Object})
	}
	s.read += int64(len(out))
	s.opts.Continue = list.GetContinue()
	if s.opts.Continue == "" {
		s.done = true
	}
	if len(out) == 0 {
		return nil, io.EOF
	}
	return out, nil
}

// Read is the number of objects listed so far.
func (s *ClusterSource) Read() int { return int(s.read) }

func objectName(ns, name string) string {
	if ns == "" {
		return name
	}
	return ns + "/" + name
}

// ReadAll reads the pages of src, up to most objects (0: every one).
func ReadAll(ctx context.Context, src Source, most int) ([]Object, error) {
	var out []Object
	for most <= 0 || len(out) < most {
		page, err := src.Next(ctx)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, err
		}
		out = append(out, page...)
	}
	if most > 0 && len(out) > most {
		out = out[:most]
	}
	return out, nil
}
