package migrate

import (
	"testing"

	"k8s.io/apiserver/pkg/endpoints/discovery"
)

func TestStorageVersionHashMatchesAPIServer(t *testing.T) {
	for _, gvk := range [][3]string{{"stable.example.com", "v1", "CronTab"}, {"", "v1", "Pod"}, {"a.b", "v1beta1", "X"}} {
		if got, want := storageVersionHash(gvk[0], gvk[1], gvk[2]), discovery.StorageVersionHash(gvk[0], gvk[1], gvk[2]); got != want {
			t.Errorf("storageVersionHash(%v) = %q, the API server's is %q", gvk, got, want)
		}
	}
}
