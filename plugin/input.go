package plugin

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

// Document is one YAML or JSON document read from a file, a directory or stdin, converted to
// JSON. Items of a List document are separate Documents.
type Document struct {
	Source string // file path, or "stdin"
	Index  int    // 1-based position of the document in Source
	Item   int    // 1-based position in a List document's items, 0 when not from a List
	JSON   []byte
	// APIVersion and Kind as written in the document.
	APIVersion, Kind string
}

// Where names the document for error messages: `crd.yaml (document 2)`.
func (d Document) Where() string {
	if d.Item > 0 {
		return fmt.Sprintf("%s (document %d, item %d)", d.Source, d.Index, d.Item)
	}
	return fmt.Sprintf("%s (document %d)", d.Source, d.Index)
}

// ReadDocuments reads every document of the given files; a directory contributes its *.yaml,
// *.yml and *.json files (not recursively, in name order) and "-" is stdin. Empty documents
// are skipped; List documents are expanded into their items.
func ReadDocuments(paths []string, stdin io.Reader) ([]Document, error) {
	var docs []Document
	for _, p := range paths {
		files, err := expandPath(p)
		if err != nil {
			return nil, err
		}
		for _, f := range files {
			d, err := readFile(f, stdin)
			if err != nil {
				return nil, err
			}
			docs = append(docs, d...)
		}
	}
	return docs, nil
}

func expandPath(p string) ([]string, error) {
	if p == "-" {
		return []string{p}, nil
	}
	st, err := os.Stat(p)
	if err != nil {
		return nil, UsageErrorf("%s: %v", p, unwrapPathError(err))
	}
	if !st.IsDir() {
		return []string{p}, nil
	}
	entries, err := os.ReadDir(p)
	if err != nil {
		return nil, UsageErrorf("%s: %v", p, unwrapPathError(err))
	}
	var files []string
	for _, e := range entries {
		ext := strings.ToLower(filepath.Ext(e.Name()))
		if !e.IsDir() && (ext == ".yaml" || ext == ".yml" || ext == ".json") {
			files = append(files, filepath.Join(p, e.Name()))
		}
	}
	sort.Strings(files)
	if len(files) == 0 {
		return nil, UsageErrorf("%s: directory has no .yaml, .yml or .json files", p)
	}
	return files, nil
}

func unwrapPathError(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

func readFile(path string, stdin io.Reader) ([]Document, error) {
	var r io.Reader
	source := path
	if path == "-" {
		if stdin == nil {
			return nil, UsageErrorf("-f -: no standard input")
		}
		r, source = stdin, "stdin"
	} else {
		f, err := os.Open(path)
		if err != nil {
			return nil, UsageErrorf("%s: %v", path, unwrapPathError(err))
		}
		defer f.Close()
		r = f
	}
	reader := utilyaml.NewYAMLReader(bufio.NewReaderSize(r, 64*1024))
	var docs []Document
	for index := 1; ; index++ {
		raw, err := reader.Read()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, UsageErrorf("%s: reading document %d: %v", source, index, err)
		}
		if len(bytes.TrimSpace(stripComments(raw))) == 0 {
			index--
			continue
		}
		js, err := yaml.YAMLToJSON(raw)
		if err != nil {
			return nil, UsageErrorf("%s (document %d): malformed YAML: %v", source, index, trimYAMLError(err))
		}
		if bytes.Equal(bytes.TrimSpace(js), []byte("null")) {
			index--
			continue
		}
		var head struct {
			APIVersion string            `json:"apiVersion"`
			Kind       string            `json:"kind"`
			Items      []json.RawMessage `json:"items"`
		}
		if err := json.Unmarshal(js, &head); err != nil {
			return nil, notAnObject(fmt.Sprintf("%s (document %d)", source, index), js)
		}
		if strings.HasSuffix(head.Kind, "List") && head.Items != nil {
			for i, item := range head.Items {
				d := Document{Source: source, Index: index, Item: i + 1, JSON: item}
				if err := d.fillHead(); err != nil {
					return nil, err
				}
				docs = append(docs, d)
			}
			continue
		}
		docs = append(docs, Document{Source: source, Index: index, JSON: js, APIVersion: head.APIVersion, Kind: head.Kind})
	}
	return docs, nil
}

func (d *Document) fillHead() error {
	var head struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
	}
	if err := json.Unmarshal(d.JSON, &head); err != nil {
		return notAnObject(d.Where(), d.JSON)
	}
	d.APIVersion, d.Kind = head.APIVersion, head.Kind
	return nil
}

// stripComments drops whole-line YAML comments so that a document holding only comments counts
// as empty.
func stripComments(b []byte) []byte {
	var out []byte
	for _, line := range bytes.Split(b, []byte("\n")) {
		if t := bytes.TrimSpace(line); len(t) > 0 && t[0] != '#' {
			out = append(out, line...)
			out = append(out, '\n')
		}
	}
	return out
}

func trimYAMLError(err error) string {
	s := err.Error()
	s = strings.TrimPrefix(s, "error converting YAML to JSON: ")
	return s
}
