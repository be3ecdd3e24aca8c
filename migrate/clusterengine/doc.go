// Package clusterengine holds the integration tests of migrate's cluster engine (a
// storagemigration.k8s.io StorageVersionMigration followed to completion) against a real
// kube-apiserver with the StorageVersionMigrator feature on and kube-controller-manager running
// its storage-version-migrator controller. It is a separate package because its API server
// needs its own flags. There is no code in it.
package clusterengine
