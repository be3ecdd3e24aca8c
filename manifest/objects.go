package manifest

import (
	"context"
	"errors"
	"io"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// ObjectPages streams the objects of one group and kind from files, a page at a time: memory
// holds one page, whatever the size of the files (a List is read an item at a time, as
// EachDocument reads it). Other kinds are skipped before they are decoded. Paths are files or
// directories (not recursively; not stdin or URLs). Its Next and Total make it a
// plan.ObjectSource.
type ObjectPages struct {
	paths    []string
	group    string
	kind     string
	pageSize int
	docs     *Documents
	total    int64
	done     bool
}

// NewObjectPages reads the objects of group and kind from paths, pageSize at a time.
func NewObjectPages(paths []string, group, kind string, pageSize int) *ObjectPages {
	return &ObjectPages{paths: paths, group: group, kind: kind, pageSize: max(pageSize, 1)}
}

// Total is the number of objects, known once every file has been read (-1 before).
func (s *ObjectPages) Total() int64 {
	if s.done {
		return s.total
	}
	return -1
}

// Next returns the next page, or io.EOF after the last one. Errors are *InputError, and
// *InterruptedError once ctx is done.
func (s *ObjectPages) Next(ctx context.Context) ([]unstructured.Unstructured, error) {
	if s.done {
		return nil, io.EOF
	}
	if s.docs == nil {
		for _, p := range s.paths {
			if p == "-" {
				return nil, inputErrorf("-: objects are read from files, not standard input")
			}
		}
		s.docs = Open(ctx, s.paths, Options{Prefilter: []byte(s.kind)})
	}
	var page []unstructured.Unstructured
	for len(page) < s.pageSize {
		d, err := s.docs.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			s.docs.Close()
			return nil, err
		}
		gv, err := schema.ParseGroupVersion(d.APIVersion)
		if err != nil || gv.Group != s.group || d.Kind != s.kind {
			continue
		}
		u := unstructured.Unstructured{}
		if err := u.UnmarshalJSON(d.JSON); err != nil {
			continue // not a Kubernetes object: skipped like other kinds
		}
		if u.GetName() == "" {
			s.docs.Close()
			return nil, inputErrorf("%s: %s has no metadata.name", d.Where(), s.kind)
		}
		page = append(page, u)
		s.total++
	}
	if len(page) == 0 {
		s.done = true
		s.docs.Close()
		return nil, io.EOF
	}
	return page, nil
}
