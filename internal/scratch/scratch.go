// Package scratch is the one home of the temporary files a run keeps what does not fit in
// memory in: plan's memo of the objects it found clean, convert --write's results and diff, a
// restore's consents and its dry run's report. Each file is removed from its folder as soon as
// it is made (it lives while it is open), so a run that ends in any way, SIGKILL included,
// leaves nothing behind; where the system cannot remove an open file (Windows), Close removes
// it. Files that must be opened again by name (manifest's copy of a pipe) are not scratch.
package scratch

import "os"

// File is an open temporary file with no name in any folder.
type File struct {
	*os.File
	// leftover is its name where it could not be removed when it was made ("" otherwise).
	leftover string
}

// New makes a scratch file in the system's temporary folder, named as pattern (os.CreateTemp's)
// until it is removed, at once.
func New(pattern string) (*File, error) {
	f, err := os.CreateTemp("", pattern)
	if err != nil {
		return nil, err
	}
	s := &File{File: f}
	if os.Remove(f.Name()) != nil {
		s.leftover = f.Name()
	}
	return s, nil
}

// Close closes the file, which frees its space, and removes it where New could not.
func (f *File) Close() error {
	err := f.File.Close()
	if f.leftover != "" {
		if rerr := os.Remove(f.leftover); rerr != nil && err == nil {
			err = rerr
		}
		f.leftover = ""
	}
	return err
}
