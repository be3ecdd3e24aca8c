package migrate

import (
	"crypto/sha256"
	"encoding/base64"
)

// storageVersionHash is k8s.io/apiserver/pkg/endpoints/discovery.StorageVersionHash, the value
// discovery reports as a resource's storageVersionHash. It is copied (three lines, checked
// against the original by TestStorageVersionHashMatchesAPIServer) because importing that
// package would pull the API server's handler, admission and storage packages into every
// program that imports migrate.
func storageVersionHash(group, version, kind string) string {
	sum := sha256.Sum256([]byte(group + "/" + version + "/" + kind))
	return base64.StdEncoding.EncodeToString(sum[:8])
}
