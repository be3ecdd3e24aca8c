#!/usr/bin/env bash
# Builds a project's real conversion webhook from the Go module proxy, into a cached folder, and
# prints the binary's path.
#
#   hack/build-webhook.sh capi [--path]
#       Cluster API's (hack/tools/capi-webhook: controller-runtime's conversion handler with
#       Cluster API's own scheme and v1beta1 <-> v1beta2 converters), for the sigs.k8s.io/cluster-api
#       version its go.mod requires: <root>/capi-webhook-<version>-<source sum>/capi-webhook
#   hack/build-webhook.sh cert-manager [VERSION] [--path]
#       cert-manager's own webhook (./cmd/webhook of github.com/jetstack/cert-manager, built
#       inside the module with the module's own go.mod: GOFLAGS=-mod=mod, GOTOOLCHAIN=local) at
#       VERSION, one of hack/tools/cm-webhook/versions (default: the first there), whose module
#       zip must have the go.sum hash listed there: <root>/cm-webhook-<version>-<sum>/cm-webhook
#   hack/build-webhook.sh helm [VERSION] [--path]
#       not a webhook: Helm's CLI (./cmd/helm of helm.sh/helm/v3), built the same way, for the
#       test that installs a chart with the real helm: hack/tools/helm/versions; <root>/helm-<version>-<sum>/helm
#
# --path prints the path and builds nothing. <root> is the folder of hack/build-test-binaries.sh:
# $CRDVER_TESTBIN or ${XDG_CACHE_HOME:-$HOME/.cache}/kubectl-crdver/testbin. Each folder name
# carries a sum of what the build depends on, so that a change builds it again.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=lib/lock.sh
source "$here/lib/lock.sh"
root=${CRDVER_TESTBIN:-${XDG_CACHE_HOME:-$HOME/.cache}/kubectl-crdver/testbin}
usage="usage: hack/build-webhook.sh capi|cert-manager|helm [VERSION] [--path]"

which=${1:-}
[[ -n "$which" ]] || { echo "$usage" >&2; exit 2; }
shift
path_only=
version=
for a in "$@"; do
  case "$a" in
    --path) path_only=1 ;;
    v*) version=$a ;;
    *) echo "build-webhook.sh: unknown argument \"$a\"; $usage" >&2; exit 2 ;;
  esac
done

case "$which" in
  capi)
    mod=$here/tools/capi-webhook
    [[ -z "$version" ]] || { echo "build-webhook.sh: capi builds the version hack/tools/capi-webhook/go.mod requires; change it there" >&2; exit 2; }
    version=$(awk '($1=="require" && $2=="sigs.k8s.io/cluster-api") || ($1=="sigs.k8s.io/cluster-api") {print ($1=="require" ? $3 : $2); exit}' "$mod/go.mod")
    src_sum=$(cat "$mod/go.mod" "$mod/go.sum" "$mod"/*.go | sha256sum | cut -c1-8)
    name=capi-webhook ;;
  cert-manager|helm)
    case "$which" in
      cert-manager) tools=cm-webhook module=github.com/jetstack/cert-manager pkg=./cmd/webhook name=cm-webhook ;;
      helm) tools=helm module=helm.sh/helm/v3 pkg=./cmd/helm name=helm ;;
    esac
    list=$here/tools/$tools/versions
    [[ -n "$version" ]] || version=$(awk '$1 ~ /^v/ {print $1; exit}' "$list")
    zip_sum=$(awk -v v="$version" '$1==v {print $2}' "$list")
    if [[ -z "$zip_sum" ]]; then
      echo "build-webhook.sh: $which $version is not in hack/tools/$tools/versions (have: $(awk '$1 ~ /^v/ {printf "%s ", $1}' "$list")); add it with its go.sum hash" >&2
      exit 2
    fi
    src_sum=$(echo "$version $zip_sum" | sha256sum | cut -c1-8) ;;
  *) echo "build-webhook.sh: unknown webhook \"$which\"; $usage" >&2; exit 2 ;;
esac

dir=$root/$name-$version-$src_sum
bin=$dir/$name
if [[ -n "$path_only" ]]; then
  echo "$bin"
  exit 0
fi
lock_folder "$dir"
if [[ -x "$bin" ]]; then
  echo "$bin"
  exit 0
fi

case "$which" in
  capi)
    echo "building capi-webhook (sigs.k8s.io/cluster-api $version) from the Go module proxy into $dir (first run only; ~5 min of CPU, 15 min measured on 2 busy cores)" >&2
    (cd "$mod" && CGO_ENABLED=0 go build -trimpath -ldflags='-s -w' -o "$bin.tmp.$$" .) ;;
  cert-manager|helm)
    echo "building $name ($module $version, $pkg) from the Go module proxy into $dir (first run only; ~4-5 min of CPU; cert-manager's took 23 min on 2 busy cores)" >&2
    # Outside any module, so that only the module's own go.mod decides its dependencies.
    info=$(cd "$dir" && GO111MODULE=on go mod download -json "$module@$version")
    got_sum=$(sed -n 's/^[[:space:]]*"Sum": "\(.*\)",*$/\1/p' <<<"$info")
    src=$(sed -n 's/^[[:space:]]*"Dir": "\(.*\)",*$/\1/p' <<<"$info")
    if [[ "$got_sum" != "$zip_sum" ]]; then
      echo "build-webhook.sh: $module@$version has hash \"$got_sum\", hack/tools/$tools/versions says $zip_sum" >&2
      exit 3
    fi
    # The module cache is read-only and -mod=mod may complete go.sum: build in a copy.
    work=$dir/src.tmp.$$
    trap 'chmod -R u+w "$work" 2>/dev/null; rm -rf "$work"' EXIT
    cp -R "$src" "$work"
    chmod -R u+w "$work"
    (cd "$work" && GOFLAGS="-mod=mod -buildvcs=false" GOTOOLCHAIN=local CGO_ENABLED=0 \
      go build -trimpath -ldflags='-s -w' -o "$bin.tmp.$$" "$pkg") ;;
esac
mv "$bin.tmp.$$" "$bin"
echo "$bin"
