#!/usr/bin/env bash
# Builds the control-plane binaries the integration tests run (kube-apiserver, etcd and, on
# request, kube-controller-manager) from the Go module proxy, into a cached folder, and prints
# that folder. Prebuilt downloads are not used.
#
#   hack/build-test-binaries.sh [kube-apiserver] [etcd] [kube-controller-manager]
#   hack/build-test-binaries.sh --dir     # print the cache folder, build nothing
#
# With no arguments it builds kube-apiserver and etcd. It does nothing when KUBEBUILDER_ASSETS
# is set, or when every requested binary is already in the folder.
#
# The folder is $CRDVER_TEST_ASSETS or, by default,
# ${XDG_CACHE_HOME:-$HOME/.cache}/kubectl-crdver/testbin/k8s-<version>-etcd-<version>.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
kube_version=$(awk '$1=="require" && $2=="k8s.io/kubernetes" {print $3}' "$here/tools/kube/go.mod")
etcd_version=$(awk '$1=="require" && $2=="go.etcd.io/etcd/server/v3" {print $3}' "$here/tools/etcd/go.mod")

if [[ -n "${KUBEBUILDER_ASSETS:-}" ]]; then
  echo "$KUBEBUILDER_ASSETS"
  exit 0
fi

dir=${CRDVER_TEST_ASSETS:-${XDG_CACHE_HOME:-$HOME/.cache}/kubectl-crdver/testbin/k8s-${kube_version}-etcd-${etcd_version}}
if [[ "${1:-}" == "--dir" ]]; then
  echo "$dir"
  exit 0
fi
mkdir -p "$dir"

# Several test runs (or developers' shells) may ask at once: one builds, the others wait for it.
if command -v flock >/dev/null 2>&1; then
  exec 9>>"$dir/.lock"
  flock 9
fi

wanted=("$@")
[[ ${#wanted[@]} -gt 0 ]] || wanted=(kube-apiserver etcd)

build() { # name module-dir package
  local name=$1 moddir=$2 pkg=$3
  if [[ -x "$dir/$name" ]]; then return 0; fi
  echo "building $name from the Go module proxy into $dir (first run only; ~5-10 min on 2 cores)" >&2
  # -trimpath and no VCS stamping keep the build cacheable; CGO off gives static binaries.
  (cd "$here/tools/$moddir" && CGO_ENABLED=0 go build -trimpath -ldflags='-s -w' -o "$dir/$name.tmp.$$" "$pkg")
  mv "$dir/$name.tmp.$$" "$dir/$name"
}

for w in "${wanted[@]}"; do
  case "$w" in
    kube-apiserver) build kube-apiserver kube k8s.io/kubernetes/cmd/kube-apiserver ;;
    kube-controller-manager) build kube-controller-manager kube k8s.io/kubernetes/cmd/kube-controller-manager ;;
    etcd) build etcd etcd . ;;
    *) echo "build-test-binaries.sh: unknown binary \"$w\" (want kube-apiserver, etcd or kube-controller-manager)" >&2; exit 2 ;;
  esac
done
echo "$dir"
