#!/usr/bin/env bash
# Rebuilds testdata/releases/ (the corpus of real operator releases used by the e2e tests)
# from git snapshots of the projects' repositories, and writes the file table of
# testdata/releases/SOURCES.md. Every file is `git show TAG:PATH` verbatim, except the
# cert-manager CRDs, which are Helm templates rendered with hack/render-helm-crds, and the
# external-secrets CRDs, which are one document each selected verbatim (awk) from the release's
# deploy/crds/bundle.yaml. Nothing is edited by hand.
#
# The cert-manager v0.16.1 CRDs are written as apiextensions.k8s.io/v1beta1 (older than the v1
# CRD API); after rendering they are converted to v1 by hack/crd-v1beta1-to-v1 (the API
# server's own conversion code: what a cluster installed before 1.22 serves for them today).
# The files under */history/ are not fetched: they are this project's own objects written
# under older, looser schemas (see SOURCES.md) and are left alone.
#
#   MIRROR=/work/.mirror hack/release-corpus.sh                 # everything
#   MIRROR=/work/.mirror hack/release-corpus.sh cert-manager-0.16 gateway-api-0.6
#                                 # only these parts; their rows in FILES.md are replaced
set -euo pipefail
cd "$(dirname "$0")/.."
MIRROR=${MIRROR:-/work/.mirror}
OUT=testdata/releases
PARTS=("$@")
want() { [ ${#PARTS[@]} -eq 0 ] && return 0; local p; for p in "${PARTS[@]}"; do [ "$p" = "$1" ] && return 0; done; return 1; }
if [ ${#PARTS[@]} -eq 0 ]; then
  # keep the project's own history objects
  find "$OUT" -mindepth 2 -maxdepth 2 -type d ! -name history -exec rm -rf {} +
fi
rm -f "$OUT"/files.tsv
mkdir -p "$OUT"
TABLE="$OUT/files.tsv"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT

# get REPO TAG PATH DEST [how]
get() {
  local repo=$1 tag=$2 path=$3 dest=$4 how=${5:-"git show"}
  local gd="$MIRROR/${repo/\//+}/repo"
  mkdir -p "$(dirname "$OUT/$dest")"
  git --git-dir="$gd" show "$tag:$path" > "$OUT/$dest"
  local commit; commit=$(git --git-dir="$gd" rev-parse "$tag^{commit}")
  printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$dest" "$repo" "$tag" "$commit" "$path" "$how" >> "$TABLE"
}

# --- Strimzi: 0.51.0 (v1beta2 storage, v1 served) -> 1.0.0 (v1 only) ----------------
if want strimzi; then
S=strimzi/strimzi-kafka-operator
for t in 0.51.0 1.0.0; do
  for f in 040-Crd-kafka 041-Crd-kafkaconnect 044-Crd-kafkauser 048-Crd-kafkamirrormaker2; do
    get $S $t packaging/install/cluster-operator/$f.yaml strimzi/$t/$f.yaml
  done
done
# v1beta2 objects: the inputs of Strimzi's own v1 conversion tool's tests, and its expected
# (converted) outputs; plus the 0.48.0 examples (the last release whose examples are v1beta2).
CT=v1-api-conversion/src/test/resources/io/strimzi/kafka/api/conversion/v1/cli
for f in multiple-resources kafka-v1beta2 connect-v1beta2 mm2-v1beta2; do
  get $S 0.51.0 $CT/$f.yaml strimzi/samples/conversion-tool-input/$f.yaml
  get $S 0.51.0 $CT/$f.out strimzi/samples/conversion-tool-output/$f.yaml
done
get $S 0.51.0 $CT/kafka-keycloak-authz.yaml strimzi/samples/conversion-tool-input/kafka-keycloak-authz.yaml
for f in user/kafka-user.yaml connect/kafka-connect.yaml mirror-maker/kafka-mirror-maker-2.yaml kafka/kafka-ephemeral.yaml; do
  get $S 0.48.0 packaging/examples/$f strimzi/samples/examples-0.48.0/$(basename $f)
done
get $S 1.0.0 LICENSE LICENSES/strimzi-kafka-operator.LICENSE
fi

# --- cert-manager: v1.5.5 -> v1.6.3 -> v1.7.3 (Helm templates, rendered) --------------
C=cert-manager/cert-manager
CG="$MIRROR/cert-manager+cert-manager/repo"
go build -o "$tmp/render" ./hack/render-helm-crds
go build -o "$tmp/v1beta1-to-v1" ./hack/crd-v1beta1-to-v1
if want cert-manager; then
for t in v1.5.5 v1.6.3 v1.7.3; do
  git --git-dir="$CG" show $t:deploy/charts/cert-manager/templates/_helpers.tpl > "$tmp/helpers.tpl"
  git --git-dir="$CG" show $t:deploy/charts/cert-manager/values.yaml > "$tmp/values.yaml"
  for f in certificates certificaterequests issuers; do
    get $C $t deploy/crds/crd-$f.yaml cert-manager/$t/crd-$f.yaml \
      "helm-render (hack/render-helm-crds: release cert-manager/cert-manager, creator=static, as deploy/crds/BUILD.bazel)"
    "$tmp/render" "$tmp/helpers.tpl" "$tmp/values.yaml" $t < "$OUT/cert-manager/$t/crd-$f.yaml" > "$tmp/r"
    mv "$tmp/r" "$OUT/cert-manager/$t/crd-$f.yaml"
  done
done
# cert-manager's own objects at v1alpha2/v1alpha3 (its cmctl convert tests) and at v1.
CT=test/integration/ctl/testdata
for f in convert/input/resource1.yaml convert/input/resource2.yaml convert/input/resource_with_organization_v1alpha2.yaml create_cr_issuer.yaml create_cr_v1alpha3_cert_with_ns1.yaml; do
  get $C v1.5.5 $CT/$f cert-manager/samples/$(basename $f)
done
get $C v1.5.5 test/fixtures/cert-manager-resources.yaml cert-manager/samples/cert-manager-resources.yaml
get $C v1.7.3 LICENSE LICENSES/cert-manager.LICENSE
fi

# --- cert-manager v0.16.1: storage v1alpha2 (v1alpha3, v1beta1 served), the start of a long
#     history: v0.16.1 -> v1.5.5 (storage v1; storedVersions keeps v1alpha2) -> v1.6.3
#     (v1alpha2..v1beta1 unserved, still stored) -> v1.7.3 (removed) ------------------------
if want cert-manager-0.16; then
t=v0.16.1
git --git-dir="$CG" show $t:deploy/charts/cert-manager/templates/_helpers.tpl > "$tmp/helpers.tpl"
git --git-dir="$CG" show $t:deploy/charts/cert-manager/values.yaml > "$tmp/values.yaml"
for f in certificates certificaterequests issuers; do
  get $C $t deploy/crds/crd-$f.yaml cert-manager/$t/crd-$f.yaml \
    "helm-render (hack/render-helm-crds: release cert-manager/cert-manager, creator=static, as deploy/crds/BUILD.bazel), then apiextensions v1beta1 -> v1 (hack/crd-v1beta1-to-v1: the API server's conversion)"
  "$tmp/render" "$tmp/helpers.tpl" "$tmp/values.yaml" $t < "$OUT/cert-manager/$t/crd-$f.yaml" | "$tmp/v1beta1-to-v1" > "$tmp/r"
  mv "$tmp/r" "$OUT/cert-manager/$t/crd-$f.yaml"
done
fi

# --- Gateway API: v0.5.1 -> v1.0.0, standard channel ---------------------------------
G=kubernetes-sigs/gateway-api
if want gateway-api; then
for f in gatewayclasses gateways httproutes; do
  get $G v0.5.1 config/crd/standard/gateway.networking.k8s.io_$f.yaml gateway-api/v0.5.1/gateway.networking.k8s.io_$f.yaml
done
for f in gatewayclasses gateways httproutes referencegrants; do
  get $G v1.0.0 config/crd/standard/gateway.networking.k8s.io_$f.yaml gateway-api/v1.0.0/gateway.networking.k8s.io_$f.yaml
done
for f in v1alpha2/simple-gateway/gateway.yaml v1alpha2/simple-gateway/httproute.yaml v1beta1/http-routing/gateway.yaml v1beta1/http-routing/foo-httproute.yaml v1beta1/http-routing/bar-httproute.yaml; do
  get $G v0.5.1 examples/$f gateway-api/samples/${f//\//-}
done
get $G v1.0.0 LICENSE LICENSES/gateway-api.LICENSE
fi

# --- Gateway API: v0.6.2 (ReferenceGrant stored at v1alpha2) -> v1.1.1 (v1 storage;
#     ReferenceGrant v1beta1 storage, v1alpha2 unserved) -> v1.2.1 (v1alpha2 removed) ---
if want gateway-api-0.6; then
for t in v0.6.2 v1.1.1 v1.2.1; do
  for f in gatewayclasses gateways httproutes referencegrants; do
    get $G $t config/crd/standard/gateway.networking.k8s.io_$f.yaml gateway-api/$t/gateway.networking.k8s.io_$f.yaml
  done
done
for f in reference-grant.yaml tls-basic.yaml tls-cert-cross-namespace.yaml simple-gateway/gateway.yaml simple-gateway/httproute.yaml http-routing/gateway.yaml; do
  get $G v0.6.2 examples/standard/$f gateway-api/samples-v0.6.2/${f//\//-}
done
fi

# --- Flux source-controller: v1.6.2 (Flux 2.6.3/2.6.4) -> v1.7.4 (Flux 2.7.4/2.7.5) ----
F=fluxcd/source-controller
if want flux; then
for t in v1.6.2 v1.7.4; do
  for f in gitrepositories helmrepositories; do
    get $F $t config/crd/bases/source.toolkit.fluxcd.io_$f.yaml flux/source-controller-$t/source.toolkit.fluxcd.io_$f.yaml
  done
done
get $F v0.21.2 config/samples/source_v1beta1_gitrepository.yaml flux/samples/source_v1beta1_gitrepository.yaml
get $F v0.21.2 config/samples/source_v1beta1_helmrepository.yaml flux/samples/source_v1beta1_helmrepository.yaml
get $F v0.36.1 config/samples/source_v1beta2_helmrepository.yaml flux/samples/source_v1beta2_helmrepository.yaml
get $F v1.6.2 config/samples/source_v1_gitrepository.yaml flux/samples/source_v1_gitrepository.yaml
get $F v1.7.4 LICENSE LICENSES/fluxcd-source-controller.LICENSE
fi

# --- external-secrets: v0.15.1 (Webhook, v1beta1 storage) -> v0.16.2 (v1 storage,
#     v1alpha1 removed) -> v0.17.0 (v1beta1 unserved) ------------------------------------
E=external-secrets/external-secrets
EG="$MIRROR/external-secrets+external-secrets/repo"
if want external-secrets; then
for t in v0.15.1 v0.16.2 v0.17.0; do
  for n in externalsecrets; do
    dest=external-secrets/$t/$n.external-secrets.io.yaml
    mkdir -p "$OUT/external-secrets/$t"
    # the bundle's documents are separated by "---" lines; keep the one whose top-level
    # metadata.name is the CRD's, byte for byte
    git --git-dir="$EG" show $t:deploy/crds/bundle.yaml | \
      awk -v want="  name: $n.external-secrets.io" 'function flush(){ if (hit) printf "%s", doc; doc=""; hit=0 }
        /^---$/ { flush(); next } { doc = doc $0 "\n"; if ($0 == want) hit=1 } END { flush() }' > "$OUT/$dest"
    printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$dest" "$E" "$t" "$(git --git-dir="$EG" rev-parse "$t^{commit}")" \
      deploy/crds/bundle.yaml "one document of the bundle, verbatim (awk: the document whose metadata.name is $n.external-secrets.io)" >> "$TABLE"
  done
done
get $E v0.15.1 docs/snippets/basic-external-secret.yaml external-secrets/samples/basic-external-secret.yaml
get $E v0.17.0 LICENSE LICENSES/external-secrets.LICENSE
fi

# --- OpenTelemetry operator: v0.98.0 (OpenTelemetryCollector stored at v1alpha1) -> v0.99.0
#     (storage v1beta1, v1alpha1 kept served; spec.config a YAML string -> an object). The
#     CRD as the project generates it (config/crd/bases: conversion None, as kustomize without
#     the conversion-webhook patch and the Helm chart with admissionWebhooks.create=false
#     apply it); v1alpha1 objects from the project's own samples and e2e tests. ---------------
O=open-telemetry/opentelemetry-operator
if want opentelemetry-operator; then
for t in v0.98.0 v0.99.0; do
  get $O $t config/crd/bases/opentelemetry.io_opentelemetrycollectors.yaml opentelemetry-operator/$t/opentelemetry.io_opentelemetrycollectors.yaml
done
for f in config/samples/core_v1alpha1_opentelemetrycollector.yaml config/samples/sidecar.yaml tests/e2e/smoke-simplest/00-install.yaml tests/e2e/smoke-statefulset/00-install.yaml; do
  get $O v0.98.0 $f opentelemetry-operator/samples/${f//\//-}
done
get $O v0.99.0 LICENSE LICENSES/opentelemetry-operator.LICENSE
fi

# sha256 column; with PARTS, the other parts' rows of FILES.md are kept
{
  printf '| file | repository | tag | commit | path in repository | how | sha256 |\n|---|---|---|---|---|---|---|\n'
  if [ ${#PARTS[@]} -gt 0 ] && [ -f "$OUT/FILES.md" ]; then
    tail -n +3 "$OUT/FILES.md" | while IFS= read -r row; do
      dest=$(printf '%s' "$row" | cut -d'|' -f2 | tr -d ' ')
      cut -f1 "$TABLE" | grep -qxF "$dest" || printf '%s\n' "$row"
    done
  fi
  while IFS=$'\t' read -r dest repo tag commit path how; do
    printf '| %s | %s | %s | %s | %s | %s | %s |\n' "$dest" "$repo" "$tag" "$commit" "$path" "$how" "$(sha256sum "$OUT/$dest" | cut -d' ' -f1)"
  done < "$TABLE"
} > "$OUT/FILES.md.new"
mv "$OUT/FILES.md.new" "$OUT/FILES.md"
rm -f "$TABLE"
du -sh "$OUT"
