package ownership

import (
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/crdver/kubectl-crdver/kubeversion"
)

// What the API server's field manager does on an update (k8s.io/apimachinery
// pkg/util/managedfields/internal: FieldManager.Update → structuredMergeManager.Update →
// structured-merge-diff merge.Updater.Update). For every entry of another version than the one
// written, it converts the live and the written object to that entry's version
// (versionConverter.Convert: the CRD's converter, then ObjectToTyped under that version's
// typed schema). For a custom resource both ways of failing are plain errors, never the
// "missing version" the updater would answer by dropping that one entry: the CRD converter
// answers a version gone from spec.versions with "request to convert CR to an invalid
// group/version" (apiextensions-apiserver conversion.crConverter.ConvertToVersion), and a
// converted object that does not fit the version's typed schema (a field that version lacks, a
// value of another type) fails ObjectToTyped. The update of managedFields then fails as a
// whole, and FieldManager.UpdateNoErrors decides what the object keeps: up to 1.36 it removes
// every entry (RemoveObjectManagedFields), from 1.37 it keeps the live object's entries
// (kubernetes#136949; the write's own entries are not used).

// FailedUpdateDropsAll reports whether kube-apiserver v removes every managedFields entry of
// an object whose field-manager update fails (up to 1.36); from 1.37 the live entries are kept.
func FailedUpdateDropsAll(v kubeversion.Version) bool {
	return kubeversion.Effective(v).Less(kubeversion.Version{Major: 1, Minor: 37})
}

// NamesOtherVersion reports whether some entry names a version of group other than to: the
// only objects whose write at to makes the field manager convert them.
func NamesOtherVersion(entries []metav1.ManagedFieldsEntry, group, to string) bool {
	for _, e := range entries {
		if v, ok := strings.CutPrefix(e.APIVersion, group+"/"); ok && v != to {
			return true
		}
	}
	return false
}

// RewriteLoss is what a rewrite's write at one version does to an object's field managers, as
// predicted offline (PredictRewrite).
type RewriteLoss struct {
	// Lost are the entries the API server drops (every entry: a failed update drops them all).
	Lost []metav1.ManagedFieldsEntry
	// Because says why: the version whose conversion fails and how.
	Because string
	// Unknown, when set, says why the outcome cannot be told offline (Lost is then empty).
	Unknown string
}

// PredictRewrite predicts what a rewrite at version to, which moves the entries of other
// versions of group as the rewrite does (ToVersion, with read as given), does to an object's
// managedFields entries. target is the object as written at to. fails says, for a version of
// an entry the move leaves, why the API server cannot convert the written object to it (""
// when it can; known false when that cannot be told offline, e.g. it needs a conversion
// webhook's answer). dropsAll is FailedUpdateDropsAll of the server: when false, a failed
// conversion loses nothing. The zero RewriteLoss means no manager is lost.
func PredictRewrite(entries []metav1.ManagedFieldsEntry, group, to string, target map[string]any, read func(version string) (map[string]any, bool), fails func(version string) (why string, known bool), dropsAll bool) RewriteLoss {
	if !dropsAll || !NamesOtherVersion(entries, group, to) {
		return RewriteLoss{}
	}
	sent, _ := ToVersion(entries, group, to, target, read)
	unknown := ""
	for _, v := range otherVersions(sent, group, to) {
		why, known := fails(v)
		switch {
		case !known && unknown == "":
			unknown = why
		case known && why != "":
			return RewriteLoss{Lost: entries, Because: why}
		}
	}
	return RewriteLoss{Unknown: unknown}
}
