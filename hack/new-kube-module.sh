#!/usr/bin/env bash
# Writes hack/tools/kube-<minor>/ (go.mod, go.sum, tools.go): the module from which
# hack/build-test-binaries.sh --kube <minor> builds that minor's kube-apiserver for the
# differential tests against older API servers (docs/kubernetes-versions.md).
#
#   hack/new-kube-module.sh 1.34.4
#   hack/new-kube-module.sh 1.32.13 k8s.io/csi-translation-lib@v0.33.13
#                       # a staging module whose v0.<minor>.<patch> the proxy does not serve,
#                       # pointed at another release (said in go.mod)
#
# k8s.io/kubernetes replaces its staging modules (k8s.io/api, k8s.io/apiserver, ...) with
# ./staging/src paths, which a module requiring it cannot use; this copies its replace list with
# each target pointed at the published v0.<minor>.<patch> of that staging module.
# Run it once per new version and commit the result; builds then use the committed go.sum.
set -euo pipefail

version=${1:?usage: hack/new-kube-module.sh <major.minor.patch>, e.g. 1.34.4}
version=${version#v}
if [[ ! "$version" =~ ^1\.([0-9]+)\.([0-9]+)$ ]]; then
  echo "new-kube-module.sh: \"$version\" is not a Kubernetes release like 1.34.4" >&2
  exit 2
fi
minor=${BASH_REMATCH[1]}
patch=${BASH_REMATCH[2]}
shift
declare -A override=()
for o in "$@"; do
  if [[ ! "$o" =~ ^(k8s\.io/[a-z0-9-]+)@(v[0-9.]+)$ ]]; then
    echo "new-kube-module.sh: \"$o\" is not MODULE@VERSION (e.g. k8s.io/csi-translation-lib@v0.33.13)" >&2
    exit 2
  fi
  override[${BASH_REMATCH[1]}]=${BASH_REMATCH[2]}
done
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
dir="$here/tools/kube-1.$minor"
mkdir -p "$dir"

# Older releases' go.sum entries may be missing from the checksum database's tiles we can reach;
# the module proxy still serves them. GOSUMDB=off trusts the proxy for the first fetch, and the
# committed go.sum pins every later build to what was fetched then.
export GOSUMDB=${GOSUMDB:-off}
gomod=$(go mod download -json "k8s.io/kubernetes@v$version" | sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",$/\1/p')
if [[ -z "$gomod" || ! -f "$gomod" ]]; then
  echo "new-kube-module.sh: the module proxy did not serve k8s.io/kubernetes@v$version" >&2
  exit 3
fi
staging=$(sed -n '/^replace (/,/^)/p' "$gomod" | awk '$2=="=>" && $3 ~ /^\.\/staging\// {print $1}')

{
  echo "// Module kube-1.$minor builds kube-apiserver $version from the Go module proxy for the"
  echo "// differential tests against older API servers. Written by hack/new-kube-module.sh."
  echo "module github.com/crdver/kubectl-crdver/hack/tools/kube-1.$minor"
  echo
  echo "go $(awk '$1=="go" {print $2; exit}' "$gomod")"
  echo
  echo "require k8s.io/kubernetes v$version"
  echo
  for m in "${!override[@]}"; do
    echo "// $m v0.$minor.$patch is not served by the module proxy: ${override[$m]} is used instead."
  done
  echo "replace ("
  for m in $staging; do echo "	$m => $m ${override[$m]:-v0.$minor.$patch}"; done
  echo ")"
} > "$dir/go.mod"
# A module that pins kube-controller-manager too (kube-1.35, for the cluster engine's tests)
# keeps it when it is written again.
kcm=
if grep -q 'k8s.io/kubernetes/cmd/kube-controller-manager' "$dir/tools.go" 2>/dev/null; then
  kcm=$'\n\t_ "k8s.io/kubernetes/cmd/kube-controller-manager"'
fi
cat > "$dir/tools.go" <<GO
//go:build tools

// Package tools pins the kube-apiserver${kcm:+ and kube-controller-manager} that hack/build-test-binaries.sh --kube 1.$minor builds.
package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"$kcm
)
GO
(cd "$dir" && GOFLAGS=-mod=mod go mod tidy)
echo "$dir"
