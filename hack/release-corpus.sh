#!/usr/bin/env bash
# Rebuilds testdata/releases/ (the corpus of real operator releases used by the e2e tests)
# from git snapshots of the projects' repositories, and writes the file table of
# testdata/releases/SOURCES.md. Every file is `git show TAG:PATH` verbatim, except the
# cert-manager CRDs, which are Helm templates rendered with hack/render-helm-crds, and the
# external-secrets CRDs, which are one document each selected verbatim (awk) from the release's
# deploy/crds/bundle.yaml. Nothing is edited by hand.
#
#   MIRROR=/work/.mirror hack/release-corpus.sh
set -euo pipefail
cd "$(dirname "$0")/.."
MIRROR=${MIRROR:-/work/.mirror}
OUT=testdata/releases
rm -rf "$OUT"/*/ "$OUT"/files.tsv
mkdir -p "$OUT"
TABLE="$OUT/files.tsv"

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

# --- cert-manager: v1.5.5 -> v1.6.3 -> v1.7.3 (Helm templates, rendered) --------------
C=cert-manager/cert-manager
CG="$MIRROR/cert-manager+cert-manager/repo"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
go build -o "$tmp/render" ./hack/render-helm-crds
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

# --- Gateway API: v0.5.1 -> v1.0.0, standard channel ---------------------------------
G=kubernetes-sigs/gateway-api
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

# --- Flux source-controller: v1.6.2 (Flux 2.6.3/2.6.4) -> v1.7.4 (Flux 2.7.4/2.7.5) ----
F=fluxcd/source-controller
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

# --- external-secrets: v0.15.1 (Webhook, v1beta1 storage) -> v0.16.2 (v1 storage,
#     v1alpha1 removed) -> v0.17.0 (v1beta1 unserved) ------------------------------------
E=external-secrets/external-secrets
EG="$MIRROR/external-secrets+external-secrets/repo"
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

# sha256 column
{
  printf '| file | repository | tag | commit | path in repository | how | sha256 |\n|---|---|---|---|---|---|---|\n'
  while IFS=$'\t' read -r dest repo tag commit path how; do
    printf '| %s | %s | %s | %s | %s | %s | %s |\n' "$dest" "$repo" "$tag" "$commit" "$path" "$how" "$(sha256sum "$OUT/$dest" | cut -d' ' -f1)"
  done < "$TABLE"
} > "$OUT/FILES.md"
rm -f "$TABLE"
du -sh "$OUT"
