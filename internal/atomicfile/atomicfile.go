// Package atomicfile is the one way kubectl-crdver replaces a file: the new content is written
// to a temporary file in the same folder, synced to disk, renamed over the path, and the folder
// synced, so that a reader — or the run that resumes after a crash or a power loss — finds the
// old file or the new one, never half of one, and never a rename whose data is not on disk
// (Helm's internal/fileutil.AtomicWriteFile does the same, without the syncs).
package atomicfile

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// File is a new content of a path being written; Commit puts it in place, Close (without a
// Commit) throws it away.
type File struct {
	f    *os.File
	path string
	done bool
}

// Create starts a new content of path, with the permissions perm (a temporary file beside it:
// Temporaries lists those left behind by a process killed before Commit).
func Create(path string, perm fs.FileMode) (*File, error) {
	f, err := os.CreateTemp(filepath.Dir(path), tempPrefix(path)+"*")
	if err != nil {
		return nil, err
	}
	if err := f.Chmod(perm); err != nil {
		f.Close()
		os.Remove(f.Name())
		return nil, err
	}
	return &File{f: f, path: path}, nil
}

// Write writes to the new content.
func (f *File) Write(p []byte) (int, error) { return f.f.Write(p) }

// Commit syncs the new content to disk, renames it over the path and syncs the folder: once it
// returns nil, the path holds the new content, durably. On an error the path is unchanged and
// the temporary file is removed.
func (f *File) Commit() error {
	if f.done {
		return fmt.Errorf("%s: already committed or closed", f.path)
	}
	f.done = true
	err := f.f.Sync()
	if cerr := f.f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.f.Name(), f.path)
	}
	if err != nil {
		os.Remove(f.f.Name())
		return err
	}
	syncDir(filepath.Dir(f.path))
	return nil
}

// Close throws the new content away unless it was committed (safe to defer after Create).
func (f *File) Close() {
	if !f.done {
		f.done = true
		f.f.Close()
		os.Remove(f.f.Name())
	}
}

// WriteFile replaces path with data, with the permissions perm, as Create, Write and Commit.
func WriteFile(path string, data []byte, perm fs.FileMode) error {
	f, err := Create(path, perm)
	if err != nil {
		return err
	}
	defer f.Close()
	if _, err := f.Write(data); err != nil {
		return err
	}
	return f.Commit()
}

// Temporaries lists the temporary files of path that a process killed before its Commit left
// in the folder.
func Temporaries(path string) ([]string, error) {
	entries, err := os.ReadDir(filepath.Dir(path))
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), tempPrefix(path)) {
			out = append(out, filepath.Join(filepath.Dir(path), e.Name()))
		}
	}
	return out, nil
}

// Clean removes the temporary files of path left by a process killed before its Commit. Only
// a writer that knows no other process writes path now (one holding the run's lease) may
// call it.
func Clean(path string) error {
	left, err := Temporaries(path)
	for _, f := range left {
		if rerr := os.Remove(f); rerr != nil && err == nil {
			err = rerr
		}
	}
	return err
}

// tempPrefix names path's temporary files: hidden, beside it.
func tempPrefix(path string) string { return "." + filepath.Base(path) + ".partial-" }

// syncDir makes a rename in dir durable. A folder that cannot be opened or synced (some
// systems cannot sync a folder) is not an error: the rename itself has happened.
func syncDir(dir string) {
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync()
		d.Close()
	}
}
