package plugin

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	sigsyaml "sigs.k8s.io/yaml"

	crdinfo "github.com/crdver/kubectl-crdver/crd"
	"github.com/crdver/kubectl-crdver/internal/testenv"
	"github.com/crdver/kubectl-crdver/plan"
	"github.com/crdver/kubectl-crdver/webhookcheck"
)

// crdManifest is crd as a release file holds it: YAML, with apiVersion and kind, no status.
func crdManifest(t *testing.T, crd *apiextensionsv1.CustomResourceDefinition) []byte {
	t.Helper()
	c := crd.DeepCopy()
	c.APIVersion, c.Kind = "apiextensions.k8s.io/v1", "CustomResourceDefinition"
	c.Status = apiextensionsv1.CustomResourceDefinitionStatus{}
	b, err := sigsyaml.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// writeCRDFolder writes crds into a new folder, one file each (crdManifest).
func writeCRDFolder(t *testing.T, crds []*apiextensionsv1.CustomResourceDefinition) string {
	t.Helper()
	dir := t.TempDir()
	for _, crd := range crds {
		if err := os.WriteFile(filepath.Join(dir, crd.Name+".yaml"), crdManifest(t, crd), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// createObjects creates objs at their apiVersions (their namespaces made when missing) under
// crds (one of a name: samples repeat), and returns how many each CRD holds.
func createObjects(t *testing.T, crds []*apiextensionsv1.CustomResourceDefinition, objs []*unstructured.Unstructured) map[string]int64 {
	t.Helper()
	ctx := context.Background()
	dyn := dynamic.NewForConfigOrDie(quietConfig())
	kube := kubernetes.NewForConfigOrDie(env.Config)
	byKind := map[string]*apiextensionsv1.CustomResourceDefinition{}
	for _, c := range crds {
		byKind[c.Spec.Group+"/"+c.Spec.Names.Kind] = c
	}
	out := map[string]int64{}
	for _, o := range objs {
		gvk := o.GroupVersionKind()
		crd := byKind[gvk.Group+"/"+gvk.Kind]
		if crd == nil || !crdinfo.IsServed(crd, gvk.Version) {
			continue
		}
		if ns := o.GetNamespace(); ns != "" {
			if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
				t.Fatal(err)
			}
		}
		_, err := dyn.Resource(crdinfo.GVR(crd, gvk.Version)).Namespace(o.GetNamespace()).Create(ctx, o, metav1.CreateOptions{})
		switch {
		case apierrors.IsAlreadyExists(err):
			continue // the same sample in another file
		case err != nil:
			t.Fatalf("%s %s at %s: %v", gvk.Kind, o.GetName(), gvk.Version, err)
		}
		out[crd.Name]++
	}
	return out
}

// planJSON runs plan -f dir -o json against the test cluster.
func planJSON(t *testing.T, args ...string) (*plan.Report, result) {
	t.Helper()
	r := runCluster(t, append([]string{"plan", "-o", "json"}, args...)...)
	var rep plan.Report
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Fatalf("plan %v: exit %d %v\n%s", args, r.code, err, r.stderr)
	}
	return &rep, r
}

// checkRoundTripped: every CRD that holds objects had each of them round-tripped through the
// webhook, which failed none and lost nothing.
func checkRoundTripped(t *testing.T, rep *plan.Report, objects map[string]int64) {
	t.Helper()
	for _, it := range rep.Items {
		c := it.ConversionCheck
		if objects[it.CRD] == 0 {
			continue
		}
		if c == nil || c.RoundTrip == nil {
			t.Errorf("%s: no conversion check: %+v", it.CRD, c)
			continue
		}
		rt := c.RoundTrip
		t.Logf("%s: %s; %d pairs, %d requests, %.0f objects/s, %d added or normalised", it.CRD, c.Reason, len(rt.Pairs), rt.Requests, rt.PerSecond, rt.AddedCount)
		if c.State != webhookcheck.StateAnswers || rt.Objects != objects[it.CRD] || rt.FailedCount+rt.LossCount != 0 {
			t.Errorf("%s: state %s, %d of %d objects round-tripped, failed %+v, losses %+v", it.CRD, c.State, rt.Objects, objects[it.CRD], rt.Failed, rt.Losses)
		}
		for _, p := range rt.Pairs {
			if int64(p.Objects) != objects[it.CRD] || p.Converted != p.Objects {
				t.Errorf("%s: %s -> %s: %d sent, %d converted, want %d", it.CRD, p.From, p.To, p.Objects, p.Converted, objects[it.CRD])
			}
		}
	}
}

// Cluster API v1.8.4 → v1.13.6 (storage v1beta1 → v1beta2 through the webhook), Cluster
// API's own templates stored at v1beta1: plan round-trips every stored object through Cluster
// API's real conversion webhook (built from sigs.k8s.io/cluster-api v1.14.2).
func TestPlanConversionClusterAPI(t *testing.T) {
	hook := testenv.StartCAPIWebhook(t)
	live := testenv.CAPIReleaseCRDs(t, "v1.8.4", hook)
	for _, c := range live {
		registerCRD(t, c)
	}
	var objs []*unstructured.Unstructured
	for _, m := range []string{"clusterclass-quick-start.yaml", "cluster-with-kcp.yaml", "md.yaml"} {
		b, err := os.ReadFile(td("manifests", "cluster-api", m))
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range splitDocs(t, renderCAPITemplate(t, string(b)), "cluster.x-k8s.io") {
			if d.obj != nil && d.obj.GetAPIVersion() == "cluster.x-k8s.io/v1beta1" {
				if d.obj.GetNamespace() == "" {
					d.obj.SetNamespace("default")
				}
				objs = append(objs, d.obj)
			}
		}
	}
	counts := createObjects(t, live, objs)
	rep, r := planJSON(t, "-f", writeCRDFolder(t, testenv.CAPIReleaseCRDs(t, "v1.13.6", hook)))
	if len(counts) != 3 {
		t.Fatalf("objects created: %v", counts)
	}
	checkRoundTripped(t, rep, counts)
	for _, it := range rep.Items {
		if slices.Contains(it.Kinds, plan.KindConversionWebhook) {
			t.Errorf("%s: a conversion-webhook finding with Cluster API's own webhook: %q\n%s", it.CRD, it.BreakingReasons, r.stdout)
		}
	}
}

// cert-manager v0.16.1 → v1.5.5 (storage v1alpha2 → v1, the conversion's review versions
// changed from [v1] to the release's [v1, v1beta1]: every served version reads the stored
// objects), cert-manager's own samples stored at v1alpha2: plan round-trips every stored object
// to each version v1.5.5 serves and back through cert-manager's real webhook. Then the
// release's CRDs as they ship, naming the Service cert-manager/cert-manager-webhook that this
// cluster does not have (its caBundle left to cert-manager's cainjector), judged with --webhook
// through the same webhook running outside the cluster: every stored object round-tripped, the
// cluster unchanged.
func TestPlanConversionCertManager(t *testing.T) {
	hook := testenv.StartCertManagerWebhook(t, "", env.Kubeconfig)
	var live, next, shipped []*apiextensionsv1.CustomResourceDefinition
	for _, v := range []string{"v0.16.1", "v1.5.5"} {
		files, _ := filepath.Glob(td("releases", "cert-manager", v, "crd-*.yaml"))
		for _, f := range files {
			for _, crd := range testenv.ReadCRDs(t, f) {
				if v == "v1.5.5" {
					shipped = append(shipped, crd.DeepCopy())
				}
				hook.PointCRD(crd)
				if v == "v0.16.1" {
					// Its webhook answers ConversionReview v1 alone; v0.16.1 lists v1beta1.
					crd.Spec.Conversion.Webhook.ConversionReviewVersions = []string{"v1"}
					// No cainjector here: the caBundle is the test webhook's, not injected.
					delete(crd.Annotations, webhookcheck.InjectCAFromSecret)
					live = append(live, crd)
				} else {
					next = append(next, crd)
				}
			}
		}
	}
	for _, c := range live {
		registerCRD(t, c)
	}
	var objs []*unstructured.Unstructured
	files, _ := filepath.Glob(td("releases", "cert-manager", "samples", "*.yaml"))
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range splitDocs(t, string(b), "cert-manager.io") {
			if d.obj != nil {
				objs = append(objs, d.obj)
			}
		}
	}
	counts := createObjects(t, live, objs)
	if len(counts) != 2 {
		t.Fatalf("objects created: %v", counts)
	}
	rep, _ := planJSON(t, "-f", writeCRDFolder(t, next))
	checkRoundTripped(t, rep, counts)
	for _, it := range rep.Items {
		if c := it.ConversionCheck; counts[it.CRD] > 0 && c != nil && len(c.Pairs) != 3 {
			t.Errorf("%s: pairs %v, want v1alpha2 to each of v1, v1beta1, v1alpha3", it.CRD, c.Pairs)
		}
	}

	var names []string
	for _, c := range live {
		names = append(names, c.Name)
	}
	before := snapshotCRDs(t, names...)
	rep, r := planJSON(t, "-f", writeCRDFolder(t, shipped), "--webhook", hook.URL)
	checkRoundTripped(t, rep, counts)
	if r.code != 0 {
		t.Errorf("plan --webhook: exit %d\n%s", r.code, r.stderr)
	}
	for _, it := range rep.Items {
		c := it.ConversionCheck
		if counts[it.CRD] == 0 || c == nil {
			continue
		}
		// cainjector fills the caBundle once applied: there is none yet to verify TLS with (said).
		if c.Webhook != "service cert-manager/cert-manager-webhook:443/convert" || c.Target != hook.URL || !strings.Contains(c.Reached, "via "+strings.TrimSuffix(strings.TrimPrefix(hook.URL, "https://"), "/convert")) ||
			!strings.Contains(c.Reached, "the CRD has no caBundle to verify it with (cert-manager's cainjector fills it from cert-manager/cert-manager-webhook-ca after the apply") {
			t.Errorf("%s: webhook %q, asked %q, reached %q", it.CRD, c.Webhook, c.Target, c.Reached)
		}
		if slices.Contains(it.Kinds, plan.KindConversionWebhook) {
			t.Errorf("%s: a conversion-webhook finding through cert-manager's own webhook: %q\n%s", it.CRD, it.BreakingReasons, r.stdout)
		}
	}
	if after := snapshotCRDs(t, names...); !slices.Equal(before, after) {
		t.Errorf("plan --webhook changed the cluster: %v → %v", before, after)
	}
}

// snapshotCRDs is each CRD's resourceVersion and every one of its objects', listed at its
// storage version (no conversion).
func snapshotCRDs(t *testing.T, names ...string) []string {
	t.Helper()
	ctx := context.Background()
	crds := apiextensionsclient.NewForConfigOrDie(env.Config)
	dyn := dynamic.NewForConfigOrDie(quietConfig())
	var out []string
	for _, name := range names {
		crd, err := crds.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, "crd "+name+" "+crd.ResourceVersion)
		list, err := dyn.Resource(crdinfo.GVR(crd, crdinfo.StorageVersion(crd))).List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range list.Items {
			out = append(out, o.GetNamespace()+"/"+o.GetName()+" "+o.GetResourceVersion())
		}
	}
	return out
}
