package ownership

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"
)

// Vanished reports whether entry e names fields and none of them is in obj any more: the
// entry owned only data the object no longer holds (fields a re-encoding dropped, with the
// user's consent), so the API server dropped the emptied entry. No ownership of anything the
// object holds was lost with it.
func Vanished(e metav1.ManagedFieldsEntry, obj map[string]any) bool {
	s, err := decode(e)
	if err != nil || s.Empty() {
		return false
	}
	gone := true
	s.Leaves().Iterate(func(p fieldpath.Path) {
		if gone && Exists(obj, p) {
			gone = false
		}
	})
	return gone
}
