#!/usr/bin/env bash
# Runs hack/scan-type-changes over consecutive minor releases (vX.Y.0) of the projects'
# git snapshots (the session's fetch tool; MIRROR=/work/.mirror) and prints, per pair, the
# CRDs whose storage version holds a field of another type than the previous release's
# storage version ([type] lines; list/map-type changes with --all). The result of the last run
# is in testdata/releases/SOURCES.md ("Type changes scanned").
#
#   MIRROR=/work/.mirror hack/scan-type-changes/projects.sh [--all]
set -uo pipefail
cd "$(dirname "$0")/../.."
MIRROR=${MIRROR:-/work/.mirror}
ALL=${1:-}
scan=$(mktemp -d)/scan; trap 'rm -rf "$(dirname "$scan")"' EXIT
go build -o "$scan" ./hack/scan-type-changes
# repository  crd-path  first-minor-tag
while read -r repo path from; do
  gd="$MIRROR/${repo/\//+}/repo"
  [ -d "$gd" ] || { echo "# $repo: no snapshot in $MIRROR"; continue; }
  tags=$(git --git-dir="$gd" tag | grep -E '^v?[0-9]+\.[0-9]+\.0$' | sort -V | awk -v f="$from" '$0==f{on=1} on')
  echo "## $repo ($path): $(echo $tags | tr ' ' ',')"
  # shellcheck disable=SC2086
  "$scan" -git "$gd" -path "$path" $tags | if [ "$ALL" = --all ]; then cat; else grep -E '^(#|[a-z].*storage)|\[type\]$'; fi
done <<'LIST'
open-telemetry/opentelemetry-operator config/crd/bases v0.90.0
kyverno/kyverno config/crds v1.8.0
prometheus-operator/prometheus-operator example/prometheus-operator-crd v0.50.0
crossplane/crossplane cluster/crds v1.10.0
LIST
