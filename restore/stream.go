package restore

// stream.go: a backup of any size in bounded memory. Both passes read the backup a document at
// a time; input that can be read only once (stdin, a pipe) is copied to a temporary file
// first; what the dry-run pass must hand to the write pass (the field managers each object's
// write may drop, with consent) goes through a temporary file in backup order; the reports
// count what they do not keep.

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"

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

// consentEntry is one object whose write may drop field managers, with consent: the index of
// its backup document in the pass, its key (a check that both passes read the same backup),
// and the managers.
type consentEntry struct {
	Index    int      `json:"i"`
	Key      string   `json:"key"`
	Managers []string `json:"managers"`
}

// consentLog hands the dry-run pass's ownership losses to the write pass through a temporary
// file, in backup order: the write pass reads it in step with the backup, so memory holds one
// entry whatever the number of objects.
type consentLog struct {
	f   *scratch.File
	w   *bufio.Writer
	r   *json.Decoder
	cur *consentEntry
	n   int
}

func (c *consentLog) record(i int, key string, managers []string) error {
	if c.f == nil {
		f, err := scratch.New("crdver-restore-consent-*.jsonl")
		if err != nil {
			return fmt.Errorf("recording the field managers the writes may drop: %w", err)
		}
		c.f, c.w = f, bufio.NewWriter(f)
	}
	c.n++
	js, err := json.Marshal(consentEntry{Index: i, Key: key, Managers: managers})
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

// consented are the managers the write of document i (key) may drop: the entries are read in
// step with the backup (i never decreases; the same i may be asked again, on a retry).
func (c *consentLog) consented(i int, key string) []string {
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
		return c.cur.Managers
	}
	return nil
}

func (c *consentLog) close() {
	if c != nil && c.f != nil {
		_ = c.f.Close()
		c.f = nil
	}
}
