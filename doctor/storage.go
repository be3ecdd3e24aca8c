package doctor

import (
	"fmt"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	crdinfo "github.com/crdver/kubectl-crdver/crd"
	"github.com/crdver/kubectl-crdver/ownership"
	"github.com/crdver/kubectl-crdver/preflight"
)

func preferredVersions(crds []*apiextensionsv1.CustomResourceDefinition) map[string]string {
	return crdinfo.PreferredVersions(crds)
}

// checkStorage: pending migration, deprecated storage version, stored but unserved versions,
// and objects whose managedFields name a version that is unserved or gone from spec.versions.
// It returns the managedFields census (nil when it could not be taken).
func (k *checker) checkStorage() *ownership.Census {
	crd := k.crd
	storage := crdinfo.StorageVersion(crd)
	byName := map[string]apiextensionsv1.CustomResourceDefinitionVersion{}
	for _, v := range crd.Spec.Versions {
		byName[v.Name] = v
	}
	if crdinfo.MigrationPending(crd) {
		fix := "kubectl crdver migrate " + crd.Name
		for _, s := range crd.Status.StoredVersions {
			if v, ok := byName[s]; ok && !v.Served {
				// migrate refuses while what it would lose of them is unknown.
				fix = preflight.ServeCommand(crd, s, true) + ", then " + fix
			}
		}
		if k.checkDataLoss() {
			fix = "keep the data first (the data-loss finding says how), then " + fix
		}
		k.add(CheckStorage, SeverityWarning, fix,
			fmt.Sprintf("migration pending: status.storedVersions is [%s] but the storage version is %s; objects may still be stored at the older versions",
				strings.Join(crd.Status.StoredVersions, ", "), storage))
	}
	if v, ok := byName[storage]; ok && v.Deprecated {
		fix := "make a non-deprecated version the storage version and migrate"
		if to := bestVersion(crd); to != "" {
			fix = fmt.Sprintf("kubectl crdver migrate %s --to %s", crd.Name, to)
		}
		k.add(CheckStorage, SeverityWarning, fix, fmt.Sprintf("the storage version %s is deprecated: every write is stored at a version on its way out", storage))
	}
	for _, s := range crd.Status.StoredVersions {
		if v, ok := byName[s]; ok && !v.Served {
			k.add(CheckStorage, SeverityWarning, fmt.Sprintf("%s, then kubectl crdver migrate %s", preflight.ServeCommand(crd, s, true), crd.Name),
				fmt.Sprintf("version %s is in status.storedVersions but not served: objects stored at it can only be read converted (what they hold beyond the served versions' schemas cannot be read or backed up), and it cannot be removed until they are migrated; serve it again to read them", s))
		}
	}

	lv, err := crdinfo.AccessVersion(crd)
	if err != nil {
		k.add(CheckStorage, SeverityInfo, "", "no version is served: objects and their managedFields cannot be listed")
		return nil
	}
	if k.c.md == nil {
		return nil
	}
	census, err := ownership.Take(k.ctx, k.c.md, crdinfo.GVR(crd, lv), k.opts.ChunkSize, func() { k.read(1) })
	if err != nil {
		k.incomplete(CheckStorage, fmt.Errorf("counting managedFields of %s: %w", crd.Name, err))
		return nil
	}
	k.res.objects = census.Objects
	for _, r := range census.Versions {
		if r.Version == "" || strings.Contains(r.Version, "/") {
			continue // another group's entries (e.g. a subresource's own API): not ours to judge
		}
		v, inSpec := byName[r.Version]
		switch {
		case !inSpec:
			k.add(CheckStorage, SeverityError, fmt.Sprintf("kubectl crdver retire %s %s (after adding %s back to spec.versions, unserved)", crd.Name, r.Version, r.Version),
				fmt.Sprintf("%d of %d objects hold managedFields entries of %s, which is not in spec.versions: server-side apply of them fails (kubernetes#111937)%s",
					r.Objects, census.Objects, r.Version, lastWriter(r)))
		case !v.Served:
			k.add(CheckStorage, SeverityWarning, fmt.Sprintf("kubectl crdver retire %s %s", crd.Name, r.Version),
				fmt.Sprintf("%d of %d objects hold managedFields entries of unserved version %s: once it is removed, server-side apply of them fails (kubernetes#111937)%s",
					r.Objects, census.Objects, r.Version, lastWriter(r)))
		}
	}
	return census
}

func lastWriter(r ownership.VersionCount) string {
	if len(r.Managers) == 0 {
		return ""
	}
	return "; last written by " + r.Managers[0].Manager
}

// bestVersion is the highest-priority served, non-deprecated version ("" when none).
func bestVersion(crd *apiextensionsv1.CustomResourceDefinition) string {
	for _, n := range crdinfo.VersionNames(crd) {
		if v, _ := crdinfo.Lookup(crd, n); v != nil && v.Served && !v.Deprecated {
			return n
		}
	}
	return ""
}

// checkVersions: served deprecated versions that field managers still write, and a preferred
// version (what kubectl uses by default) that is not the storage version.
func (k *checker) checkVersions(census *ownership.Census, groupPreferred string) {
	crd := k.crd
	storage := crdinfo.StorageVersion(crd)
	if census != nil {
		for _, v := range crd.Spec.Versions {
			if !v.Served || !v.Deprecated {
				continue
			}
			row := census.Of(v.Name)
			if row.Objects == 0 {
				continue
			}
			// A one-off command (kubectl create, edit, label…) left entries but will not write
			// again: it is not "still written by".
			var writers, creates []ownership.Writer
			for _, w := range row.Managers {
				if oneTimeCreate(w) {
					creates = append(creates, w)
				} else {
					writers = append(writers, w)
				}
			}
			to := bestVersion(crd)
			var msg, fix string
			if len(writers) > 0 {
				msg = fmt.Sprintf("deprecated version %s is still written by field managers: %s", v.Name, ownership.DescribeWriters(writers))
				if len(creates) > 0 {
					msg += fmt.Sprintf("; entries of a one-time create or edit: %s", ownership.DescribeWriters(creates))
				}
				names := make([]string, 0, len(writers))
				for _, w := range writers {
					names = append(names, w.Manager)
				}
				fix = "move the writers (" + strings.Join(names, ", ") + ") to a served non-deprecated version"
				if to != "" {
					fix = fmt.Sprintf("move the writers to %s, then kubectl crdver retire %s %s", to, crd.Name, v.Name)
				}
			} else {
				msg = fmt.Sprintf("deprecated version %s is named by the managedFields entries of a one-time create or edit (nothing writes it again): %s", v.Name, ownership.DescribeWriters(creates))
				fix = "move the entries before removing the version"
				if to != "" {
					fix = fmt.Sprintf("kubectl crdver retire %s %s (moves the entries to %s)", crd.Name, v.Name, to)
				}
			}
			k.add(CheckVersions, SeverityWarning, fix, msg)
		}
	}
	// kubectl and discovery use the group's preferred version; when this CRD serves it and it is
	// not the storage version, every default read and write is converted.
	if groupPreferred != "" && storage != "" && groupPreferred != storage {
		if v, err := crdinfo.Lookup(crd, groupPreferred); err == nil && v.Served {
			k.add(CheckVersions, SeverityInfo, fmt.Sprintf("kubectl crdver migrate %s --to %s (when %s is ready to be stored)", crd.Name, groupPreferred, groupPreferred),
				fmt.Sprintf("the preferred version %s (what kubectl uses by default) is not the storage version %s: default reads and writes are converted", groupPreferred, storage))
		}
	}
}

// oneTimeCreate reports whether w's entries come from a person's one-off command (kubectl
// create, edit, label…: ownership.RoleOf), which is not expected to write again.
func oneTimeCreate(w ownership.Writer) bool {
	return ownership.RoleOf(w.Manager, w.Operation) == ownership.RoleOneTime
}
