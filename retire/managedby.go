package retire

import (
	"fmt"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
)

// ManagedBy says which deployment tool seems to manage crd, from the labels, annotations and
// owner references those tools set ("" when none is recognised): Helm, Argo CD, Flux and OLM
// put a removed or unserved version back on their next sync, so retire does not change such a
// CRD without --force.
func ManagedBy(crd *apiextensionsv1.CustomResourceDefinition) string {
	labels, ann := crd.Labels, crd.Annotations
	switch {
	case labels["app.kubernetes.io/managed-by"] == "Helm" || ann["meta.helm.sh/release-name"] != "":
		return fmt.Sprintf("Helm (release %q)", ann["meta.helm.sh/release-name"])
	case labels["helm.toolkit.fluxcd.io/name"] != "":
		return fmt.Sprintf("Flux (HelmRelease %q)", labels["helm.toolkit.fluxcd.io/name"])
	case labels["kustomize.toolkit.fluxcd.io/name"] != "":
		return fmt.Sprintf("Flux (Kustomization %q)", labels["kustomize.toolkit.fluxcd.io/name"])
	case ann["argocd.argoproj.io/tracking-id"] != "":
		return fmt.Sprintf("Argo CD (tracking id %q)", ann["argocd.argoproj.io/tracking-id"])
	case labels["argocd.argoproj.io/instance"] != "":
		return fmt.Sprintf("Argo CD (application %q)", labels["argocd.argoproj.io/instance"])
	case labels["olm.managed"] == "true":
		return "OLM (label olm.managed)"
	}
	for k := range labels {
		if strings.HasPrefix(k, "operators.coreos.com/") {
			return fmt.Sprintf("OLM (label %s)", k)
		}
	}
	for k := range ann {
		if strings.HasPrefix(k, "operatorframework.io/") || strings.HasPrefix(k, "olm.") {
			return fmt.Sprintf("OLM (annotation %s)", k)
		}
	}
	if by := labels["app.kubernetes.io/managed-by"]; by != "" {
		return fmt.Sprintf("%s (label app.kubernetes.io/managed-by)", by)
	}
	for _, o := range crd.OwnerReferences {
		return fmt.Sprintf("its owner %s %s", o.Kind, o.Name)
	}
	return ""
}
