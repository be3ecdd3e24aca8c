package plugin

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/crdver/kubectl-crdver/convert"
	"github.com/crdver/kubectl-crdver/internal/testenv"
)

// capiManifests are Cluster API's own e2e templates at v1beta1 (testdata/manifests/cluster-api,
// see its SOURCES.md): the ClusterClasses are used verbatim (their ${…} variables sit in
// string values of other kinds' documents); the Cluster and MachineDeployment templates put
// ${…} where integers go, so they are rendered first, as `clusterctl generate cluster` does
// (envsubst on the text: comments stay), with capiTemplateValues.
var capiManifests = []struct {
	file   string
	render bool
}{
	{"clusterclass-quick-start.yaml", false},
	{"clusterclass-quick-start-runtimesdk-v1beta1.yaml", false},
	{"cluster-with-kcp.yaml", true},
	{"md.yaml", true},
	{"cluster-with-topology.yaml", true},
}

var capiTemplateValues = map[string]string{
	"CLUSTER_NAME":                "capi-quick-start",
	"DOCKER_SERVICE_CIDRS":        "10.128.0.0/12",
	"DOCKER_POD_CIDRS":            "192.168.0.0/16",
	"DOCKER_SERVICE_DOMAIN":       "cluster.local",
	"KUBERNETES_VERSION":          "v1.33.1",
	"CONTROL_PLANE_MACHINE_COUNT": "1",
	"WORKER_MACHINE_COUNT":        "2",
	"CLUSTER_CLASS_NAMESPACE":     "default",
}

var envsubstVar = regexp.MustCompile(`\$\{([A-Z_]+)(:-([^}]*))?\}`)

// renderCAPITemplate substitutes ${VAR} and ${VAR:-default} as clusterctl's envsubst does.
func renderCAPITemplate(t *testing.T, text string) string {
	t.Helper()
	return envsubstVar.ReplaceAllStringFunc(text, func(m string) string {
		sub := envsubstVar.FindStringSubmatch(m)
		if v, ok := capiTemplateValues[sub[1]]; ok {
			return v
		}
		if sub[2] != "" {
			return sub[3]
		}
		t.Fatalf("template variable %s has no value", sub[1])
		return ""
	})
}

// capiDoc is one document of a manifest file: its text and, when it is a Cluster API core
// object, the object.
type capiDoc struct {
	text string
	obj  *unstructured.Unstructured
}

// splitDocs splits a manifest into its documents' texts and, for documents whose apiVersion
// starts with group + "/", the objects.
func splitDocs(t *testing.T, data, group string) []capiDoc {
	t.Helper()
	var out []capiDoc
	for _, d := range strings.Split(data, "\n---\n") {
		doc := capiDoc{text: d}
		var m map[string]any
		if err := sigsyaml.Unmarshal([]byte(d), &m); err != nil {
			t.Fatal(err)
		}
		if av, _ := m["apiVersion"].(string); strings.HasPrefix(av, group+"/") {
			doc.obj = &unstructured.Unstructured{Object: m}
		}
		out = append(out, doc)
	}
	return out
}

// writeCAPICRDs writes Cluster API's CRDs of a release, pointed at w, to one file (a release
// as `--crd-file` takes it) and registers them in the test API server.
func writeCAPICRDs(t *testing.T, version string, w *testenv.CAPIWebhook) ([]*apiextensionsv1.CustomResourceDefinition, string) {
	t.Helper()
	crds := testenv.CAPIReleaseCRDs(t, version, w)
	var docs []string
	for _, crd := range crds {
		docs = append(docs, string(crdManifest(t, crd)))
		registerCRD(t, crd)
	}
	path := filepath.Join(t.TempDir(), "cluster-api-"+version+"-crds.yaml")
	if err := os.WriteFile(path, []byte(strings.Join(docs, "---\n")), 0o600); err != nil {
		t.Fatal(err)
	}
	return crds, path
}

// convert --write --to v1beta2 on Cluster API's own v1beta1 templates (two ClusterClasses,
// a Cluster with and one without a topology, a MachineDeployment, among the providers'
// kinds), through Cluster API's real conversion webhook (built from sigs.k8s.io/cluster-api
// v1.14.2) named by the release's CRDs (--crd-file).
//
// What Cluster API's conversion does on the round trip v1beta1 -> v1beta2 -> v1beta1 is not
// the identity: it adds its cluster.x-k8s.io/conversion-data annotation and zero values
// (.status, .spec.controlPlaneEndpoint, .spec.template.metadata) and writes durations back
// normalised ("5m" -> "5m0s"); nothing is lost. By the loss rule (convert.Difference.Loss)
// those are reported, not losses, so a plain --write, with no --allow-data-loss, writes the
// Clusters and the ClusterClasses (whose patches hold Go templates in string values: data,
// not a template file) and lists what each round trip added or normalised. The
// MachineDeployment template's empty selector converts to a v1beta2 object without the
// required .spec.selector: listed, not written (no flag writes it). In every written file only
// the Cluster API objects change; every other document, and the comments, stay
// byte-identical, but for the comments of a field the conversion removed, which are listed as
// dropped. The API server accepts each converted object (server-side dry-run create at
// v1beta2) and, once it has defaulted it, it equals what the API server itself returns when
// the original is created at v1beta1 and read at v1beta2 (through the same webhook).
//
// The webhook answers as controller-runtime does, with no Content-Type (Go's server says
// text/plain): a warning, listed, which does not stop the write.
func TestConvertWriteClusterAPI(t *testing.T) {
	hook := testenv.StartCAPIWebhook(t)
	crds, crdFile := writeCAPICRDs(t, "v1.14.2", hook)
	plural := map[string]string{}
	for _, crd := range crds {
		plural[crd.Spec.Names.Kind] = crd.Spec.Names.Plural
	}

	dir := t.TempDir()
	before := map[string]string{}
	for _, m := range capiManifests {
		b, err := os.ReadFile(td("manifests", "cluster-api", m.file))
		if err != nil {
			t.Fatal(err)
		}
		text := string(b)
		if m.render {
			text = renderCAPITemplate(t, text)
		}
		before[m.file] = text
		if err := os.WriteFile(filepath.Join(dir, m.file), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	unchanged := func(what string) {
		t.Helper()
		for _, m := range capiManifests {
			if b, _ := os.ReadFile(filepath.Join(dir, m.file)); string(b) != before[m.file] {
				t.Fatalf("%s: %s was written", what, m.file)
			}
		}
	}

	// The dry run's JSON report lists, per object, what the round trip added or normalised,
	// and no round-trip problem.
	dry := run(t, "", "convert", "--crd-file", crdFile, "--to", "v1beta2", "-f", dir, "--write", "--dry-run", "-o", "json")
	unchanged("--dry-run")
	var dryRep convert.WriteReport
	if err := json.Unmarshal([]byte(dry.stdout), &dryRep); err != nil {
		t.Fatalf("convert --write --dry-run -o json: exit %d, %v\n%s%s", dry.code, err, dry.stdout, dry.stderr)
	}
	kinds := map[string]int{}
	for _, f := range dryRep.Files {
		for _, o := range f.Objects {
			for _, c := range o.Added {
				kinds[c.Kind]++
			}
			for _, p := range o.Problems {
				if p.Check == convert.CheckRoundTrip || p.Check == convert.CheckPruned {
					t.Errorf("%s %s: a loss: %+v", f.Path, o.Name, p)
				}
			}
		}
	}
	t.Logf("convert --write --dry-run -o json: exit %d, round-trip changes that are no loss: %v", dry.code, kinds)
	if kinds[convert.DiffAdded] == 0 || kinds[convert.DiffNormalised] == 0 {
		t.Errorf("the JSON report lists additions %d and normalisations %d, want both", kinds[convert.DiffAdded], kinds[convert.DiffNormalised])
	}

	// No --allow-data-loss: what the round trip adds or normalises is no loss.
	got := run(t, "", "convert", "--crd-file", crdFile, "--to", "v1beta2", "-f", dir, "--write")
	t.Logf("convert --write: exit %d\n%s%s", got.code, got.stdout, got.stderr)
	if got.code != 1 {
		t.Fatalf("exit %d, want 1 (md.yaml is not converted)", got.code)
	}
	mustContain(t, "stdout", got.stdout, "md.yaml", "target-schema .spec.selector: Required value", "warning content-type",
		"the round trip adds or normalises (not a loss): .metadata.annotations added: {\"cluster.x-k8s.io/conversion-data\"",
		`.spec.topology.controlPlane.nodeVolumeDetachTimeout normalised: "5m" became "5m0s" (the same duration)`)
	for _, no := range []string{"lost:", "changed:", "list length", "dropped (--allow-data-loss)", "a template"} {
		if strings.Contains(got.stdout, no) {
			t.Errorf("convert --write says %q:\n%s", no, got.stdout)
		}
	}
	dyn, err := dynamic.NewForConfig(quietConfig())
	if err != nil {
		t.Fatal(err)
	}
	kube, err := kubernetes.NewForConfig(quietConfig())
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	written := map[string]int{}
	for _, m := range capiManifests {
		b, err := os.ReadFile(filepath.Join(dir, m.file))
		if err != nil {
			t.Fatal(err)
		}
		if string(b) == before[m.file] {
			if !strings.Contains(got.stdout, m.file) || !strings.Contains(got.stdout, "not converted") {
				t.Errorf("%s was not written and is not listed as not converted", m.file)
			}
			continue
		}
		olds, news := splitDocs(t, before[m.file], "cluster.x-k8s.io"), splitDocs(t, string(b), "cluster.x-k8s.io")
		if len(olds) != len(news) {
			t.Fatalf("%s: %d documents became %d", m.file, len(olds), len(news))
		}
		// Each file's objects go to a namespace of their own (names repeat across files),
		// unless the document names one.
		ns := "capi-" + strings.TrimSuffix(strings.ReplaceAll(m.file, ".", "-"), "-yaml")
		if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = kube.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{}) })
		for j := range olds {
			old, neu := olds[j], news[j]
			if old.obj == nil {
				if old.text != neu.text {
					t.Errorf("%s document %d (not Cluster API's) changed:\n%s", m.file, j+1, cmp.Diff(old.text, neu.text))
				}
				continue
			}
			what := m.file + ": " + old.obj.GetKind() + " " + old.obj.GetName()
			if neu.obj == nil || neu.obj.GetAPIVersion() != "cluster.x-k8s.io/v1beta2" {
				t.Errorf("%s: not written at v1beta2:\n%s", what, neu.text)
				continue
			}
			for _, line := range strings.Split(old.text, "\n") {
				if c := strings.TrimSpace(line); strings.HasPrefix(c, "#") && !strings.Contains(neu.text, c) &&
					!strings.Contains(got.stdout, "comment dropped with its field (the conversion removed it): "+c) {
					t.Errorf("%s: comment %q lost", what, c)
				}
			}
			written[m.file]++
			res := plural[old.obj.GetKind()]
			gvr := func(v string) dynamic.ResourceInterface {
				namespace := ns
				if n := old.obj.GetNamespace(); n != "" {
					namespace = n
				}
				return dyn.Resource(schema.GroupVersionResource{Group: "cluster.x-k8s.io", Version: v, Resource: res}).Namespace(namespace)
			}
			agreesWithServer(t, ctx, what, gvr, "v1beta1", "v1beta2", old.obj, neu.obj)
		}
	}
	for _, f := range []string{"cluster-with-kcp.yaml", "cluster-with-topology.yaml", "clusterclass-quick-start.yaml", "clusterclass-quick-start-runtimesdk-v1beta1.yaml"} {
		if written[f] != 1 {
			t.Errorf("%s: %d Cluster API object written, want 1", f, written[f])
		}
	}
	t.Logf("written: %v", written)
}

// agreesWithServer checks one object convert --write wrote (written, at version to) on the
// real API server: a strict server-side dry-run create accepts it, and it equals (spec, labels,
// annotations) what the API server itself returns when the original (orig, at version from)
// is created and read at to. res gives the namespaced resource at a version.
func agreesWithServer(t *testing.T, ctx context.Context, what string, res func(version string) dynamic.ResourceInterface, from, to string, orig, written *unstructured.Unstructured) {
	t.Helper()
	accepted, err := res(to).Create(ctx, written, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}, FieldValidation: "Strict"})
	if err != nil {
		t.Errorf("%s: the API server rejects what --write wrote: %v", what, err)
		return
	}
	if _, err := res(from).Create(ctx, orig, metav1.CreateOptions{}); err != nil {
		t.Errorf("%s: creating the original at %s: %v", what, from, err)
		return
	}
	name := orig.GetName()
	t.Cleanup(func() { _ = res(from).Delete(context.Background(), name, metav1.DeleteOptions{}) })
	server, err := res(to).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Errorf("%s: reading the original at %s: %v", what, to, err)
		return
	}
	for _, field := range [][]string{{"spec"}, {"metadata", "labels"}, {"metadata", "annotations"}} {
		a, _, _ := unstructured.NestedFieldNoCopy(server.Object, field...)
		b, _, _ := unstructured.NestedFieldNoCopy(accepted.Object, field...)
		if d := cmp.Diff(a, b); d != "" {
			t.Errorf("%s: .%s differs from the API server's own conversion (-server +written):\n%s", what, strings.Join(field, "."), d)
		}
	}
}
