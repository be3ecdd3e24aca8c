package retire

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	crdinfo "github.com/crdver/kubectl-crdver/crd"
)

// Each tool's rule, as that tool decides that an object is its own; and look-alikes that no
// tool owns.
func TestManagedBy(t *testing.T) {
	yes := true
	cases := []struct {
		name        string
		labels, ann map[string]string
		owners      []metav1.OwnerReference
		managers    []string
		want        Manager
	}{
		{name: "nothing"},
		{name: "helm install", labels: map[string]string{"app.kubernetes.io/managed-by": "Helm"},
			ann:  map[string]string{"meta.helm.sh/release-name": "cert-manager", "meta.helm.sh/release-namespace": "cert-manager"},
			want: Manager{Tool: "Helm", Kind: "release", Name: "cert-manager", Namespace: "cert-manager", Rule: "annotations meta.helm.sh/release-name, meta.helm.sh/release-namespace"}},
		{name: "helm release without the label", ann: map[string]string{"meta.helm.sh/release-name": "a", "meta.helm.sh/release-namespace": "b"},
			want: Manager{Tool: "Helm", Kind: "release", Name: "a", Namespace: "b", Rule: "annotations meta.helm.sh/release-name, meta.helm.sh/release-namespace (without label app.kubernetes.io/managed-by=Helm)"}},
		// helm template: Helm's label, no release annotations: no release owns it.
		{name: "helm template render", labels: map[string]string{"app.kubernetes.io/managed-by": "Helm", "helm.sh/chart": "cert-manager-v0.16.1", "app.kubernetes.io/instance": "cert-manager"}},
		{name: "release name only", labels: map[string]string{"app.kubernetes.io/managed-by": "Helm"}, ann: map[string]string{"meta.helm.sh/release-name": "x"}},
		{name: "flux kustomization", labels: map[string]string{"kustomize.toolkit.fluxcd.io/name": "infra", "kustomize.toolkit.fluxcd.io/namespace": "flux-system"},
			want: Manager{Tool: "Flux", Kind: "Kustomization", Name: "infra", Namespace: "flux-system", Rule: "labels kustomize.toolkit.fluxcd.io/name, kustomize.toolkit.fluxcd.io/namespace"}},
		{name: "flux kustomization name only", labels: map[string]string{"kustomize.toolkit.fluxcd.io/name": "infra"}},
		// helm-controller drives a Helm release: the HelmRelease is what to change.
		{name: "flux helmrelease", labels: map[string]string{"helm.toolkit.fluxcd.io/name": "cm", "helm.toolkit.fluxcd.io/namespace": "apps", "app.kubernetes.io/managed-by": "Helm"},
			ann:  map[string]string{"meta.helm.sh/release-name": "apps-cm", "meta.helm.sh/release-namespace": "apps"},
			want: Manager{Tool: "Flux", Kind: "HelmRelease", Name: "cm", Namespace: "apps", Rule: "labels helm.toolkit.fluxcd.io/name, helm.toolkit.fluxcd.io/namespace"}},
		{name: "argo cd tracking id", ann: map[string]string{"argocd.argoproj.io/tracking-id": "gateway:apiextensions.k8s.io/CustomResourceDefinition:/gateways.gateway.networking.k8s.io"},
			want: Manager{Tool: "Argo CD", Kind: "Application", Name: "gateway", Rule: "annotation argocd.argoproj.io/tracking-id"}},
		{name: "argo cd app in another namespace", ann: map[string]string{"argocd.argoproj.io/tracking-id": "team-a_gateway:apiextensions.k8s.io/CustomResourceDefinition:/x"},
			want: Manager{Tool: "Argo CD", Kind: "Application", Name: "gateway", Namespace: "team-a", Rule: "annotation argocd.argoproj.io/tracking-id"}},
		{name: "argo cd malformed tracking id", ann: map[string]string{"argocd.argoproj.io/tracking-id": "gateway"}},
		{name: "argo cd label tracking", labels: map[string]string{"app.kubernetes.io/instance": "gateway"}, managers: []string{"argocd-controller"},
			want: Manager{Tool: "Argo CD", Kind: "Application", Name: "gateway", Rule: "label app.kubernetes.io/instance, written by field manager argocd-controller"}},
		// Every Helm chart sets app.kubernetes.io/instance: alone, it is no Argo CD application.
		{name: "instance label, applied with kubectl", labels: map[string]string{"app.kubernetes.io/instance": "gateway"}, managers: []string{"kubectl"}},
		{name: "argo cd instance label key", labels: map[string]string{"argocd.argoproj.io/instance": "gw"},
			want: Manager{Tool: "Argo CD", Kind: "Application", Name: "gw", Rule: "label argocd.argoproj.io/instance"}},
		{name: "olm owner labels", labels: map[string]string{"olm.owner": "etcdoperator.v0.9.4", "olm.owner.kind": "ClusterServiceVersion", "olm.owner.namespace": "operators", "olm.managed": "true"},
			want: Manager{Tool: "OLM", Kind: "ClusterServiceVersion", Name: "etcdoperator.v0.9.4", Namespace: "operators", Rule: "labels olm.owner, olm.owner.kind=ClusterServiceVersion"}},
		{name: "olm csv owner reference", owners: []metav1.OwnerReference{{APIVersion: "operators.coreos.com/v1alpha1", Kind: "ClusterServiceVersion", Name: "etcdoperator.v0.9.4"}},
			want: Manager{Tool: "OLM", Kind: "ClusterServiceVersion", Name: "etcdoperator.v0.9.4", Rule: "ownerReferences: operators.coreos.com/v1alpha1 ClusterServiceVersion"}},
		{name: "olm operator label", labels: map[string]string{"operators.coreos.com/etcd.operators": ""},
			want: Manager{Tool: "OLM", Kind: "Operator", Name: "etcd.operators", Rule: "label operators.coreos.com/etcd.operators"}},
		{name: "olm v1", labels: map[string]string{"olm.operatorframework.io/owner-kind": "ClusterExtension", "olm.operatorframework.io/owner-name": "argocd"},
			want: Manager{Tool: "OLM", Kind: "ClusterExtension", Name: "argocd", Rule: "labels olm.operatorframework.io/owner-kind=ClusterExtension, olm.operatorframework.io/owner-name"}},
		{name: "olm managed", labels: map[string]string{"olm.managed": "true"}, want: Manager{Tool: "OLM", Rule: "label olm.managed=true"}},
		{name: "controller owner", owners: []metav1.OwnerReference{{APIVersion: "example.com/v1", Kind: "Installer", Name: "main", Controller: &yes}},
			want: Manager{Tool: "Installer", Kind: "Installer", Name: "main", Rule: "ownerReferences: controller example.com/v1 Installer"}},
		// kubebuilder's scaffolding labels every CRD managed-by kustomize: informational only.
		{name: "managed-by kustomize", labels: map[string]string{"app.kubernetes.io/managed-by": "kustomize"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			crd := &apiextensionsv1.CustomResourceDefinition{ObjectMeta: metav1.ObjectMeta{Name: "widgets.example.com", Labels: c.labels, Annotations: c.ann, OwnerReferences: c.owners}}
			for _, m := range c.managers {
				crd.ManagedFields = append(crd.ManagedFields, metav1.ManagedFieldsEntry{Manager: m, Operation: metav1.ManagedFieldsOperationApply})
			}
			got := ManagedBy(crd)
			if diff := cmp.Diff(c.want, got); diff != "" {
				t.Errorf("ManagedBy (-want +got):\n%s", diff)
			}
			if s := got.String(); strings.Contains(s, `""`) || got.Managed() != (c.want.Tool != "") || (s == "") == got.Managed() {
				t.Errorf("String() = %q, Managed() = %v", s, got.Managed())
			}
		})
	}
}

func TestManagerString(t *testing.T) {
	m := Manager{Tool: "Helm", Kind: "release", Name: "cm", Namespace: "apps", Rule: "annotations meta.helm.sh/release-name, meta.helm.sh/release-namespace"}
	if got, want := m.String(), `Helm (release "cm" in namespace "apps", annotations meta.helm.sh/release-name, meta.helm.sh/release-namespace)`; got != want {
		t.Errorf("got %s\nwant %s", got, want)
	}
	if got, want := (Manager{Tool: "OLM", Rule: "label olm.managed=true"}).String(), "OLM (label olm.managed=true)"; got != want {
		t.Errorf("got %s, want %s", got, want)
	}
}

// cert-manager v0.16.1's static manifest (cert-manager.yaml, rendered with helm template)
// labels its CRDs app.kubernetes.io/managed-by: Helm and helm.sh/chart, without a release:
// not managed, so upgrade applies it.
func TestManagedByCertManagerStaticManifest(t *testing.T) {
	files, err := filepath.Glob("../testdata/releases/cert-manager/v0.16.1/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no cert-manager v0.16.1 CRDs: %v", err)
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		crd, err := crdinfo.Decode(b)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		{
			if crd.Labels["app.kubernetes.io/managed-by"] != "Helm" {
				t.Fatalf("%s: the fixture no longer has Helm's label: %v", crd.Name, crd.Labels)
			}
			if m := ManagedBy(crd); m.Managed() {
				t.Errorf("%s: managed by %s", crd.Name, m)
			}
			if !HelmLabelOnly(crd) {
				t.Errorf("%s: HelmLabelOnly false", crd.Name)
			}
		}
	}
}
