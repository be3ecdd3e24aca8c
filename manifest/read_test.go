package manifest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

// referenceDocuments reads r the way ReadDocuments did before it streamed: kubectl's YAML
// reader over the whole input, each document converted whole, Lists expanded afterwards.
func referenceDocuments(t *testing.T, r io.Reader) []Document {
	t.Helper()
	reader := utilyaml.NewYAMLReader(bufio.NewReader(r))
	var docs []Document
	for index := 1; ; index++ {
		raw, err := reader.Read()
		if err == io.EOF {
			return docs
		}
		if err != nil {
			t.Fatal(err)
		}
		js, err := yaml.YAMLToJSON(raw)
		if err != nil {
			t.Fatal(err)
		}
		if len(bytes.TrimSpace(stripComments(raw))) == 0 || string(bytes.TrimSpace(js)) == "null" {
			index--
			continue
		}
		var head struct {
			Kind  string            `json:"kind"`
			Items []json.RawMessage `json:"items"`
		}
		if err := json.Unmarshal(js, &head); err != nil {
			t.Fatal(err)
		}
		if strings.HasSuffix(head.Kind, "List") && head.Items != nil {
			for i, item := range head.Items {
				docs = append(docs, Document{Index: index, Item: i + 1, JSON: item})
			}
			continue
		}
		docs = append(docs, Document{Index: index, JSON: js})
	}
}

func readAll(t *testing.T, input string, opts Options) ([]Document, error) {
	t.Helper()
	opts.Stdin = strings.NewReader(input)
	var docs []Document
	err := EachDocument(context.Background(), []string{"-"}, opts, func(d Document) error {
		docs = append(docs, d)
		return nil
	})
	return docs, err
}

func sameDocuments(t *testing.T, name string, got, want []Document) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d documents, want %d", name, len(got), len(want))
	}
	for i := range want {
		var a, b any
		if err := json.Unmarshal(got[i].JSON, &a); err != nil {
			t.Fatalf("%s: document %d: %v", name, i, err)
		}
		if err := json.Unmarshal(want[i].JSON, &b); err != nil {
			t.Fatal(err)
		}
		if got[i].Index != want[i].Index || got[i].Item != want[i].Item || !reflect.DeepEqual(a, b) {
			t.Fatalf("%s: document %d differs: got %s (index %d item %d)\nwant %s (index %d item %d)",
				name, i, got[i].JSON, got[i].Index, got[i].Item, want[i].JSON, want[i].Index, want[i].Item)
		}
	}
}

// TestEachDocumentMatchesWholeReads: streaming (items of a List one at a time) gives exactly
// the documents that reading each document whole gives, on every testdata file, the corpus,
// and Lists of them in kubectl's YAML and JSON layouts.
func TestEachDocumentMatchesWholeReads(t *testing.T) {
	var inputs []string
	files, _ := filepath.Glob(td("*", "*.yaml"))
	corpus, _ := filepath.Glob(filepath.Join("..", "..", "shared", "corpus", "crds", "*.yaml"))
	files = append(files, corpus...)
	if len(corpus) == 0 {
		t.Log("corpus (../shared/corpus) absent: testing with the repository's testdata only")
	}
	var objects []any
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		inputs = append(inputs, string(b))
		for _, d := range referenceDocuments(t, bytes.NewReader(b)) {
			var o any
			if err := json.Unmarshal(d.JSON, &o); err != nil {
				t.Fatal(err)
			}
			objects = append(objects, o)
		}
	}
	// kubectl get -o yaml: items before kind, an indentless sequence.
	list := map[string]any{"apiVersion": "v1", "kind": "List", "metadata": map[string]any{"resourceVersion": ""}, "items": objects}
	y, err := yaml.Marshal(list)
	if err != nil {
		t.Fatal(err)
	}
	inputs = append(inputs, string(y))
	// kubectl get -o json.
	j, err := json.MarshalIndent(list, "", "    ")
	if err != nil {
		t.Fatal(err)
	}
	inputs = append(inputs, string(j))
	// A stream of two JSON Lists (kubectl's decoder reads both; the reference reader cannot).
	if got, err := readAll(t, string(j)+"\n"+string(j), Options{}); err != nil || len(got) != 2*len(objects) || got[len(objects)].Index != 2 {
		t.Errorf("two JSON Lists: %d documents (%v), want %d", len(got), err, 2*len(objects))
	}
	// Hand-written: kind first, an indented sequence, comments, a flow item, a block scalar,
	// another document after.
	inputs = append(inputs, `# leading comment
kind: List
apiVersion: v1
items:
  # first
  - apiVersion: a.example.com/v1
    kind: A
    metadata: {name: one}
    spec:
      text: |
        - not an item
        items:
# a comment at column 0 inside the sequence

  - {apiVersion: a.example.com/v1, kind: A, metadata: {name: two}}
  -
    apiVersion: a.example.com/v1
    kind: A
    metadata:
      name: three
metadata: {}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: after}
data:
  items: "x"
---
apiVersion: x.example.com/v1
kind: Thing
items:
- 1
- 2
`, "---\n# only comments\n---\napiVersion: v1\nkind: List\nitems: []\n---\napiVersion: v1\nkind: Pod\nmetadata: {name: p}\n")
	for i, in := range inputs {
		name := fmt.Sprintf("input %d", i)
		if i < len(files) {
			name = files[i]
		}
		got, err := readAll(t, in, Options{})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		sameDocuments(t, name, got, referenceDocuments(t, strings.NewReader(in)))
	}
}

// zeros is an endless stream of zero bytes, like /dev/zero (or of fill, when set).
type zeros struct {
	read atomic.Int64
	fill byte
}

func (z *zeros) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = z.fill
	}
	z.read.Add(int64(len(p)))
	return len(p), nil
}

// TestEachDocumentSizeLimit: input that never ends a document (/dev/zero) fails once one
// document passes the limit, having read little more than the limit, and the error names it.
func TestEachDocumentSizeLimit(t *testing.T) {
	for name, tc := range map[string]struct {
		r    io.Reader
		want string
	}{
		"zeros":        {&zeros{}, "stdin (document 1): larger than 1 MiB, the limit for one document"},
		"one big line": {io.MultiReader(strings.NewReader("apiVersion: v1\nkind: ConfigMap\ndata: {a: "), &zeros{}), "stdin (document 1): larger than 1 MiB"},
		"second document": {io.MultiReader(strings.NewReader("apiVersion: v1\nkind: Pod\n---\nkind: Foo\nx: "), &zeros{}),
			"stdin (document 2): larger than 1 MiB"},
		"List item": {io.MultiReader(strings.NewReader("apiVersion: v1\nkind: List\nitems:\n- kind: A\n- kind: B\n  data: "), &zeros{}),
			"stdin (document 1, item 2): larger than 1 MiB"},
		"JSON List item": {io.MultiReader(strings.NewReader(`{"apiVersion": "v1", "items": [{"kind": "A"}, {"kind": "B", "data": "`), &zeros{fill: 'a'}),
			"stdin (document 1, item 2): larger than 1 MiB"},
	} {
		t.Run(name, func(t *testing.T) {
			n := 0
			err := EachDocument(context.Background(), []string{"-"}, Options{Stdin: io.LimitReader(tc.r, 512<<20), MaxDocumentBytes: 1 << 20}, func(Document) error {
				n++
				return nil
			})
			var ie *InputError
			if !errors.As(err, &ie) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want exit 2 with %q", err, tc.want)
			}
			if z, ok := tc.r.(*zeros); ok && z.read.Load() > 4<<20 {
				t.Errorf("read %d bytes before failing; want about the 1 MiB limit", z.read.Load())
			}
		})
	}
}

// TestEachDocumentInterrupted: cancelling the context ends a read blocked on stdin at once.
func TestEachDocumentInterrupted(t *testing.T) {
	pr, pw := io.Pipe()
	defer pw.Close()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- EachDocument(ctx, []string{"-"}, Options{Stdin: pr}, func(Document) error { return nil })
	}()
	_, _ = pw.Write([]byte("apiVersion: v1\nkind: Pod\n"))
	cancel()
	select {
	case err := <-done:
		var ie *InterruptedError
		if !errors.As(err, &ie) || err.Error() != "interrupted" {
			t.Errorf("error %v, want an InterruptedError", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("EachDocument did not return after the context was cancelled")
	}
}

func TestEachDocumentErrors(t *testing.T) {
	for name, tc := range map[string]struct{ in, want string }{
		"top-level YAML list": {"- a\n- b\n", "stdin (document 1): not a Kubernetes object: a list, not a mapping"},
		"scalar":              {"just text\n", "stdin (document 1): not a Kubernetes object: a scalar"},
		"bad separator":       {"kind: A\n--- x\nkind: B\n", "invalid YAML document separator"},
		"malformed JSON":      {`{"kind": "A", `, "stdin (document 1): malformed JSON"},
		"items before kind":   {"apiVersion: v1\nitems:\n- kind: A\nkind: Thing\n", `kind "Thing" is not a List`},
		"JSON array":          {`[{"kind": "A"}]`, "stdin (document 1): not a Kubernetes object: a list"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := readAll(t, tc.in, Options{})
			if !isInputError(err) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want an InputError with %q", err, tc.want)
			}
			if err != nil && (strings.Contains(err.Error(), "Go value") || strings.Contains(err.Error(), "[]interface")) {
				t.Errorf("error shows Go types: %v", err)
			}
		})
	}
}

// TestExpandPathRecursive: a directory is read without its subdirectories unless -R, in name
// order, only .yaml, .yml and .json files.
func TestExpandPathRecursive(t *testing.T) {
	dir := t.TempDir()
	for _, f := range []string{"b.yaml", "a.json", "notes.txt", "sub/c.yml", "sub/deeper/d.yaml"} {
		p := filepath.Join(dir, f)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	rel := func(files []string) string {
		var out []string
		for _, f := range files {
			r, _ := filepath.Rel(dir, f)
			out = append(out, filepath.ToSlash(r))
		}
		return strings.Join(out, " ")
	}
	flat, err := ExpandPath(dir, false)
	if err != nil || rel(flat) != "a.json b.yaml" {
		t.Errorf("non-recursive: %q %v", rel(flat), err)
	}
	deep, err := ExpandPath(dir, true)
	if err != nil || rel(deep) != "a.json b.yaml sub/c.yml sub/deeper/d.yaml" {
		t.Errorf("recursive: %q %v", rel(deep), err)
	}
	if _, err := ExpandPath(filepath.Join(dir, "sub", "deeper", ".."), false); err != nil {
		t.Errorf("a directory with one file: %v", err)
	}
	empty := filepath.Join(dir, "empty", "inner")
	_ = os.MkdirAll(empty, 0o755)
	var ed *EmptyDirError
	if _, err := ExpandPath(filepath.Dir(empty), false); !isInputError(err) || !errors.As(err, &ed) || ed.Recursive || ed.Path != filepath.Dir(empty) {
		t.Errorf("empty directory: %v", err)
	}
	if _, err := ExpandPath(filepath.Dir(empty), true); !errors.As(err, &ed) || !ed.Recursive {
		t.Errorf("empty directory tree: %v", err)
	}
}

// TestEachDocumentURL: -f URL downloads like kubectl (a real HTTP server on 127.0.0.1), with
// errors for a missing page, a body past the limit, and a server that never answers.
func TestEachDocumentURL(t *testing.T) {
	block := make(chan struct{})
	defer close(block)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/crd.yaml":
			http.ServeFile(w, r, td("crds", "crontab.yaml"))
		case "/big":
			w.WriteHeader(http.StatusOK)
			_, _ = io.Copy(w, io.LimitReader(&zeros{}, 8<<20))
		case "/slow":
			select {
			case <-block:
			case <-r.Context().Done():
			}
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	read := func(u string, opts Options) ([]Document, error) {
		var docs []Document
		err := EachDocument(context.Background(), []string{u}, opts, func(d Document) error {
			docs = append(docs, d)
			return nil
		})
		return docs, err
	}
	docs, err := read(srv.URL+"/crd.yaml", Options{})
	if err != nil || len(docs) != 1 || docs[0].Kind != "CustomResourceDefinition" || docs[0].Source != srv.URL+"/crd.yaml" {
		t.Fatalf("download: %v, %d documents", err, len(docs))
	}
	if _, err := read(srv.URL+"/missing.yaml", Options{}); !isInputError(err) || !strings.Contains(err.Error(), "404 Not Found") {
		t.Errorf("404: %v", err)
	}
	if _, err := read(srv.URL+"/big", Options{MaxURLBytes: 1 << 20}); !isInputError(err) || !strings.Contains(err.Error(), "larger than 1 MiB, the limit for one URL") {
		t.Errorf("too big: %v", err)
	}
	if _, err := read(srv.URL+"/slow", Options{URLTimeout: 300 * time.Millisecond}); !isUnavailable(err) || !strings.Contains(err.Error(), "no answer within") {
		t.Errorf("no answer: %v", err)
	}
}

func isInputError(err error) bool {
	var ie *InputError
	return errors.As(err, &ie)
}

func isUnavailable(err error) bool {
	var ue *UnavailableError
	return errors.As(err, &ue)
}

// td is a path under the repository's testdata folder.
func td(parts ...string) string {
	return filepath.Join(append([]string{"..", "testdata"}, parts...)...)
}

// TestEachDocumentHTTPSUnknownAuthority: a URL whose server's certificate this machine does not
// trust fails with one line that says how to trust it (SSL_CERT_FILE), and is read when the
// client trusts the authority. (cmd/kubectl-crdver's TestURLPrivateCA runs the built binary
// with SSL_CERT_FILE.)
func TestEachDocumentHTTPSUnknownAuthority(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.ServeFile(w, r, td("crds", "crontab.yaml"))
	}))
	defer srv.Close()
	u := srv.URL + "/crd.yaml"
	err := EachDocument(context.Background(), []string{u}, Options{}, func(Document) error { return nil })
	if !isUnavailable(err) || !strings.Contains(err.Error(), "certificate signed by unknown authority") ||
		!strings.Contains(err.Error(), "SSL_CERT_FILE=FILE") || strings.Contains(err.Error(), "\n") {
		t.Fatalf("untrusted server: want one line naming SSL_CERT_FILE, got %v", err)
	}
	n := 0
	err = EachDocument(context.Background(), []string{u}, Options{HTTPClient: srv.Client()}, func(Document) error { n++; return nil })
	if err != nil || n != 1 {
		t.Fatalf("trusted server: %v, %d documents", err, n)
	}
}
