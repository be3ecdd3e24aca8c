//go:build tools

// Package tools pins the kube-apiserver that hack/build-test-binaries.sh --kube 1.34 builds.
package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
)
