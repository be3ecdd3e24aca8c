#!/usr/bin/env bash
# Builds the control-plane binaries the integration tests run (kube-apiserver, etcd and, on
# request, kube-controller-manager) from the Go module proxy, into a cached folder, and prints
# that folder. Prebuilt downloads are not used.
#
#   hack/build-test-binaries.sh [kube-apiserver] [etcd] [kube-controller-manager]
#   hack/build-test-binaries.sh --dir     # print the cache folder, build nothing
#   hack/build-test-binaries.sh --kube 1.34 [--dir] [kube-apiserver] [etcd] [kube-controller-manager]
#                                         # an older minor's kube-apiserver (from
#                                         # hack/tools/kube-1.34, see hack/new-kube-module.sh),
#                                         # with the current etcd linked beside it; its
#                                         # kube-controller-manager only where that module's
#                                         # tools.go pins it (kube-1.35, for the in-tree
#                                         # StorageVersionMigration controller's tests)
#   hack/build-test-binaries.sh --minors  # list the older minors that have a module
#   hack/build-test-binaries.sh agnhost   # the Kubernetes e2e conversion webhook (agnhost's
#                                         # crd-conversion-webhook, hack/tools/kube/agnhost) into
#                                         # .../testbin/agnhost-<kube version>, whatever
#                                         # KUBEBUILDER_ASSETS says; prints that folder
#
# With no arguments it builds kube-apiserver and etcd. It does nothing when KUBEBUILDER_ASSETS
# is set (without --kube), or when every requested binary is already in the folder.
#
# The folder is $CRDVER_TEST_ASSETS or, by default,
# ${XDG_CACHE_HOME:-$HOME/.cache}/kubectl-crdver/testbin/k8s-<version>-etcd-<version>;
# with --kube, .../testbin/k8s-<that version>-etcd-<version> (CRDVER_TEST_ASSETS is ignored).
# $CRDVER_TESTBIN, when set, is used in place of .../kubectl-crdver/testbin (make test sets it,
# because it points XDG_CACHE_HOME at a temporary folder for the tests).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=lib/lock.sh
source "$here/lib/lock.sh"
etcd_version=$(awk '$1=="require" && $2=="go.etcd.io/etcd/server/v3" {print $3}' "$here/tools/etcd/go.mod")
root=${CRDVER_TESTBIN:-${XDG_CACHE_HOME:-$HOME/.cache}/kubectl-crdver/testbin}

if [[ "${1:-}" == "--minors" ]]; then
  for m in "$here"/tools/kube-1.*/go.mod; do
    [[ -f "$m" ]] && basename "$(dirname "$m")" | sed 's/^kube-//'
  done | sort -t. -k2,2n
  exit 0
fi

kube_module=kube
if [[ "${1:-}" == "--kube" ]]; then
  minor=${2:?build-test-binaries.sh: --kube needs a minor version such as 1.34}
  shift 2
  kube_module=kube-$minor
  if [[ ! -f "$here/tools/$kube_module/go.mod" ]]; then
    echo "build-test-binaries.sh: no module for Kubernetes $minor; write one with hack/new-kube-module.sh $minor.<patch>" >&2
    exit 2
  fi
fi
kube_version=$(awk '$1=="require" && $2=="k8s.io/kubernetes" {print $3}' "$here/tools/$kube_module/go.mod")

if [[ "${1:-}" == "agnhost" && "$kube_module" == kube ]]; then
  # Not a control-plane binary: its own folder, built whether or not KUBEBUILDER_ASSETS is set.
  adir=$root/agnhost-${kube_version}
  lock_folder "$adir"
  if [[ ! -x "$adir/agnhost" ]]; then
    echo "building agnhost (crd-conversion-webhook) $kube_version from the Go module proxy into $adir (first run only)" >&2
    (cd "$here/tools/kube" && CGO_ENABLED=0 go build -trimpath -ldflags='-s -w' -o "$adir/agnhost.tmp.$$" ./agnhost)
    mv "$adir/agnhost.tmp.$$" "$adir/agnhost"
  fi
  echo "$adir"
  exit 0
fi

if [[ "$kube_module" == kube ]]; then
  if [[ -n "${KUBEBUILDER_ASSETS:-}" ]]; then
    echo "$KUBEBUILDER_ASSETS"
    exit 0
  fi
  dir=${CRDVER_TEST_ASSETS:-$root/k8s-${kube_version}-etcd-${etcd_version}}
else
  dir=$root/k8s-${kube_version}-etcd-${etcd_version}
fi
if [[ "${1:-}" == "--dir" ]]; then
  echo "$dir"
  exit 0
fi
# Several test runs (or developers' shells) may ask at once: one builds, the others wait for it.
lock_folder "$dir"

wanted=("$@")
[[ ${#wanted[@]} -gt 0 ]] || wanted=(kube-apiserver etcd)

build() { # name module-dir package
  local name=$1 moddir=$2 pkg=$3
  if [[ -x "$dir/$name" ]]; then return 0; fi
  echo "building $name $kube_version from the Go module proxy into $dir (first run only; ~5-10 min on 2 cores)" >&2
  # -trimpath and no VCS stamping keep the build cacheable; CGO off gives static binaries.
  # GOSUMDB=off for the older minors' modules: their committed go.sum pins what is fetched.
  local sumdb=${GOSUMDB:-}
  [[ "$moddir" == kube ]] || sumdb=off
  (cd "$here/tools/$moddir" && GOSUMDB=${sumdb:-$(go env GOSUMDB)} CGO_ENABLED=0 go build -trimpath -ldflags='-s -w' -o "$dir/$name.tmp.$$" "$pkg")
  mv "$dir/$name.tmp.$$" "$dir/$name"
}

if [[ "$kube_module" != kube ]]; then
  # An older minor's folder holds its kube-apiserver; etcd is the current one, built (once)
  # in the current folder and linked here.
  for w in "${wanted[@]}"; do
    case "$w" in
      kube-apiserver) build kube-apiserver "$kube_module" k8s.io/kubernetes/cmd/kube-apiserver ;;
      kube-controller-manager)
        # Only a module whose tools.go imports it has its dependencies in go.sum (kube-1.35).
        if ! grep -q 'k8s.io/kubernetes/cmd/kube-controller-manager' "$here/tools/$kube_module/tools.go"; then
          echo "build-test-binaries.sh: hack/tools/$kube_module does not pin kube-controller-manager; add it to its tools.go and run go mod tidy there (GOSUMDB=off)" >&2
          exit 2
        fi
        build kube-controller-manager "$kube_module" k8s.io/kubernetes/cmd/kube-controller-manager ;;
      etcd)
        current=$("$here/build-test-binaries.sh" etcd | tail -n 1)
        if [[ ! -x "$current/etcd" ]]; then
          echo "build-test-binaries.sh: no etcd in $current (KUBEBUILDER_ASSETS?)" >&2
          exit 3
        fi
        ln -sfn "$current/etcd" "$dir/etcd" ;;
      *) echo "build-test-binaries.sh: --kube builds kube-apiserver, etcd and kube-controller-manager only, not \"$w\"" >&2; exit 2 ;;
    esac
  done
  echo "$dir"
  exit 0
fi

for w in "${wanted[@]}"; do
  case "$w" in
    kube-apiserver) build kube-apiserver kube k8s.io/kubernetes/cmd/kube-apiserver ;;
    kube-controller-manager) build kube-controller-manager kube k8s.io/kubernetes/cmd/kube-controller-manager ;;
    etcd) build etcd etcd . ;;
    *) echo "build-test-binaries.sh: unknown binary \"$w\" (want kube-apiserver, etcd or kube-controller-manager)" >&2; exit 2 ;;
  esac
done
echo "$dir"
