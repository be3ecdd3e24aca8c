package plan

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
)

// ErrReleases: the releases of a path cannot be taken as given (a --releases folder that
// cannot be read or holds no release older than the target): the user's input is wrong.
var ErrReleases = errors.New("the releases of the path")

// ReleaseName names a release by its path: the folder or file name without its extension
// ("stdin" for -).
func ReleaseName(path string) string {
	if path == "-" {
		return "stdin"
	}
	b := filepath.Base(strings.TrimRight(path, "/"))
	if e := filepath.Ext(b); e == ".yaml" || e == ".yml" || e == ".json" {
		b = strings.TrimSuffix(b, e)
	}
	return b
}

// ReadCRDs reads a release's CRDs from what -f takes (a file, folder, URL or -). optional: a
// folder of a releases directory, which may hold none (nil, nil: it is skipped).
type ReadCRDs func(path string, optional bool) ([]*apiextensionsv1.CustomResourceDefinition, error)

// ReadReleases reads the releases between the cluster and the target, oldest first: via as
// given, or each sub-folder of dir in the order of the versions their names carry
// (SortReleases), up to the target (a path of target) and without folders that carry no
// version or hold no CRD (each named in the notes returned).
func ReadReleases(via []string, dir string, target []string, read ReadCRDs) ([]PathRelease, []string, error) {
	var notes []string
	paths := via
	if dir != "" {
		entries, err := os.ReadDir(dir)
		if err != nil {
			return nil, nil, fmt.Errorf("%w: %s: %v", ErrReleases, dir, err)
		}
		var names []string
		for _, e := range entries {
			if e.IsDir() {
				names = append(names, e.Name())
			}
		}
		sorted, skipped := SortReleases(names)
		if len(skipped) > 0 {
			notes = append(notes, "skipped "+strings.Join(skipped, ", ")+" (no version in the name)")
		}
		tgt := map[string]bool{}
		for _, f := range target {
			if a, err := filepath.Abs(f); err == nil {
				tgt[filepath.Clean(a)] = true
			}
		}
		paths = nil
		for _, n := range sorted {
			d := filepath.Join(dir, n)
			if a, err := filepath.Abs(d); err == nil && tgt[filepath.Clean(a)] {
				break // the target; newer releases are beyond it
			}
			paths = append(paths, d)
		}
		if len(paths) == 0 {
			return nil, notes, fmt.Errorf("%w: %s: no release older than the target (sub-directories named by version, e.g. v1.5.5)", ErrReleases, dir)
		}
	}
	var out []PathRelease
	for _, p := range paths {
		crds, err := read(p, dir != "")
		if err != nil {
			return nil, notes, err
		}
		if len(crds) == 0 {
			notes = append(notes, "skipped "+filepath.Base(p)+" (no CustomResourceDefinitions)")
			continue
		}
		out = append(out, PathRelease{Name: ReleaseName(p), File: p, CRDs: crds})
	}
	return out, notes, nil
}
