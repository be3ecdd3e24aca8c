package manifest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
)

// Spooled is input that several readers read (a command's two passes, each cluster of a
// fleet): the files as given, but each input that can be read only once (stdin, a pipe, a
// device) copied to a temporary file first.
type Spooled struct {
	// Files are the files to read: as given, or the copy.
	Files  []string
	remove []string
	// Copied names what was copied (for a report's notes): "stdin", a pipe's path.
	Copied []string
	// given names each copy as the user gave it.
	given map[string]string
}

// Name is how the user named file: "stdin" or the pipe's path for a copy.
func (s *Spooled) Name(file string) string {
	if n, ok := s.given[file]; ok {
		return n
	}
	return file
}

// Spool copies the inputs of files that can be read once ("-" for stdin) to temporary files
// named as pattern (os.CreateTemp's), a chunk at a time (memory bounded, Ctrl-C observed: a
// blocked read is abandoned, an *InterruptedError returned). why says, in its errors, why the
// input is copied ("the restore reads the backup twice"). The caller closes the result (also
// after an error: it removes what was copied).
func Spool(ctx context.Context, files []string, stdin io.Reader, pattern, why string) (*Spooled, error) {
	s := &Spooled{}
	for _, f := range files {
		if f != "-" && (IsURL(f) || isDirOrFile(f)) {
			s.Files = append(s.Files, f)
			continue
		}
		var in io.Reader
		name := f
		if f == "-" {
			if stdin == nil {
				return s, &InputError{Err: ErrNoStdin}
			}
			in, name = stdin, "stdin"
		} else {
			fh, err := os.Open(f)
			if err != nil {
				return s, &InputError{Err: fmt.Errorf("%s: %w", f, PathErrorText(err))}
			}
			defer fh.Close()
			in = fh
		}
		tmp, err := os.CreateTemp("", pattern)
		if err != nil {
			return s, fmt.Errorf("copying %s to a temporary file (it can be read only once, and %s): %w", name, why, err)
		}
		s.remove = append(s.remove, tmp.Name())
		if err := copyContext(ctx, tmp, in); err != nil {
			tmp.Close()
			if ctx.Err() != nil {
				return s, &InterruptedError{Cause: context.Cause(ctx)}
			}
			return s, fmt.Errorf("copying %s to %s (it can be read only once, and %s): %w", name, tmp.Name(), why, err)
		}
		if err := tmp.Close(); err != nil {
			return s, err
		}
		s.Files = append(s.Files, tmp.Name())
		s.Copied = append(s.Copied, name)
		if s.given == nil {
			s.given = map[string]string{}
		}
		s.given[tmp.Name()] = name
	}
	return s, nil
}

// isDirOrFile: f can be read again (a regular file, or a directory of them).
func isDirOrFile(f string) bool {
	st, err := os.Stat(f)
	return err == nil && (st.IsDir() || st.Mode().IsRegular())
}

// copyContext copies in to w until EOF or ctx is done; a read blocked when ctx ends is
// abandoned (its goroutine ends with the process, or at the next chunk).
func copyContext(ctx context.Context, w io.Writer, in io.Reader) error {
	done := make(chan error, 1)
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		buf := make([]byte, 256<<10)
		for {
			select {
			case <-stop:
				done <- nil
				return
			default:
			}
			n, err := in.Read(buf)
			if n > 0 {
				if _, werr := w.Write(buf[:n]); werr != nil {
					done <- werr
					return
				}
			}
			if errors.Is(err, io.EOF) {
				done <- nil
				return
			}
			if err != nil {
				done <- err
				return
			}
		}
	}()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Close removes the temporary copies.
func (s *Spooled) Close() {
	for _, f := range s.remove {
		_ = os.Remove(f)
	}
}
