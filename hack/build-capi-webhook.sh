#!/usr/bin/env bash
# Builds Cluster API's conversion webhook (hack/tools/capi-webhook: controller-runtime's
# conversion handler with Cluster API's own scheme and v1beta1 <-> v1beta2 converters) from the
# Go module proxy, into a cached folder, and prints the binary's path.
#
#   hack/build-capi-webhook.sh          # build if missing, print the path
#   hack/build-capi-webhook.sh --path   # print the path, build nothing
#
# The binary is <root>/capi-webhook-<cluster-api version>-<source sum>/capi-webhook, built once per
# Cluster API version (the one hack/tools/capi-webhook/go.mod requires) and source, where <root> is the folder of
# hack/build-test-binaries.sh: $CRDVER_TESTBIN or ${XDG_CACHE_HOME:-$HOME/.cache}/kubectl-crdver/testbin.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
mod=$here/tools/capi-webhook
capi_version=$(awk '($1=="require" && $2=="sigs.k8s.io/cluster-api") || ($1=="sigs.k8s.io/cluster-api") {print ($1=="require" ? $3 : $2); exit}' "$mod/go.mod")
root=${CRDVER_TESTBIN:-${XDG_CACHE_HOME:-$HOME/.cache}/kubectl-crdver/testbin}
# The folder names the source too, so that a change to the program builds it again.
src_sum=$(cat "$mod/go.mod" "$mod/go.sum" "$mod"/*.go | sha256sum | cut -c1-8)
dir=$root/capi-webhook-$capi_version-$src_sum
bin=$dir/capi-webhook

if [[ "${1:-}" == "--path" ]]; then
  echo "$bin"
  exit 0
fi
mkdir -p "$dir"
# Several test runs may ask at once: one builds, the others wait for it.
if command -v flock >/dev/null 2>&1; then
  exec 9>>"$dir/.lock"
  flock 9
fi
if [[ ! -x "$bin" ]]; then
  echo "building capi-webhook (sigs.k8s.io/cluster-api $capi_version) from the Go module proxy into $dir (first run only; ~5 min of CPU, 15 min measured on 2 busy cores)" >&2
  (cd "$mod" && CGO_ENABLED=0 go build -trimpath -ldflags='-s -w' -o "$bin.tmp.$$" .)
  mv "$bin.tmp.$$" "$bin"
fi
echo "$bin"
