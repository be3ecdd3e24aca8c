package plan

import (
	"fmt"
	"slices"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	crdinfo "github.com/crdver/kubectl-crdver/crd"
	"github.com/crdver/kubectl-crdver/preflight"
)

// runbook lists the steps that make the change safe, in order, each a command (lines starting
// with # are what no command does for you).
func runbook(live, next *apiextensionsv1.CustomResourceDefinition, it *Item, file string) []string {
	if file == "" {
		file = "NEW-CRDS.yaml"
	}
	name := next.Name
	applyCmd := "kubectl apply --server-side -f " + file
	steps := []string{}
	if live == nil {
		if !it.Apply.Allowed {
			return append(steps, "# fix "+file+": the API server would reject the CRD (see apply errors)")
		}
		return append(steps, applyCmd, "kubectl wait --for condition=established crd/"+name)
	}
	losesData := false
	var rejectedOnUpdate int
	for i := range it.Objects.Findings {
		f := &it.Objects.Findings[i]
		losesData = losesData || len(f.PrunedOnRead) > 0
		if len(f.UpdateErrors) > 0 {
			rejectedOnUpdate++
		}
	}
	if losesData {
		// Read at every version that holds the data: a plain kubectl get reads at the
		// preferred version, which already prunes the fields at risk.
		for _, c := range preflight.BackupCommands(live.Spec.Group, live.Spec.Names.Plural, preflight.HoldingVersions(live)) {
			steps = append(steps, c+"   # objects lose fields on their next write")
		}
		steps = append(steps, "# keep the fields that would be lost (listed above): convert those objects to the new shape (e.g. with the conversion tool of the project that owns the CRD) and apply them before the steps below")
	}
	if rejectedOnUpdate > 0 {
		// Before any storage switch: the rewrite would fail on them and leave the CRD half-migrated.
		steps = append(steps, fmt.Sprintf("# fix the %d objects whose next update would be rejected (listed above) before migrating or applying", rejectedOnUpdate))
	}

	// Versions still in storedVersions (or named by managedFields) that the new CRD removes.
	var storedRemoved, managedRemoved []string
	for _, v := range it.Versions.Removed {
		if slices.Contains(live.Status.StoredVersions, v) {
			storedRemoved = append(storedRemoved, v)
		}
	}
	for _, mv := range it.ManagedFields {
		if mv.RemovedByThisChange {
			managedRemoved = append(managedRemoved, mv.Version)
		}
	}
	storageAfter := it.StorageVersion.After
	if len(storedRemoved) > 0 {
		if _, err := crdinfo.Lookup(live, storageAfter); err != nil {
			steps = append(steps, fmt.Sprintf("# first apply a CRD with both %s and %s (%s served: true, storage: true; %s kept in spec.versions)",
				strings.Join(storedRemoved, ", "), storageAfter, storageAfter, strings.Join(storedRemoved, ", ")))
		}
		steps = append(steps, fmt.Sprintf("kubectl crdver migrate %s --to %s   # rewrite every object at %s, then trim status.storedVersions", name, storageAfter, storageAfter))
	}
	for _, v := range managedRemoved {
		steps = append(steps, fmt.Sprintf("kubectl crdver retire %s %s   # move managedFields entries of %s to %s, or server-side apply breaks on those objects", name, v, v, storageAfter))
	}
	for _, mv := range it.ManagedFields {
		if mv.UnservedByThisChange {
			steps = append(steps, fmt.Sprintf("# make %s write %s instead of %s before %s stops being served", strings.Join(mv.Managers, ", "), storageAfter, mv.Version, mv.Version))
		}
	}
	if !it.Apply.Allowed && len(storedRemoved) == 0 {
		return append(steps, "# fix "+file+": the API server would reject the update (see apply errors)")
	}
	steps = append(steps, applyCmd, "kubectl crdver versions "+name)
	if it.MigrationPending && len(storedRemoved) == 0 {
		steps = append(steps, fmt.Sprintf("kubectl crdver migrate %s   # rewrite every object at %s and trim status.storedVersions", name, storageAfter))
	}
	return steps
}
