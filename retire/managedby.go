package retire

import (
	"fmt"
	"slices"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The deployment tools ManagedBy recognises (Manager.Tool).
const (
	ToolHelm   = "Helm"
	ToolFlux   = "Flux"
	ToolArgoCD = "Argo CD"
	ToolOLM    = "OLM"
)

// The labels and annotations the tools set and read, as their own code spells them.
const (
	// Helm (pkg/action/validate.go: appManagedByLabel, helmReleaseNameAnnotation,
	// helmReleaseNamespaceAnnotation). Helm sets all three on every object of a release's
	// templates (setMetadataVisitor) and adopts an existing object only when all three name
	// the release (checkOwnership / requireValue). `helm template` renders the label alone
	// when the chart's templates write it, and no annotation: no release owns such an object.
	helmManagedByLabel        = "app.kubernetes.io/managed-by"
	helmReleaseNameAnnotation = "meta.helm.sh/release-name"
	helmReleaseNSAnnotation   = "meta.helm.sh/release-namespace"

	// Flux: the owner labels kustomize-controller and helm-controller put on what they apply
	// (fluxcd/pkg/ssa's owner labels, <controller group>/name and /namespace).
	fluxKustomizationName = "kustomize.toolkit.fluxcd.io/name"
	fluxKustomizationNS   = "kustomize.toolkit.fluxcd.io/namespace"
	fluxHelmReleaseName   = "helm.toolkit.fluxcd.io/name"
	fluxHelmReleaseNS     = "helm.toolkit.fluxcd.io/namespace"

	// Argo CD (util/argo/resource_tracking.go): the annotation tracking method (the default
	// since Argo CD 3.0, and annotation+label) reads argocd.argoproj.io/tracking-id,
	// "<application>:<group>/<kind>:<namespace>/<name>", checked against the installation
	// id annotation when one is set; the label method (the default before 3.0) reads the
	// instance label, app.kubernetes.io/instance unless application.instanceLabelKey says
	// otherwise (argocd.argoproj.io/instance is the key its documentation suggests).
	argoTrackingID        = "argocd.argoproj.io/tracking-id"
	argoInstanceLabel     = "app.kubernetes.io/instance"
	argoInstanceLabelAlt  = "argocd.argoproj.io/instance"
	argoManagerPrefix     = "argocd-" // argocd-controller (server-side apply), argocd-application-controller
	olmOwnerLabel         = "olm.owner"
	olmOwnerKindLabel     = "olm.owner.kind"
	olmOwnerNSLabel       = "olm.owner.namespace"
	olmManagedLabel       = "olm.managed"
	olmOperatorPrefix     = "operators.coreos.com/"
	olmV1OwnerKindLabel   = "olm.operatorframework.io/owner-kind"
	olmV1OwnerNameLabel   = "olm.operatorframework.io/owner-name"
	olmCSVKind            = "ClusterServiceVersion"
	olmCSVGroup           = "operators.coreos.com"
	olmClusterExtensionKd = "ClusterExtension"
)

// Manager is the deployment tool that manages a CRD, as that tool itself decides whether an
// object is its own: which tool, the rule that matched (the exact labels, annotations or
// owner reference) and what of the tool owns it. The zero Manager: no tool manages the CRD.
type Manager struct {
	// Tool is Helm, Flux, Argo CD, OLM, or the kind of a controller owner reference.
	Tool string `json:"tool"`
	// Rule is the metadata that matched, as the tool reads it: e.g. "annotations
	// meta.helm.sh/release-name, meta.helm.sh/release-namespace".
	Rule string `json:"rule"`
	// Kind is what Name names: release (Helm), HelmRelease or Kustomization (Flux),
	// Application (Argo CD), ClusterServiceVersion, ClusterExtension or Operator (OLM).
	Kind string `json:"kind,omitempty"`
	// Name and Namespace name it; Name is "" when the rule names nothing (OLM's olm.managed).
	Name      string `json:"name,omitempty"`
	Namespace string `json:"namespace,omitempty"`
}

// Managed says whether a tool manages the CRD.
func (m Manager) Managed() bool { return m.Tool != "" }

// String is the manager for people: `Helm (release "cert-manager" in namespace
// "cert-manager", annotations meta.helm.sh/release-name, meta.helm.sh/release-namespace)`;
// "" when no tool manages the CRD.
func (m Manager) String() string {
	if !m.Managed() {
		return ""
	}
	var what string
	switch {
	case m.Name != "" && m.Namespace != "":
		what = fmt.Sprintf("%s %q in namespace %q, ", m.Kind, m.Name, m.Namespace)
	case m.Name != "":
		what = fmt.Sprintf("%s %q, ", m.Kind, m.Name)
	}
	return fmt.Sprintf("%s (%s%s)", m.Tool, what, m.Rule)
}

// ManagedBy says which deployment tool manages crd, by the metadata each tool itself reads to
// decide that an object is its own (the constants above name the source): Helm, Flux, Argo
// CD and OLM put a removed or unserved version back on their next sync, so retire does not
// change such a CRD without --force, and upgrade leaves the apply to them. Labels that only
// look like a tool's (app.kubernetes.io/managed-by: Helm rendered by `helm template` into a
// static manifest, app.kubernetes.io/instance that every Helm chart sets) are not enough.
func ManagedBy(crd *apiextensionsv1.CustomResourceDefinition) Manager {
	labels, ann := crd.Labels, crd.Annotations
	// Flux first: helm-controller installs through Helm, and the HelmRelease is what to
	// change (its chart version), not the Helm release it drives.
	if m, ok := pair(ToolFlux, "HelmRelease", "labels", labels, fluxHelmReleaseName, fluxHelmReleaseNS); ok {
		return m
	}
	if m, ok := pair(ToolFlux, "Kustomization", "labels", labels, fluxKustomizationName, fluxKustomizationNS); ok {
		return m
	}
	if m, ok := pair(ToolHelm, "release", "annotations", ann, helmReleaseNameAnnotation, helmReleaseNSAnnotation); ok {
		if labels[helmManagedByLabel] != "Helm" {
			// Still the release's (Helm upgrades what its last release recorded without
			// checking ownership), but another release could not adopt it.
			m.Rule += fmt.Sprintf(" (without label %s=Helm)", helmManagedByLabel)
		}
		return m
	}
	if m, ok := argoCD(crd); ok {
		return m
	}
	if m, ok := olm(crd); ok {
		return m
	}
	for _, o := range crd.OwnerReferences {
		if o.Controller != nil && *o.Controller {
			return Manager{Tool: o.Kind, Rule: fmt.Sprintf("ownerReferences: controller %s %s", o.APIVersion, o.Kind), Kind: o.Kind, Name: o.Name}
		}
	}
	return Manager{}
}

// pair matches a tool that names its owner in two keys of m (name and namespace), both set.
func pair(tool, kind, what string, m map[string]string, nameKey, nsKey string) (Manager, bool) {
	if m[nameKey] == "" || m[nsKey] == "" {
		return Manager{}, false
	}
	return Manager{Tool: tool, Kind: kind, Name: m[nameKey], Namespace: m[nsKey], Rule: fmt.Sprintf("%s %s, %s", what, nameKey, nsKey)}, true
}

// argoCD is Argo CD's tracking: the tracking-id annotation in its own format (the
// application name before the first colon; "<namespace>_<name>" for an application outside
// Argo CD's namespace), else the instance label under the label method. The label method
// cannot be told from the label alone (Helm charts set app.kubernetes.io/instance to the
// release name): it counts only when Argo CD's controller wrote the object (a managedFields
// entry of an argocd-* manager), or under argocd.argoproj.io/instance, a key only Argo CD uses.
func argoCD(crd *apiextensionsv1.CustomResourceDefinition) (Manager, bool) {
	if id := crd.Annotations[argoTrackingID]; id != "" {
		app, rest, ok := strings.Cut(id, ":")
		group, ns, ok2 := strings.Cut(rest, ":")
		if ok && ok2 && strings.Count(group, "/") == 1 && strings.Count(ns, "/") == 1 && app != "" {
			m := Manager{Tool: ToolArgoCD, Kind: "Application", Name: app, Rule: "annotation " + argoTrackingID}
			if appNS, name, ok := strings.Cut(app, "_"); ok {
				m.Name, m.Namespace = name, appNS
			}
			return m, true
		}
	}
	if app := crd.Labels[argoInstanceLabelAlt]; app != "" {
		return Manager{Tool: ToolArgoCD, Kind: "Application", Name: app, Rule: "label " + argoInstanceLabelAlt}, true
	}
	if app := crd.Labels[argoInstanceLabel]; app != "" {
		if i := slices.IndexFunc(crd.ManagedFields, func(e metav1.ManagedFieldsEntry) bool { return strings.HasPrefix(e.Manager, argoManagerPrefix) }); i >= 0 {
			return Manager{Tool: ToolArgoCD, Kind: "Application", Name: app,
				Rule: fmt.Sprintf("label %s, written by field manager %s", argoInstanceLabel, crd.ManagedFields[i].Manager)}, true
		}
	}
	return Manager{}, false
}

// olm is OLM's ownership of a CRD: v0 owner labels or an owner reference to a
// ClusterServiceVersion (operator-framework/operator-lifecycle-manager pkg/lib/ownerutil),
// the Operator API's component label operators.coreos.com/<package>.<namespace>, the
// olm.managed label, or OLM v1's owner labels (a ClusterExtension).
func olm(crd *apiextensionsv1.CustomResourceDefinition) (Manager, bool) {
	labels := crd.Labels
	if labels[olmOwnerLabel] != "" && labels[olmOwnerKindLabel] == olmCSVKind {
		return Manager{Tool: ToolOLM, Kind: olmCSVKind, Name: labels[olmOwnerLabel], Namespace: labels[olmOwnerNSLabel],
			Rule: fmt.Sprintf("labels %s, %s=%s", olmOwnerLabel, olmOwnerKindLabel, olmCSVKind)}, true
	}
	for _, o := range crd.OwnerReferences {
		if o.Kind == olmCSVKind && strings.HasPrefix(o.APIVersion, olmCSVGroup+"/") {
			return Manager{Tool: ToolOLM, Kind: olmCSVKind, Name: o.Name, Rule: "ownerReferences: " + o.APIVersion + " " + olmCSVKind}, true
		}
	}
	if labels[olmV1OwnerKindLabel] == olmClusterExtensionKd && labels[olmV1OwnerNameLabel] != "" {
		return Manager{Tool: ToolOLM, Kind: olmClusterExtensionKd, Name: labels[olmV1OwnerNameLabel],
			Rule: fmt.Sprintf("labels %s=%s, %s", olmV1OwnerKindLabel, olmClusterExtensionKd, olmV1OwnerNameLabel)}, true
	}
	var keys []string
	for k := range labels {
		if strings.HasPrefix(k, olmOperatorPrefix) && len(k) > len(olmOperatorPrefix) {
			keys = append(keys, k)
		}
	}
	if len(keys) > 0 {
		slices.Sort(keys)
		return Manager{Tool: ToolOLM, Kind: "Operator", Name: strings.TrimPrefix(keys[0], olmOperatorPrefix), Rule: "label " + keys[0]}, true
	}
	if labels[olmManagedLabel] == "true" {
		return Manager{Tool: ToolOLM, Rule: "label " + olmManagedLabel + "=true"}, true
	}
	return Manager{}, false
}

// HelmLabelOnly says whether crd carries Helm's managed-by label without the release
// annotations Helm needs to call it its own (a `helm template` render applied with kubectl):
// not managed, but worth a note.
func HelmLabelOnly(crd *apiextensionsv1.CustomResourceDefinition) bool {
	return crd.Labels[helmManagedByLabel] == "Helm" && !ManagedBy(crd).Managed()
}
