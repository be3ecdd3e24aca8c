package convert

// writespool.go: what a file of a write or check run says — a result per object to convert
// and the file's unified diff — is known in full only once the file is done (its status comes
// last), and it grows with the file. It is kept in memory up to spillLimit, and past it in a
// temporary file (not beside the manifest: in the system's temporary folder, removed at once
// so that nothing is left behind even by a killed process), so that memory is bounded by a
// document whatever the file's size. FileResult reads it back (EachObject, WriteDiff,
// WriteJSON) while WriteOptions.File has it; it is gone once File returns.

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"unicode/utf8"

	"github.com/crdver/kubectl-crdver/internal/scratch"
)

// spillLimit is how much of a file's results (and of its diff, and of its diff's open hunk)
// is kept in memory before the rest goes to a temporary file (a variable: tests lower it).
var spillLimit = 1 << 20

// spill is bytes written once and read back (any number of times) when they are complete:
// in memory up to spillLimit, past it in a temporary file.
type spill struct {
	mem bytes.Buffer
	f   *scratch.File
	n   int64
	err error // the first write error: every later write fails with it
}

// Write appends p.
func (s *spill) Write(p []byte) (int, error) {
	if s.err != nil {
		return 0, s.err
	}
	s.n += int64(len(p))
	if s.f == nil && s.mem.Len()+len(p) <= spillLimit {
		return s.mem.Write(p)
	}
	if s.f == nil {
		f, err := scratch.New("crdver-write-*")
		if err != nil {
			s.err = err
			return 0, err
		}
		s.f = f
		if _, err := f.Write(s.mem.Bytes()); err != nil {
			s.err = err
			return 0, err
		}
		s.mem = bytes.Buffer{}
	}
	if _, err := s.f.Write(p); err != nil {
		s.err = err
		return 0, err
	}
	return len(p), nil
}

// WriteString appends p.
func (s *spill) WriteString(p string) (int, error) {
	if s.f == nil && s.mem.Len()+len(p) <= spillLimit {
		if s.err != nil {
			return 0, s.err
		}
		s.n += int64(len(p))
		return s.mem.WriteString(p)
	}
	return s.Write([]byte(p))
}

// Len is the number of bytes written.
func (s *spill) Len() int64 {
	if s == nil {
		return 0
	}
	return s.n
}

// reader reads what was written, from the start.
func (s *spill) reader() io.Reader {
	if s == nil {
		return bytes.NewReader(nil)
	}
	if s.f != nil {
		return io.NewSectionReader(s.f, 0, s.n)
	}
	return bytes.NewReader(s.mem.Bytes())
}

// WriteTo copies what was written to w.
func (s *spill) WriteTo(w io.Writer) (int64, error) {
	if s == nil {
		return 0, nil
	}
	if s.err != nil {
		return 0, s.err
	}
	return io.Copy(w, s.reader())
}

// close throws the content away (the temporary file is closed, which frees it).
func (s *spill) close() {
	if s == nil {
		return
	}
	if s.f != nil {
		s.f.Close()
		s.f = nil
	}
	s.mem, s.n = bytes.Buffer{}, 0
}

// fileSpool is the objects' results (JSON lines) and the diff of a file given to
// WriteOptions.File.
type fileSpool struct {
	objects *spill
	count   int
	diff    *spill
}

func (s *fileSpool) close() {
	if s != nil {
		s.objects.close()
		s.diff.close()
	}
}

// addObjects appends final results.
func (s *fileSpool) addObjects(objs []ObjectResult) error {
	if s.objects == nil {
		s.objects = &spill{}
	}
	enc := json.NewEncoder(s.objects)
	for i := range objs {
		if err := enc.Encode(&objs[i]); err != nil {
			return err
		}
		s.count++
	}
	return nil
}

// errSpoolGone is the error of a FileResult read after WriteOptions.File returned.
var errSpoolGone = errors.New("a file's results are read only while WriteOptions.File has them")

// Len is the number of the file's objects (in Objects, or read by EachObject).
func (f FileResult) Len() int {
	if f.spool != nil {
		return f.spool.count
	}
	return len(f.Objects)
}

// EachObject calls fn with the result of each of the file's objects, in the file's order:
// those of Objects, or (a file given to WriteOptions.File) those read back one at a time.
func (f FileResult) EachObject(fn func(ObjectResult) error) error {
	if f.spool == nil {
		for _, o := range f.Objects {
			if err := fn(o); err != nil {
				return err
			}
		}
		return nil
	}
	if f.spool.count > 0 && f.spool.objects.Len() == 0 {
		return errSpoolGone
	}
	if err := f.spool.objects.err; err != nil {
		return err
	}
	dec := json.NewDecoder(bufio.NewReaderSize(f.spool.objects.reader(), 64<<10))
	for i := 0; i < f.spool.count; i++ {
		var o ObjectResult
		if err := dec.Decode(&o); err != nil {
			return err
		}
		if err := fn(o); err != nil {
			return err
		}
	}
	return nil
}

// HasDiff says whether the file has a diff (Diff, or one WriteDiff writes).
func (f FileResult) HasDiff() bool { return f.Diff != "" || f.spool != nil && f.spool.diff.Len() > 0 }

// WriteDiff writes the file's unified diff (Diff, or the one read back) to w.
func (f FileResult) WriteDiff(w io.Writer) error {
	if f.spool == nil || f.spool.diff == nil {
		_, err := io.WriteString(w, f.Diff)
		return err
	}
	_, err := f.spool.diff.WriteTo(w)
	return err
}

// Loaded is f with its objects and diff in memory (Objects, Diff): for a printer that keeps
// files past WriteOptions.File (then memory holds them all).
func (f FileResult) Loaded() (FileResult, error) {
	if f.spool == nil {
		return f, nil
	}
	out := f
	out.spool, out.Objects = nil, nil
	if err := f.EachObject(func(o ObjectResult) error { out.Objects = append(out.Objects, o); return nil }); err != nil {
		return FileResult{}, err
	}
	var b bytes.Buffer
	if err := f.WriteDiff(&b); err != nil {
		return FileResult{}, err
	}
	out.Diff = b.String()
	return out, nil
}

// MarshalJSON is f as JSON, its objects and diff included (read back whole: WriteJSON writes
// them as it reads them).
func (f FileResult) MarshalJSON() ([]byte, error) {
	l, err := f.Loaded()
	if err != nil {
		return nil, err
	}
	type plain FileResult
	return json.Marshal(plain(l))
}

// WriteJSON writes f as json.MarshalIndent(f, prefix, indent) does, its objects and its diff
// written as they are read: memory holds one object.
func (f FileResult) WriteJSON(w io.Writer, prefix, indent string) error {
	bw := bufio.NewWriterSize(w, 64<<10)
	in := prefix + indent
	type field struct {
		name  string
		write func() error
	}
	value := func(v any) func() error {
		return func() error {
			js, err := json.MarshalIndent(v, in, indent)
			if err != nil {
				return err
			}
			_, err = bw.Write(js)
			return err
		}
	}
	fields := []field{{"path", value(f.Path)}, {"status", value(f.Status)}}
	if f.Len() > 0 {
		fields = append(fields, field{"objects", func() error {
			bw.WriteString("[\n")
			i := 0
			err := f.EachObject(func(o ObjectResult) error {
				if i > 0 {
					bw.WriteString(",\n")
				}
				i++
				js, err := json.MarshalIndent(o, in+indent, indent)
				if err != nil {
					return err
				}
				bw.WriteString(in + indent)
				_, err = bw.Write(js)
				return err
			})
			if err != nil {
				return err
			}
			_, err = bw.WriteString("\n" + in + "]")
			return err
		}})
	}
	if len(f.Lines) > 0 {
		fields = append(fields, field{"lines", value(f.Lines)})
	}
	if f.HasDiff() {
		fields = append(fields, field{"diff", func() error {
			if f.spool == nil || f.spool.diff == nil {
				return writeJSONString(bw, strings.NewReader(f.Diff))
			}
			if err := f.spool.diff.err; err != nil {
				return err
			}
			return writeJSONString(bw, f.spool.diff.reader())
		}})
	}
	if f.Reason != "" {
		fields = append(fields, field{"reason", value(f.Reason)})
	}
	bw.WriteString("{\n")
	for i, fl := range fields {
		bw.WriteString(in + `"` + fl.name + `": `)
		if err := fl.write(); err != nil {
			return err
		}
		if i < len(fields)-1 {
			bw.WriteString(",")
		}
		bw.WriteString("\n")
	}
	bw.WriteString(prefix + "}")
	return bw.Flush()
}

// writeJSONString writes the text r reads as one JSON string, escaped as json.Marshal
// escapes it, a chunk at a time (cut after a newline, or where no rune is cut in two).
func writeJSONString(w io.Writer, r io.Reader) error {
	if _, err := io.WriteString(w, `"`); err != nil {
		return err
	}
	buf := make([]byte, 64<<10)
	var carry int
	for {
		n, err := io.ReadFull(r, buf[carry:])
		n += carry
		end := n
		if err == nil { // more to come: end the chunk after a newline, or before a rune's start
			if i := bytes.LastIndexByte(buf[:n], '\n'); i >= 0 {
				end = i + 1
			} else {
				for k := 1; k <= utf8.UTFMax-1 && k <= n; k++ {
					if utf8.RuneStart(buf[n-k]) {
						if !utf8.FullRune(buf[n-k : n]) {
							end = n - k
						}
						break
					}
				}
			}
		}
		if end > 0 {
			js, merr := json.Marshal(string(buf[:end]))
			if merr != nil {
				return merr
			}
			if _, werr := w.Write(js[1 : len(js)-1]); werr != nil {
				return werr
			}
		}
		carry = copy(buf, buf[end:n])
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			break // the last chunk was the rest
		}
		if err != nil {
			return err
		}
	}
	_, err := io.WriteString(w, `"`)
	return err
}
