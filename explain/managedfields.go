package explain

import (
	"fmt"
	"strings"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/version"

	crdinfo "github.com/crdver/kubectl-crdver/crd"
	"github.com/crdver/kubectl-crdver/ownership"
)

// ManagedFieldsNotes are the note lines about managedFields entries per version: how many
// objects hold entries of each, and what to do about a version other than the storage one.
func ManagedFieldsNotes(crd *apiextensionsv1.CustomResourceDefinition, c *ownership.Census) []string {
	if c == nil || c.Objects == 0 {
		return nil
	}
	storage := crdinfo.StorageVersion(crd)
	inSpec := map[string]bool{}
	leaving := map[string]bool{} // versions on their way out: unserved, deprecated, or below the storage version
	for _, v := range crd.Spec.Versions {
		inSpec[v.Name] = true
		leaving[v.Name] = !v.Served || v.Deprecated || version.CompareKubeAwareVersionStrings(v.Name, storage) < 0
	}
	var counts []string
	var out []string
	for _, r := range c.Versions {
		counts = append(counts, fmt.Sprintf("%s %d", r.Version, r.Objects))
		if r.Version == storage {
			continue
		}
		last := ""
		if len(r.Managers) > 0 && r.Managers[0].LastWrite != nil {
			last = fmt.Sprintf(", last written by %s at %s", r.Managers[0].Manager, r.Managers[0].LastWrite.UTC().Format(time.RFC3339))
		}
		if inSpec[r.Version] && !leaving[r.Version] {
			continue
		}
		if inSpec[r.Version] {
			out = append(out, fmt.Sprintf("%d of %d objects hold managedFields entries of %s%s: move them before removing %s (kubectl crdver retire %s %s)",
				r.Objects, c.Objects, r.Version, last, r.Version, crd.Name, r.Version))
		} else if strings.Contains(r.Version, "/") || r.Version == "" {
			continue // another group's entries: not ours to judge
		} else {
			out = append(out, fmt.Sprintf("%d of %d objects hold managedFields entries of %s, which is no longer in spec.versions: server-side apply of them fails with \"request to convert CR to an invalid group/version\" (kubernetes#111937)",
				r.Objects, c.Objects, r.Version))
		}
	}
	return append([]string{fmt.Sprintf("objects holding managedFields entries, per version: %s (of %d objects)", strings.Join(counts, ", "), c.Objects)}, out...)
}

// ManagedFieldsSafety revises the "safe to remove" answers with the census: once a version is
// gone from spec.versions, server-side apply fails on every object that still has a
// managedFields entry of it (kubernetes#111937), so such a version is not safe to remove until
// `retire` moves those entries. When the census could not be taken, safe becomes unknown: the
// answer is never given on an assumption. counted is false when the census failed.
func ManagedFieldsSafety(crdName string, r *VersionsReport, census *ownership.Census, counted bool) {
	for i := range r.Versions {
		v := &r.Versions[i]
		if !v.SafeToRemove || len(v.Notes) == 0 {
			continue
		}
		last := len(v.Notes) - 1
		if !counted {
			v.SafeToRemove = false
			v.Notes[last] = "unknown: the objects' managedFields could not be counted"
			continue
		}
		var n int64
		if census != nil {
			for _, vc := range census.Versions {
				if vc.Version == v.Name {
					n = vc.Objects
				}
			}
		}
		if n > 0 {
			v.SafeToRemove = false
			v.Notes[last] = fmt.Sprintf("not safe to remove: %d object(s) hold managedFields entries of it (run `kubectl crdver retire %s %s`)", n, crdName, v.Name)
		}
	}
}
