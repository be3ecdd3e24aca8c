//go:build tools

// Package tools pins the kube-apiserver and kube-controller-manager that
// hack/build-test-binaries.sh --kube 1.36 builds.
package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
)
