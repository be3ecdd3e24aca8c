package plan

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	crdinfo "github.com/crdver/kubectl-crdver/crd"
	"github.com/crdver/kubectl-crdver/internal/testcrd"
)

func installCRDFile(t *testing.T, ctx context.Context, parts ...string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(append([]string{"..", "testdata"}, parts...)...))
	if err != nil {
		t.Fatal(err)
	}
	crd, err := crdinfo.Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	crd.ResourceVersion, crd.Status = "", apiextensionsv1.CustomResourceDefinitionStatus{}
	if _, err := env.CreateCRD(ctx, crd); err != nil {
		t.Fatal(err)
	}
}

func createObject(t *testing.T, ctx context.Context, dyn dynamic.Interface, gvr schema.GroupVersionResource, manager string, obj map[string]any) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{Object: obj}
	got, err := dyn.Resource(gvr).Namespace(u.GetNamespace()).Create(ctx, u, metav1.CreateOptions{FieldManager: manager})
	if err != nil {
		t.Fatalf("creating %s %s: %v", gvr.Resource, u.GetName(), err)
	}
	return got
}

// TestRunbookConvertsGitOpsManifests: on a real API server holding a Flux Kustomization (with
// its GitRepository) and an Argo CD Application that apply Widgets, the change-writers step of
// a release removing the version they write gives, per repository, the convert --write command
// for the folder they apply from; the Application of another kind is not named. Before the
// tools' CRDs exist, there are no sources and nothing to say.
func TestRunbookConvertsGitOpsManifests(t *testing.T) {
	ctx := context.Background()
	dyn := dynamic.NewForConfigOrDie(env.Config)
	crds := apiextensionsclient.NewForConfigOrDie(env.Config)
	if srcs, notes := FindGitOpsSources(ctx, dyn); len(srcs) != 0 || len(notes) != 0 {
		t.Fatalf("no Flux or Argo CD installed: sources %v, notes %v", srcs, notes)
	}
	installCRDFile(t, ctx, "releases", "flux", "source-controller-v1.7.4", "source.toolkit.fluxcd.io_gitrepositories.yaml")
	installCRDFile(t, ctx, "gitops", "flux-kustomization-minimal.yaml")
	installCRDFile(t, ctx, "gitops", "argo-cd-v3.5.1-application-crd.yaml")

	const group = "gitops.plan.example.com"
	size := testcrd.Spec(map[string]apiextensionsv1.JSONSchemaProps{"size": {Type: "integer"}})
	live := testcrd.New(group, "Widget", testcrd.Versions("v1beta1", "v1"), testcrd.Storage("v1beta1"), testcrd.Conversion(nil), size)
	if _, err := env.CreateCRD(ctx, live); err != nil {
		t.Fatal(err)
	}
	widgets := schema.GroupVersionResource{Group: group, Version: "v1beta1", Resource: "widgets"}
	for _, name := range []string{"w1", "w2"} {
		createObject(t, ctx, dyn, widgets, "kustomize-controller", map[string]any{"apiVersion": group + "/v1beta1", "kind": "Widget",
			"metadata": map[string]any{"name": name, "namespace": "default"}, "spec": map[string]any{"size": int64(1)}})
	}

	for _, ns := range []string{"flux-system", "argocd"} {
		createObject(t, ctx, dyn, schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}, "test", map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": ns}})
	}
	createObject(t, ctx, dyn, schema.GroupVersionResource{Group: "source.toolkit.fluxcd.io", Version: "v1", Resource: "gitrepositories"}, "test", map[string]any{
		"apiVersion": "source.toolkit.fluxcd.io/v1", "kind": "GitRepository", "metadata": map[string]any{"name": "fleet", "namespace": "flux-system"},
		"spec": map[string]any{"url": "https://github.com/example/fleet", "interval": "1m", "ref": map[string]any{"branch": "main"}}})
	ksGVR := schema.GroupVersionResource{Group: "kustomize.toolkit.fluxcd.io", Version: "v1", Resource: "kustomizations"}
	ks := createObject(t, ctx, dyn, ksGVR, "test", map[string]any{
		"apiVersion": "kustomize.toolkit.fluxcd.io/v1", "kind": "Kustomization", "metadata": map[string]any{"name": "apps", "namespace": "flux-system"},
		"spec": map[string]any{"interval": "10m", "path": "./apps/production", "prune": true, "sourceRef": map[string]any{"kind": "GitRepository", "name": "fleet"}}})
	ks.Object["status"] = map[string]any{"inventory": map[string]any{"entries": []any{
		map[string]any{"id": "default_w1_" + group + "_Widget", "v": "v1beta1"},
		map[string]any{"id": "default_app_apps_Deployment", "v": "v1"},
	}}}
	if _, err := dyn.Resource(ksGVR).Namespace("flux-system").UpdateStatus(ctx, ks, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	app := func(name, path, kind string) map[string]any {
		return map[string]any{"apiVersion": "argoproj.io/v1alpha1", "kind": "Application", "metadata": map[string]any{"name": name, "namespace": "argocd"},
			"spec": map[string]any{"project": "default", "destination": map[string]any{"server": "https://kubernetes.default.svc", "namespace": "default"},
				"source": map[string]any{"repoURL": "https://github.com/example/apps.git", "path": path, "targetRevision": "HEAD"}},
			"status": map[string]any{"resources": []any{map[string]any{"group": group, "version": "v1beta1", "kind": kind, "namespace": "default", "name": "w2"}}}}
	}
	appGVR := schema.GroupVersionResource{Group: "argoproj.io", Version: "v1alpha1", Resource: "applications"}
	createObject(t, ctx, dyn, appGVR, "test", app("widgets", "envs/prod widgets", "Widget"))
	createObject(t, ctx, dyn, appGVR, "test", app("gadgets", "gadgets", "Gadget"))

	next := testcrd.New(group, "Widget", testcrd.Versions("v1"), testcrd.Storage("v1"), testcrd.Conversion(nil), size)
	rep, err := Release(ctx, ReleaseClients{CRDs: crds, Dynamic: dyn}, ReleaseOptions{Next: []*apiextensionsv1.CustomResourceDefinition{next}, Runbook: RunbookOptions{ApplyFile: JoinFiles([]string{"crds/base.yaml", "widgets-v2.yaml"})}})
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(rep.Runbook, func(s RunbookStep) bool { return s.Action == ActionChangeWriters })
	if i < 0 {
		t.Fatalf("no change-writers step: %+v", rep.Runbook)
	}
	st := rep.Runbook[i]
	want := []string{
		"kubectl crdver convert widgets.gitops.plan.example.com --crd-file crds/base.yaml --crd-file widgets-v2.yaml --to v1 -f 'envs/prod widgets' --write",
		"kubectl crdver convert widgets.gitops.plan.example.com --crd-file crds/base.yaml --crd-file widgets-v2.yaml --to v1 -f ./apps/production --write",
	}
	if !slices.Equal(st.Commands, want) {
		t.Errorf("commands:\n%s\nwant:\n%s", strings.Join(st.Commands, "\n"), strings.Join(want, "\n"))
	}
	for _, w := range []string{
		"kustomize-controller wrote gitops.plan.example.com/v1beta1, which the release removes",
		"Argo CD Application argocd/widgets applies them from https://github.com/example/apps.git (revision HEAD), path envs/prod widgets",
		"Flux Kustomization flux-system/apps applies them from https://github.com/example/fleet (branch main), path ./apps/production",
		"docs/commands/convert.md, \"Finding the manifests\"",
	} {
		if !strings.Contains(st.Why, w) {
			t.Errorf("why does not say %q:\n%s", w, st.Why)
		}
	}
	if strings.Contains(st.Why, "gadgets") {
		t.Errorf("the Application of another kind is named: %s", st.Why)
	}
	if steps := rep.Items[0].Steps; !slices.Contains(steps, "# "+st.Why) || !slices.Contains(steps, want[1]) {
		t.Errorf("item steps lack the change-writers step:\n%s", strings.Join(steps, "\n"))
	}
}
