package preflight

// evidence.go: what an earlier preflight proved, kept so that a run resumed after Ctrl-C does
// not send the same dry runs again. The file (next to the rewrite's checkpoint) holds a header
// — the CRD object, the target, a digest of the CRD's spec as the write is judged by and of the
// admission configurations (names and resourceVersions) — then one line per object whose
// dry-run write the API server accepted: its key and resourceVersion, in list order. A later
// check with the same header skips the dry run of an object listed with the same
// resourceVersion (it has not changed since; the rules it was judged by have not either) and
// re-checks every other. Both are read and written as streams, in list order: memory stays
// bounded by a page.

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	"github.com/crdver/kubectl-crdver/internal/atomicfile"
)

const evidenceFormat = 1

type evidenceHeader struct {
	Format    int    `json:"format"`
	CRD       string `json:"crd"`
	UID       string `json:"uid"`
	Target    string `json:"target"`
	Spec      string `json:"spec"`
	Admission string `json:"admission"`
}

func digest(v any) string {
	b, _ := json.Marshal(v)
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// evidenceReader streams an evidence file in list order.
type evidenceReader struct {
	f       *os.File
	sc      *bufio.Scanner
	key, rv string
	more    bool
}

// openEvidence opens the evidence at path when its header is want (nil otherwise: none, or
// written under other rules).
func openEvidence(path string, want evidenceHeader) *evidenceReader {
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	sc := bufio.NewScanner(f)
	var got evidenceHeader
	if !sc.Scan() || json.Unmarshal(sc.Bytes(), &got) != nil || got != want {
		f.Close()
		return nil
	}
	r := &evidenceReader{f: f, sc: sc}
	r.next()
	return r
}

func (r *evidenceReader) next() {
	r.more = false
	for r.sc.Scan() {
		if k, v, ok := strings.Cut(r.sc.Text(), "\t"); ok {
			r.key, r.rv, r.more = k, v, true
			return
		}
	}
}

// accepted reports whether the evidence holds key at resourceVersion rv. Keys must be asked
// in list order.
func (r *evidenceReader) accepted(key, rv string) bool {
	if r == nil {
		return false
	}
	for r.more && r.key < key {
		r.next()
	}
	return r.more && r.key == key && r.rv == rv
}

func (r *evidenceReader) close() {
	if r != nil {
		r.f.Close()
	}
}

// evidenceWriter writes a new content of the evidence file (atomicfile) and puts it in place
// on commit.
type evidenceWriter struct {
	f   *atomicfile.File
	w   *bufio.Writer
	err error
}

func createEvidence(path string, h evidenceHeader) *evidenceWriter {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil
	}
	f, err := atomicfile.Create(path, 0o600)
	if err != nil {
		return nil
	}
	w := &evidenceWriter{f: f, w: bufio.NewWriter(f)}
	b, _ := json.Marshal(h)
	w.line(string(b))
	return w
}

func (w *evidenceWriter) line(s string) {
	if w.err == nil {
		_, w.err = w.w.WriteString(s + "\n")
	}
}

func (w *evidenceWriter) add(key, rv string) {
	if w != nil {
		w.line(key + "\t" + rv)
	}
}

// commit replaces path with what was written (nothing is replaced after a write error).
func (w *evidenceWriter) commit() {
	if w == nil {
		return
	}
	if w.err == nil {
		w.err = w.w.Flush()
	}
	if w.err == nil {
		w.err = w.f.Commit()
	}
	w.f.Close()
}

// evidenceHeaderFor is the header of a check of crd at target under the admission
// configuration adm.
func evidenceHeaderFor(next *apiextensionsv1.CustomResourceDefinition, target string, adm Admission) evidenceHeader {
	return evidenceHeader{Format: evidenceFormat, CRD: next.Name, UID: string(next.UID), Target: target, Spec: digest(next.Spec), Admission: adm.Fingerprint}
}
