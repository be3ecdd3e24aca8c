package restore

// stream.go: a backup of any size in bounded memory. Both passes read the backup a document at
// a time; input that can be read only once (stdin, a pipe) is copied to a temporary file
// first; what the dry-run pass must hand to the write pass (the field managers each object's
// write may drop, with consent, and the write its dry run checked) goes through a temporary
// file in backup order; the reports count what they do not keep.

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/crdver/kubectl-crdver/internal/scratch"
	"github.com/crdver/kubectl-crdver/manifest"
)

// maxLossesKept bounds the ownership losses a report keeps to name them (the run counts them
// all, and Options.Each is given every one).
const maxLossesKept = 1000

// add counts outcome o (document index i of the pass) in the report, and keeps it unless the
// outcomes go to each instead.
func (r *Report) add(o Outcome, keep bool) {
	r.Documents++
	r.Counts[o.State]++
	if o.Incomplete() {
		r.incomplete++
	}
	if len(o.NotHeld) > 0 {
		r.NotHeldObjects++
	}
	if len(o.LostManagers) > 0 {
		r.LostOwnership++
		if !keep && len(r.losses) < maxLossesKept {
			r.losses = append(r.losses, o)
		}
	}
	if keep {
		r.Objects = append(r.Objects, o)
	}
}

// spooled is the backup as both passes read it (manifest.Spool): the files as given, but each
// input that can be read only once (stdin, a pipe, a device) copied to a temporary file first.
type spooled struct {
	*manifest.Spooled
	files  []string
	copied []string
}

// name is how the user named file: "stdin" or the pipe's path for a copy.
func (s *spooled) name(file string) string { return s.Name(file) }

// spool copies the inputs of files that can be read once to temporary files (manifest.Spool).
func spool(ctx context.Context, files []string, stdin io.Reader) (*spooled, error) {
	sp, err := manifest.Spool(ctx, files, stdin, "crdver-restore-backup-*.yaml", "the restore reads the backup twice")
	return &spooled{Spooled: sp, files: sp.Files, copied: sp.Copied}, err
}

// close removes the temporary copies.
func (s *spooled) close() { s.Close() }

// consentEntry is what the dry-run pass hands the write pass for one backup document: the
// index of the document in the pass, its key (a check that both passes read the same backup),
// the managers its write may drop with consent, and the write its dry run checked.
type consentEntry struct {
	Index    int      `json:"i"`
	Key      string   `json:"key"`
	Managers []string `json:"managers,omitempty"`
	// Plan is the write the dry run sent and checked (nil: none, or not for this document).
	Plan *plannedWrite `json:"plan,omitempty"`
}

// plannedWrite is a write the dry-run pass sent as a server-side dry run and checked: the merge
// patch, which carries the resourceVersion of the object it was computed from (so that the API
// server refuses it, 409, once the object has changed), the field managers of that object the
// report compares the write's answer with, and the outcome the dry run gave. The write pass
// sends it as it is while the object and its CRD are unchanged: the same request on the same
// object, whose answer the dry run has already checked (restored fields held, managers dropped
// only with consent); otherwise it reads, compares and dry-runs the object again.
type plannedWrite struct {
	Body    json.RawMessage             `json:"body"`
	Before  []metav1.ManagedFieldsEntry `json:"before,omitempty"`
	Outcome Outcome                     `json:"outcome"`
}

// consentLog hands the dry-run pass's consents and checked writes to the write pass through a
// temporary file, in backup order: the write pass reads it in step with the backup, so memory
// holds one entry whatever the number of objects.
type consentLog struct {
	f   *scratch.File
	w   *bufio.Writer
	r   *json.Decoder
	cur *consentEntry
	n   int
}

func (c *consentLog) record(i int, key string, managers []string, plan *plannedWrite) error {
	if c.f == nil {
		f, err := scratch.New("crdver-restore-consent-*.jsonl")
		if err != nil {
			return fmt.Errorf("recording the field managers the writes may drop: %w", err)
		}
		c.f, c.w = f, bufio.NewWriter(f)
	}
	c.n++
	js, err := json.Marshal(consentEntry{Index: i, Key: key, Managers: managers, Plan: plan})
	if err != nil {
		return err
	}
	_, _ = c.w.Write(js)
	return c.w.WriteByte('\n')
}

// rewind makes the log ready to be read from its start.
func (c *consentLog) rewind() error {
	if c.f == nil {
		return nil
	}
	if err := c.w.Flush(); err != nil {
		return err
	}
	if _, err := c.f.Seek(0, io.SeekStart); err != nil {
		return err
	}
	c.r, c.cur = json.NewDecoder(bufio.NewReader(c.f)), nil
	return nil
}

// entry is what the dry-run pass recorded for document i (key), or nil: the entries are read
// in step with the backup (the write pass asks in backup order; i never decreases).
func (c *consentLog) entry(i int, key string) *consentEntry {
	if c == nil {
		return nil
	}
	for c.cur == nil || c.cur.Index < i {
		if c.r == nil {
			return nil
		}
		var e consentEntry
		if c.r.Decode(&e) != nil {
			c.r = nil
			return nil
		}
		c.cur = &e
	}
	if c.cur.Index == i && c.cur.Key == key {
		return c.cur
	}
	return nil
}

func (c *consentLog) close() {
	if c != nil && c.f != nil {
		_ = c.f.Close()
		c.f = nil
	}
}
