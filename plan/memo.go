package plan

// memo.go: a later plan of the same release in the same process (upgrade's verify step, after
// the rewrite) does not evaluate again an object an earlier plan evaluated with nothing to
// say, when its content has not changed since. The earlier plan records, per CRD, the rules the
// objects were judged by (the new CRD, the versions read and written, the field validation)
// and, in list order, each clean object's key and a digest of its content; the later plan,
// when the rules are the same, skips an object whose digest is the same: the evaluation is a
// function of the object's content and those rules only, so its answer would be the same
// (nothing). Anything else (a different digest, a key not recorded, different rules, a
// conversion webhook) is evaluated. The records are files read and written as streams in list
// order: memory stays bounded by a page. Each file is removed from its folder as soon as it is
// created (it lives on through its open handle), so a process killed at any moment leaves
// nothing behind; where the system cannot remove an open file (Windows) Close removes it.

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/crdver/kubectl-crdver/internal/scratch"
)

// ObjectMemo holds what earlier plans in this process found clean (see above). Create it with
// NewObjectMemo, give it to each Plan (Options.Memo) and Close it at the end. The first plan of
// a CRD records; the next one with the same rules reuses, and records nothing.
type ObjectMemo struct {
	mu   sync.Mutex
	crds map[string]*memoEntry
	// Reused counts the objects not evaluated again.
	Reused atomic.Int64
}

type memoEntry struct {
	rules     string        // digest of everything but the encodings
	encodings []string      // the versions objects were evaluated as encoded at
	f         *scratch.File // the record, read with ReadAt by later passes
	size      int64
	complete  bool // the pass ended without error: every listed object was seen
}

// NewObjectMemo makes an empty memo; its records are temporary files, made as plans need them.
func NewObjectMemo() (*ObjectMemo, error) {
	return &ObjectMemo{crds: map[string]*memoEntry{}}, nil
}

// Close releases the records.
func (m *ObjectMemo) Close() error {
	if m == nil {
		return nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	var first error
	for _, e := range m.crds {
		if err := e.f.Close(); err != nil && first == nil {
			first = err
		}
	}
	m.crds = map[string]*memoEntry{}
	return first
}

// rulesOf is the digest of what an object's evaluation depends on besides its content and the
// versions it may be encoded at; "" when the memo cannot be used (a conversion webhook: an
// object listed at another version may hold other content than its stored copy).
func rulesOf(e *evaluator) string {
	if s := strategyOf(e.next); e.viaWebhook || (s != "" && s != apiextensionsv1.NoneConverter) {
		return ""
	}
	return digestOf([]any{e.next.Name, e.next.Spec, e.readVersion, e.fv, e.readDeprecated})
}

// start returns, for a pass of crd under e, the record to reuse (nil: none) and the record
// to write (nil: none).
func (m *ObjectMemo) start(crd string, e *evaluator) (*memoReader, *memoWriter) {
	if m == nil {
		return nil, nil
	}
	rules := rulesOf(e)
	if rules == "" {
		return nil, nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if prev, ok := m.crds[crd]; ok {
		// The same rules, and every version the object may be encoded at now was one the
		// earlier pass read it as (with conversion None, a clean object read the same at each).
		if !prev.complete || prev.rules != rules || !subset(e.encodings, prev.encodings) {
			return nil, nil
		}
		r := &memoReader{sc: bufio.NewScanner(io.NewSectionReader(prev.f, 0, prev.size))}
		r.sc.Buffer(make([]byte, 0, 4096), 1<<20)
		r.next()
		return r, nil
	}
	f, err := scratch.New("crdver-plan-memo-")
	if err != nil {
		return nil, nil
	}
	entry := &memoEntry{rules: rules, encodings: slices.Clone(e.encodings), f: f}
	m.crds[crd] = entry
	return nil, &memoWriter{w: bufio.NewWriter(f), entry: entry}
}

func subset(a, b []string) bool {
	for _, x := range a {
		if !slices.Contains(b, x) {
			return false
		}
	}
	return len(a) > 0
}

// objectKey is an object's key in list order ("namespace/name": the API server lists in the
// order of its storage keys, which end the same way).
func objectKey(u *unstructured.Unstructured) string {
	return u.GetNamespace() + "/" + u.GetName()
}

// contentDigest is the digest of what an object's evaluation reads: the object without the
// fields the API server sets on every write and the evaluation does not read (resourceVersion,
// generation, managedFields), nor apiVersion (with conversion None an object listed at another
// version is the same content, relabelled), plus the version it is re-created at.
func contentDigest(u *unstructured.Unstructured, createVersion string) string {
	c := make(map[string]any, len(u.Object))
	for k, v := range u.Object {
		if k != "apiVersion" && k != "metadata" {
			c[k] = v
		}
	}
	if md, ok := u.Object["metadata"].(map[string]any); ok {
		m := make(map[string]any, len(md))
		for k, v := range md {
			if k != "resourceVersion" && k != "generation" && k != "managedFields" {
				m[k] = v
			}
		}
		c["metadata"] = m
	}
	c["\x00createVersion"] = createVersion
	return digestOf(c)
}

func digestOf(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return ""
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:16])
}

type memoReader struct {
	sc       *bufio.Scanner
	key, sum string
	done     bool
}

func (r *memoReader) next() {
	if r.sc.Scan() {
		line := r.sc.Text()
		if i := strings.LastIndexByte(line, '\t'); i >= 0 {
			r.key, r.sum = line[:i], line[i+1:]
			return
		}
	}
	r.done = true
}

// lookup returns the recorded digest of key ("" if not recorded); keys must come in list
// order.
func (r *memoReader) lookup(key string) string {
	for !r.done && r.key < key {
		r.next()
	}
	if !r.done && r.key == key {
		return r.sum
	}
	return ""
}

func (r *memoReader) close() {}

type memoWriter struct {
	w     *bufio.Writer
	entry *memoEntry
	err   error
}

func (w *memoWriter) add(key, sum string) {
	if w.err == nil && sum != "" && !strings.ContainsAny(key, "\t\n") {
		_, w.err = fmt.Fprintf(w.w, "%s\t%s\n", key, sum)
	}
}

// close ends the record; it is used by a later pass only if the pass completed.
func (w *memoWriter) close(complete bool) {
	if err := w.w.Flush(); w.err == nil {
		w.err = err
	}
	if st, err := w.entry.f.Stat(); err == nil {
		w.entry.size = st.Size()
	} else if w.err == nil {
		w.err = err
	}
	w.entry.complete = complete && w.err == nil
}
