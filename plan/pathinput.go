package plan

import (
	"errors"
	"fmt"
	"net/url"
	"os"
	pathpkg "path"
	"path/filepath"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
)

// ErrReleases: the releases of a path cannot be taken as given (a --releases folder that
// cannot be read or holds no release older than the target): the user's input is wrong.
var ErrReleases = errors.New("the releases of the path")

// ReleaseName names a release by its path or URL: the folder or file name without its
// extension, or the folder it is in when only that carries a version
// (".../download/v1.7.3/cert-manager.crds.yaml" is v1.7.3); "stdin" for -.
func ReleaseName(path string) string {
	if path == "-" {
		return "stdin"
	}
	p := path
	if u, err := url.Parse(path); err == nil && (u.Scheme == "http" || u.Scheme == "https") {
		p = u.Path
	}
	p = strings.TrimRight(filepath.ToSlash(p), "/")
	b := pathpkg.Base(p)
	if e := pathpkg.Ext(b); e == ".yaml" || e == ".yml" || e == ".json" {
		b = strings.TrimSuffix(b, e)
		if dir := pathpkg.Base(pathpkg.Dir(p)); ReleaseVersion(b) == nil && dir != "." && dir != "/" && ReleaseVersion(dir) != nil {
			return dir
		}
	}
	return b
}

// uniqueNames makes the names of rels differ from each other and from target's, by the
// position of each release given twice under one name ("crds (2)").
func uniqueNames(rels []PathRelease, target string) {
	seen := map[string]bool{target: true}
	for i := range rels {
		n := rels[i].Name
		for k := 2; seen[n]; k++ {
			n = fmt.Sprintf("%s (%d)", rels[i].Name, k)
		}
		seen[n], rels[i].Name = true, n
	}
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
	tgt := ""
	if len(target) > 0 {
		tgt = ReleaseName(target[0])
	}
	uniqueNames(out, tgt)
	return out, notes, nil
}
