package ownership

import (
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ToVersion moves every entry of entries that names another version of group to version to
// (Move, one version at a time), keeping each manager's ownership. target is the object read
// at to; read returns the same object (the same resourceVersion) read at another version,
// false when it cannot, and is called only when Move needs it (NeedsSource). Entries of a
// version that cannot be read, or whose ownership cannot be worked out (MoveResult.Unresolved),
// are left as they are. It returns the entries and the number moved (0: entries as given).
func ToVersion(entries []metav1.ManagedFieldsEntry, group, to string, target map[string]any, read func(version string) (map[string]any, bool)) ([]metav1.ManagedFieldsEntry, int) {
	toAPI := group + "/" + to
	total := 0
	for _, v := range otherVersions(entries, group, to) {
		f := group + "/" + v
		need, err := NeedsSource(entries, f, target)
		if err != nil {
			continue
		}
		var source map[string]any
		if need {
			s, ok := read(v)
			if !ok {
				continue
			}
			source = s
		}
		next, res, err := Move(entries, f, toAPI, source, target)
		if err != nil || res.Unresolved != "" || res.Moved == 0 || len(next) == 0 {
			continue
		}
		entries, total = next, total+res.Moved
	}
	return entries, total
}

// otherVersions are the versions of group other than to that entries name, each once, in the
// order of the entries.
func otherVersions(entries []metav1.ManagedFieldsEntry, group, to string) []string {
	var out []string
	for _, e := range entries {
		if v, ok := strings.CutPrefix(e.APIVersion, group+"/"); ok && v != to && !slices.Contains(out, v) {
			out = append(out, v)
		}
	}
	return out
}
