// Package explain explains a CRD for people: the per-version report behind
// `kubectl crdver versions`, the field tree behind `kubectl crdver explain`, and the differences
// between two versions' schemas (--compare). The facts it explains come from package crd
// (versions) and package crdschema (schemas). It has no command-line code in it.
package explain

import (
	"fmt"
	"sort"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	crdinfo "github.com/crdver/kubectl-crdver/crd"
)

// Stability is how Kubernetes classifies a version name (see crd.StabilityOf).
type Stability = crdinfo.Stability

// VersionsReport is what `kubectl crdver versions` shows for one CRD. Its JSON form is part of
// the command's stable output: fields may be added, never renamed or removed.
type VersionsReport struct {
	Name             string `json:"name"`
	Group            string `json:"group"`
	Kind             string `json:"kind"`
	StorageVersion   string `json:"storageVersion"`
	PreferredVersion string `json:"preferredVersion"`
	// StoredVersions is status.storedVersions; null when it is not known (a CRD read from a file
	// without status: only the cluster knows which versions it ever stored).
	StoredVersions []string `json:"storedVersions"`
	// StoredVersionsKnown is false when status.storedVersions is not known: then stored,
	// migrationPending are null and no version is called safe to remove.
	StoredVersionsKnown bool `json:"storedVersionsKnown"`
	// MigrationPending is null when storedVersions is not known.
	MigrationPending *bool         `json:"migrationPending"`
	Versions         []VersionInfo `json:"versions"`
	// Notes about the CRD as a whole (for example a pending storage migration).
	Notes []string `json:"notes"`
}

// VersionInfo is one row of the versions report.
type VersionInfo struct {
	Name      string    `json:"name"`
	Rank      int       `json:"rank"`
	Stability Stability `json:"stability"`
	Served    bool      `json:"served"`
	Storage   bool      `json:"storage"`
	// Stored says whether the version is in status.storedVersions; null when that is unknown.
	Stored             *bool  `json:"stored"`
	Deprecated         bool   `json:"deprecated"`
	DeprecationWarning string `json:"deprecationWarning"`
	Preferred          bool   `json:"preferred"`
	HasSchema          bool   `json:"hasSchema"`
	// SafeToRemove is true only when the version is known to be safe to remove; when
	// storedVersions is unknown it is false and the last note says "unknown: …".
	SafeToRemove bool     `json:"safeToRemove"`
	Notes        []string `json:"notes"`
}

// StoredVersionsKnown reports whether crd carries status.storedVersions. The API server always
// sets it (to at least the storage version), so an empty list means the CRD was read from a
// file without status, and which versions the cluster ever stored is unknown.
func StoredVersionsKnown(crd *apiextensionsv1.CustomResourceDefinition) bool {
	return len(crd.Status.StoredVersions) > 0
}

// StoredVersionsUnknownNote is the note shown when storedVersions is not known.
const StoredVersionsUnknownNote = "storedVersions unknown: the file has no status.storedVersions; check the cluster (kubectl crdver versions NAME)"

// AnalyzeVersions builds the versions report of crd. When a migration is pending, the first
// note says so (a command adds how to run the migration); when storedVersions is not known
// (see StoredVersionsKnown), the first note says that, and no version is called safe to remove.
// groupPreferred is the group's preferred
// version as discovery reports it (see PreferredVersions); "" means "work it out from this CRD
// alone".
func AnalyzeVersions(crd *apiextensionsv1.CustomResourceDefinition, groupPreferred string) VersionsReport {
	if groupPreferred == "" {
		groupPreferred = crdinfo.PreferredVersion(crd)
	}
	storage := crdinfo.StorageVersion(crd)
	stored := map[string]bool{}
	for _, s := range crd.Status.StoredVersions {
		stored[s] = true
	}
	names := make([]string, 0, len(crd.Spec.Versions))
	byName := map[string]apiextensionsv1.CustomResourceDefinitionVersion{}
	served := 0
	for _, v := range crd.Spec.Versions {
		names = append(names, v.Name)
		byName[v.Name] = v
		if v.Served {
			served++
		}
	}
	crdinfo.SortByPriority(names)

	// What kubectl uses for this resource when no version is given: the first version in the
	// group's priority order that this CRD serves.
	kubectlDefault := ""
	for _, n := range names {
		if byName[n].Served {
			kubectlDefault = n
			break
		}
	}

	known := StoredVersionsKnown(crd)
	r := VersionsReport{
		Name:                crd.Name,
		Group:               crd.Spec.Group,
		Kind:                crd.Spec.Names.Kind,
		StorageVersion:      storage,
		PreferredVersion:    groupPreferred,
		StoredVersionsKnown: known,
		Versions:            make([]VersionInfo, 0, len(names)),
		Notes:               []string{},
	}
	if known {
		r.StoredVersions = append([]string{}, crd.Status.StoredVersions...)
		r.MigrationPending = boolPtr(crdinfo.MigrationPending(crd))
	} else {
		r.Notes = append(r.Notes, StoredVersionsUnknownNote)
	}
	if known && *r.MigrationPending {
		r.Notes = append(r.Notes, fmt.Sprintf("migration pending: status.storedVersions is [%s] but the storage version is %s",
			strings.Join(crd.Status.StoredVersions, ", "), storage))
	}
	if groupPreferred != "" && kubectlDefault != "" && !byName[groupPreferred].Served {
		r.Notes = append(r.Notes, fmt.Sprintf("the group's preferred version %s is served by another CRD of group %s, not this one; kubectl uses %s for this resource", groupPreferred, crd.Spec.Group, kubectlDefault))
	}
	if served == 0 {
		r.Notes = append(r.Notes, "no version is served: the resource is not reachable through the API")
	}
	for _, s := range crd.Status.StoredVersions {
		if _, ok := byName[s]; !ok {
			r.Notes = append(r.Notes, fmt.Sprintf("status.storedVersions lists %s, which is not in spec.versions", s))
		}
	}

	for i, n := range names {
		v := byName[n]
		info := VersionInfo{
			Name:       n,
			Rank:       i + 1,
			Stability:  crdinfo.StabilityOf(n),
			Served:     v.Served,
			Storage:    v.Storage,
			Deprecated: v.Deprecated,
			Preferred:  n == groupPreferred,
			HasSchema:  v.Schema != nil && v.Schema.OpenAPIV3Schema != nil,
			Notes:      []string{},
		}
		if v.DeprecationWarning != nil {
			info.DeprecationWarning = *v.DeprecationWarning
		}
		switch {
		case known:
			info.Stored = boolPtr(stored[n])
		case v.Storage:
			// The API server always lists the storage version in storedVersions.
			info.Stored = boolPtr(true)
		}
		isStored := stored[n]
		if isStored && !info.Served {
			info.Notes = append(info.Notes, "stored but not served")
		}
		if info.Deprecated && info.Storage {
			info.Notes = append(info.Notes, "deprecated storage version")
		}
		if isStored && !info.Storage {
			info.Notes = append(info.Notes, "migration pending")
		}
		var why []string
		if info.Storage {
			why = append(why, "storage version")
		}
		switch {
		case isStored && !info.Storage && !info.Served:
			// migrate refuses while objects stored at it cannot be read as stored.
			why = append(why, "in status.storedVersions (serve it again, then migrate)")
		case isStored && !info.Storage:
			why = append(why, "in status.storedVersions (migrate first)")
		}
		if info.Served && served == 1 {
			why = append(why, "only served version")
		}
		info.SafeToRemove = len(why) == 0 && known
		switch {
		case info.SafeToRemove:
			info.Notes = append(info.Notes, "safe to remove")
		case len(why) == 0:
			info.Notes = append(info.Notes, "unknown: safe only if the cluster's storedVersions lacks it")
		default:
			info.Notes = append(info.Notes, "not safe to remove: "+strings.Join(why, ", "))
		}
		r.Versions = append(r.Versions, info)
	}
	return r
}

// Summary is one row of `kubectl crdver versions --all`.
type Summary struct {
	Name             string   `json:"name"`
	Group            string   `json:"group"`
	StorageVersion   string   `json:"storageVersion"`
	PreferredVersion string   `json:"preferredVersion"`
	StoredVersions   []string `json:"storedVersions"`
	Versions         int      `json:"versions"`
	Served           int      `json:"served"`
	// StoredVersionsKnown, StoredVersions and MigrationPending: as in VersionsReport (null
	// when unknown).
	StoredVersionsKnown bool  `json:"storedVersionsKnown"`
	MigrationPending    *bool `json:"migrationPending"`
}

// Summarize builds the --all rows, sorted by CRD name.
func Summarize(crds []*apiextensionsv1.CustomResourceDefinition) []Summary {
	preferred := crdinfo.PreferredVersions(crds)
	out := make([]Summary, 0, len(crds))
	for _, crd := range crds {
		s := Summary{
			Name:             crd.Name,
			Group:            crd.Spec.Group,
			StorageVersion:   crdinfo.StorageVersion(crd),
			PreferredVersion: preferred[crd.Spec.Group],
			Versions:         len(crd.Spec.Versions),
		}
		if StoredVersionsKnown(crd) {
			s.StoredVersionsKnown = true
			s.StoredVersions = append([]string{}, crd.Status.StoredVersions...)
			s.MigrationPending = boolPtr(crdinfo.MigrationPending(crd))
		}
		for _, v := range crd.Spec.Versions {
			if v.Served {
				s.Served++
			}
		}
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

func boolPtr(b bool) *bool { return &b }
