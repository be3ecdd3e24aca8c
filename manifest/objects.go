package manifest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

// ObjectPages streams the objects of one group and kind from files, a page at a time: memory
// holds one page, whatever the size of the files. Other documents, and documents that are not
// Kubernetes objects, are skipped; List items are read one at a time. Paths are files or
// directories (not recursively; not stdin or URLs). Its Next and Total make it a
// plan.ObjectSource.
type ObjectPages struct {
	paths     []string
	group     string
	kind      string
	pageSize  int
	files     []string
	expanded  bool
	cur       *os.File
	reader    *utilyaml.YAMLReader
	fileIndex int
	docIndex  int
	total     int64
	exhausted bool
}

// NewObjectPages reads the objects of group and kind from paths, pageSize at a time.
func NewObjectPages(paths []string, group, kind string, pageSize int) *ObjectPages {
	return &ObjectPages{paths: paths, group: group, kind: kind, pageSize: pageSize, total: -1}
}

// Total is the number of objects, known once every file has been read (-1 before).
func (s *ObjectPages) Total() int64 {
	if s.exhausted {
		return s.total
	}
	return -1
}

// Next returns the next page, or io.EOF after the last one. Errors are *InputError.
func (s *ObjectPages) Next(ctx context.Context) ([]unstructured.Unstructured, error) {
	if !s.expanded {
		for _, p := range s.paths {
			if p == "-" {
				return nil, inputErrorf("-: objects are read from files, not standard input")
			}
			fs, err := ExpandPath(p, false)
			if err != nil {
				return nil, err
			}
			s.files = append(s.files, fs...)
		}
		s.expanded, s.total = true, 0
	}
	var page []unstructured.Unstructured
	for len(page) < s.pageSize {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if s.reader == nil {
			if s.fileIndex >= len(s.files) {
				break
			}
			f, err := os.Open(s.files[s.fileIndex])
			if err != nil {
				return nil, inputErrorf("%s: %v", s.files[s.fileIndex], unwrapPathError(err))
			}
			s.cur, s.reader, s.docIndex = f, utilyaml.NewYAMLReader(bufio.NewReaderSize(f, 64*1024)), 0
		}
		raw, err := s.reader.Read()
		if err == io.EOF {
			s.cur.Close()
			s.cur, s.reader = nil, nil
			s.fileIndex++
			continue
		}
		name := s.files[s.fileIndex]
		s.docIndex++
		if err != nil {
			return nil, inputErrorf("%s: reading document %d: %v", name, s.docIndex, err)
		}
		if len(bytes.TrimSpace(stripComments(raw))) == 0 {
			continue
		}
		js, err := yaml.YAMLToJSON(raw)
		if err != nil {
			return nil, inputErrorf("%s (document %d): malformed YAML: %v", name, s.docIndex, trimYAMLError(err))
		}
		var head struct {
			APIVersion string            `json:"apiVersion"`
			Kind       string            `json:"kind"`
			Items      []json.RawMessage `json:"items"`
		}
		if err := json.Unmarshal(js, &head); err != nil {
			continue // not an object: nothing to do with this kind
		}
		items := []json.RawMessage{js}
		if head.Items != nil && len(head.Kind) > 4 && head.Kind[len(head.Kind)-4:] == "List" {
			items = head.Items
		}
		for i, item := range items {
			u := unstructured.Unstructured{}
			if err := u.UnmarshalJSON(item); err != nil {
				continue // not a Kubernetes object: skipped like other kinds
			}
			gv, err := schema.ParseGroupVersion(u.GetAPIVersion())
			if err != nil || gv.Group != s.group || u.GetKind() != s.kind {
				continue
			}
			if u.GetName() == "" {
				return nil, inputErrorf("%s (document %d, item %d): %s has no metadata.name", name, s.docIndex, i+1, s.kind)
			}
			page = append(page, u)
			s.total++
		}
	}
	if len(page) == 0 {
		s.exhausted = true
		return nil, io.EOF
	}
	return page, nil
}
