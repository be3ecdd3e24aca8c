// Package manifest reads Kubernetes manifests the way kubectl -f does: files, directories (-R
// recursion), http(s) URLs and stdin, YAML or JSON, streamed one document (one List item) at a
// time with a per-document size limit. Errors are typed (InputError, UnavailableError,
// InterruptedError); they name files and documents, never a command's flags.
package manifest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Document is one YAML or JSON document read from a file, a directory, a URL or stdin,
// converted to JSON. Items of a List document are separate Documents.
type Document struct {
	Source string // file path, URL, or "stdin"
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

// Input limits. An object the API server accepts is at most 3 MiB (its request body limit), so
// a document past DefaultMaxDocumentBytes is not a Kubernetes object; a List is not one
// document for this limit: its items are read one at a time.
const (
	DefaultMaxDocumentBytes = 16 << 20
	DefaultMaxURLBytes      = 1 << 30
	DefaultURLTimeout       = 2 * time.Minute
)

// Options tune how documents are read.
type Options struct {
	// Stdin is what "-" reads.
	Stdin io.Reader
	// Recursive walks directories (and their subdirectories) like kubectl -R.
	Recursive bool
	// MaxDocumentBytes bounds one document (or one item of a List); 0 is DefaultMaxDocumentBytes.
	MaxDocumentBytes int64
	// MaxURLBytes bounds what one URL may send; 0 is DefaultMaxURLBytes.
	MaxURLBytes int64
	// URLTimeout bounds the download of one URL; 0 is DefaultURLTimeout.
	URLTimeout time.Duration
	// HTTPClient fetches URLs (nil: a client with URLTimeout).
	HTTPClient *http.Client
	// Prefilter, when set, skips every document (List item) whose text does not contain it,
	// before converting it: a cheap first pass that looks for one kind.
	Prefilter []byte
	// Progress, when set, counts the bytes read so far and the total expected (0 when unknown:
	// stdin, a URL without Content-Length).
	Progress *Progress
}

// Progress counts what has been read; safe to read from another goroutine.
type Progress struct {
	Read  atomic.Int64
	Total atomic.Int64
}

func (o Options) maxDoc() int64 {
	if o.MaxDocumentBytes > 0 {
		return o.MaxDocumentBytes
	}
	return DefaultMaxDocumentBytes
}

// ReadDocuments reads every document of the given files; a directory contributes its *.yaml,
// *.yml and *.json files (not recursively, in name order), "-" is stdin and an http(s) URL is
// downloaded. Empty documents are skipped; List documents are expanded into their items. It
// keeps every document in memory: for large inputs use EachDocument.
func ReadDocuments(paths []string, stdin io.Reader) ([]Document, error) {
	var docs []Document
	err := EachDocument(context.Background(), paths, Options{Stdin: stdin}, func(d Document) error {
		docs = append(docs, d)
		return nil
	})
	return docs, err
}

// EachDocument reads the documents of paths (files, directories, "-" for stdin, http(s) URLs)
// one at a time, in order, and calls fn for each; memory is bounded by one document (one item
// of a List). It stops at the first error of fn, and returns an *InterruptedError as soon as
// ctx is done, even while a read is blocked.
func EachDocument(ctx context.Context, paths []string, opts Options, fn func(Document) error) error {
	docs := Open(ctx, paths, opts)
	defer docs.Close()
	for {
		d, err := docs.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		if err := fn(d); err != nil {
			return err
		}
	}
}

// Documents reads the documents of paths on demand, one at a time (Open, Next, Close): the
// form of EachDocument for a reader that pulls, a page at a time. Each path is opened once, so
// a pipe (process substitution, a FIFO, /dev/stdin) is read once. A few documents are read
// ahead on another goroutine.
type Documents struct {
	ctx  context.Context
	ch   chan docMsg
	stop chan struct{}
	once sync.Once
	err  error // the error Next returned last (sticky)
}

type docMsg struct {
	doc Document
	err error
}

// Open starts reading the documents of paths (as EachDocument). Close releases it.
func Open(ctx context.Context, paths []string, opts Options) *Documents {
	d := &Documents{ctx: ctx, ch: make(chan docMsg, 4), stop: make(chan struct{})}
	go func() {
		defer close(d.ch)
		send := func(doc Document) error {
			select {
			case d.ch <- docMsg{doc: doc}:
				return nil
			case <-d.stop:
				return errStopped
			}
		}
		if err := produceDocuments(ctx, paths, opts, send); err != nil && !errors.Is(err, errStopped) {
			select {
			case d.ch <- docMsg{err: err}:
			case <-d.stop:
			}
		}
	}()
	return d
}

// Next returns the next document; io.EOF after the last one, an *InterruptedError as soon as
// the context is done (even while a read is blocked: the blocked read is abandoned), and the
// input's errors (*InputError, *UnavailableError). An error is returned again by later calls.
func (d *Documents) Next() (Document, error) {
	if d.err != nil {
		return Document{}, d.err
	}
	if d.ctx.Err() != nil {
		d.err = interrupted(d.ctx)
		return Document{}, d.err
	}
	select {
	case <-d.ctx.Done():
		d.err = interrupted(d.ctx)
	case m, ok := <-d.ch:
		switch {
		case !ok:
			d.err = io.EOF
		case m.err != nil:
			d.err = m.err
		default:
			return m.doc, nil
		}
	}
	return Document{}, d.err
}

// Close stops the reading; Next returns io.EOF (or its last error) afterwards. A read blocked
// on a pipe is abandoned, not waited for.
func (d *Documents) Close() {
	d.once.Do(func() {
		close(d.stop)
		if d.err == nil {
			d.err = io.EOF
		}
	})
}

var errStopped = errors.New("stopped")

func produceDocuments(ctx context.Context, paths []string, opts Options, send func(Document) error) error {
	var files []string
	for _, p := range paths {
		f, err := ExpandPath(p, opts.Recursive)
		if err != nil {
			return err
		}
		files = append(files, f...)
	}
	if opts.Progress != nil {
		opts.Progress.Total.Store(max(Size(files), 0))
	}
	for _, f := range files {
		if ctx.Err() != nil {
			return interrupted(ctx)
		}
		if err := readSource(ctx, f, opts, send); err != nil {
			return err
		}
	}
	return nil
}

// Size is the number of bytes of files (as ExpandPath lists them), -1 when it is not known
// without reading them: stdin, a URL, a pipe (process substitution, a FIFO, /dev/stdin) or a
// device. Nothing is opened.
func Size(files []string) int64 {
	var total int64
	for _, f := range files {
		if f == "-" || IsURL(f) {
			return -1
		}
		st, err := os.Stat(f)
		if err != nil || !st.Mode().IsRegular() {
			return -1
		}
		total += st.Size()
	}
	return total
}

// Rereadable reports whether the file can be read more than once: a regular file. Stdin, URLs,
// pipes (process substitution, a FIFO, /dev/stdin) and devices are read once, by the one read
// that uses them.
func Rereadable(file string) bool {
	if file == "-" || IsURL(file) {
		return false
	}
	st, err := os.Stat(file)
	return err == nil && st.Mode().IsRegular()
}

// IsURL is true for an http(s) URL, which EachDocument downloads.
func IsURL(p string) bool {
	return strings.HasPrefix(p, "http://") || strings.HasPrefix(p, "https://")
}

// inputExtensions are the file names a directory contributes, as kubectl reads them.
func inputFile(name string) bool {
	switch strings.ToLower(filepath.Ext(name)) {
	case ".yaml", ".yml", ".json":
		return true
	}
	return false
}

// ExpandPath lists the files of p: itself ("-" and URLs too), or the .yaml, .yml and .json files
// of a directory, in name order; recursive walks subdirectories like kubectl -R.
func ExpandPath(p string, recursive bool) ([]string, error) {
	if p == "-" || IsURL(p) {
		return []string{p}, nil
	}
	st, err := os.Stat(p)
	if err != nil {
		return nil, inputErrorf("%s: %v", p, unwrapPathError(err))
	}
	if !st.IsDir() {
		return []string{p}, nil
	}
	var files []string
	if recursive {
		err = filepath.WalkDir(p, func(path string, e fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if !e.IsDir() && inputFile(e.Name()) {
				files = append(files, path)
			}
			return nil
		})
		if err != nil {
			return nil, inputErrorf("%s: %v", p, unwrapPathError(err))
		}
	} else {
		entries, err := os.ReadDir(p)
		if err != nil {
			return nil, inputErrorf("%s: %v", p, unwrapPathError(err))
		}
		for _, e := range entries {
			if !e.IsDir() && inputFile(e.Name()) {
				files = append(files, filepath.Join(p, e.Name()))
			}
		}
		sort.Strings(files)
	}
	if len(files) == 0 {
		return nil, inputError(&EmptyDirError{Path: p, Recursive: recursive})
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
