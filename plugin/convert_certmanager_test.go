package plugin

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/crdver/kubectl-crdver/internal/testenv"
)

// certManagerManifests are cert-manager's own test manifests (testdata/releases/cert-manager/
// samples, from v1.5.5's test/integration/ctl and test/fixtures): v1alpha2 Certificates and
// Issuers (one file with a comment, one with three documents), a v1alpha3 Certificate, and a
// file already at v1 under a licence header. "mixed.yaml" is composed here: a ConfigMap
// document, then resource2.yaml's text, then a Secret, so that a converted file also holds
// documents of other kinds.
var certManagerManifests = []string{
	"resource1.yaml", "resource2.yaml", "resource_with_organization_v1alpha2.yaml",
	"create_cr_issuer.yaml", "create_cr_v1alpha3_cert_with_ns1.yaml", "cert-manager-resources.yaml",
}

const certManagerMixedHead = `# composed by the test: a document of another kind first
apiVersion: v1
kind: ConfigMap
metadata:
  name: not-cert-manager
  namespace: sandbox
data:
  apiVersion: cert-manager.io/v1alpha2 # a string value, not an object
`

const certManagerMixedTail = `apiVersion: v1
kind: Secret
metadata:
  name: ca-key-pair
  namespace: sandbox
type: Opaque
`

// certManagerExpected maps a sample file to cert-manager's own expected v1 output of `cmctl
// convert` for it (testdata/convert/cert-manager-v1, from the v1.6.3 module zip).
var certManagerExpected = map[string]string{
	"resource1.yaml": "resource1_v1.yaml",
	"resource2.yaml": "resource2_v1.yaml",
	"resource_with_organization_v1alpha2.yaml": "resource_with_organization_v1.yaml",
}

// certManagerExpectedObjects reads cert-manager's expected cmctl output (one object or a List).
func certManagerExpectedObjects(t *testing.T, file string) []map[string]any {
	t.Helper()
	b, err := os.ReadFile(td("convert", "cert-manager-v1", file))
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := sigsyaml.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	if m["kind"] != "List" {
		return []map[string]any{m}
	}
	var out []map[string]any
	for _, it := range m["items"].([]any) {
		out = append(out, it.(map[string]any))
	}
	return out
}

// convert --write --to v1 on cert-manager's own v1alpha2 (and v1alpha3) test manifests,
// through cert-manager's real webhook (built from github.com/jetstack/cert-manager v1.6.3, the
// last release whose webhook converts v1alpha2), with the CRDs of v1.5.5 (the last release
// that serves v1alpha2: where a user converts their manifests before 1.6 stops serving it),
// named by --crd-file. cert-manager's round trip adds empty values (status: {}, and
// spec.subject: {} where spec.organization was set): additions, not losses, so --write lists
// them and writes every file with an old object; in each, only the cert-manager objects change, every other document and every comment stay byte-identical;
// the file already at v1 is not touched. Each converted object equals cert-manager's own
// expected `cmctl convert` output for the same input (its spec and identity), the API server
// accepts it (server-side dry-run create at v1, strict field validation), and it equals what
// the API server itself returns when the original is created at its version and read at v1
// (through the same webhook).
func TestConvertWriteCertManager(t *testing.T) {
	hook := testenv.StartCertManagerWebhook(t, "", env.Kubeconfig)
	// It answers ConversionReview v1 alone: a v1beta1 review (what cert-manager v0.16.1's CRDs
	// ask for, conversionReviewVersions [v1beta1]) gets a 500.
	if code, body, err := hook.Post([]byte(`{"apiVersion":"apiextensions.k8s.io/v1beta1","kind":"ConversionReview","request":{"uid":"1","desiredAPIVersion":"cert-manager.io/v1","objects":[]}}`)); err != nil || code != http.StatusInternalServerError {
		t.Errorf("a ConversionReview v1beta1: HTTP %d %s (%v), want 500", code, body, err)
	}
	files, err := filepath.Glob(td("releases", "cert-manager", "v1.5.5", "crd-*.yaml"))
	if err != nil || len(files) != 3 {
		t.Fatalf("cert-manager v1.5.5 CRDs: %v %v", files, err)
	}
	plural := map[string]string{}
	var docs []string
	for _, f := range files {
		for _, crd := range testenv.ReadCRDs(t, f) {
			hook.PointCRD(crd)
			docs = append(docs, string(crdManifest(t, crd)))
			registerCRD(t, crd)
			plural[crd.Spec.Names.Kind] = crd.Spec.Names.Plural
		}
	}
	crdFile := filepath.Join(t.TempDir(), "cert-manager-v1.5.5-crds.yaml")
	if err := os.WriteFile(crdFile, []byte(strings.Join(docs, "---\n")), 0o600); err != nil {
		t.Fatal(err)
	}

	dir := t.TempDir()
	before := map[string]string{}
	for _, f := range certManagerManifests {
		b, err := os.ReadFile(td("releases", "cert-manager", "samples", f))
		if err != nil {
			t.Fatal(err)
		}
		before[f] = string(b)
	}
	before["mixed.yaml"] = certManagerMixedHead + "---\n" + strings.TrimPrefix(strings.TrimSuffix(before["resource2.yaml"], "---\n"), "---\n") + "---\n" + certManagerMixedTail
	for f, text := range before {
		if err := os.WriteFile(filepath.Join(dir, f), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}

	unchanged := func(what string) {
		t.Helper()
		for f, text := range before {
			if b, _ := os.ReadFile(filepath.Join(dir, f)); string(b) != text {
				t.Fatalf("%s wrote %s", what, f)
			}
		}
	}
	// cert-manager's round trip (v1alpha2 -> v1 -> v1alpha2) is not the identity: its typed
	// conversion adds an empty status to every object, and an empty spec.subject to a
	// Certificate that had spec.organization. Nothing is lost, so without --allow-data-loss
	// the files are written, each addition listed as no loss.
	dry := run(t, "", "convert", "--crd-file", crdFile, "--to", "v1", "-f", dir, "--write", "--dry-run")
	t.Logf("convert --write --dry-run: exit %d\n%s%s", dry.code, dry.stdout, dry.stderr)
	unchanged("--dry-run")
	got := run(t, "", "convert", "--crd-file", crdFile, "--to", "v1", "-f", dir, "--write")
	t.Logf("convert --write: exit %d\n%s%s", got.code, got.stdout, got.stderr)
	if got.code != 0 {
		t.Fatalf("convert --write --to v1: exit %d, want 0 (what the round trip adds is not a loss)", got.code)
	}
	mustContain(t, "stdout", got.stdout, "13 object(s) in the files, 3 already at v1, 10 converted",
		"resource1.yaml:1 sandbox/ca-issuer: the round trip adds or normalises (not a loss): .status added: {} appeared after the round trip",
		".spec.subject added: {} appeared after the round trip",
		// cert-manager's webhook sets no Content-Type (Go's server says text/plain).
		`warning content-type: Content-Type "text/plain; charset=utf-8"`)
	for _, line := range strings.Split(got.stdout, "\n") {
		if strings.Contains(line, "round-trip") || strings.Contains(line, "not converted") {
			t.Errorf("a round-trip difference or a file not converted: %s", line)
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
	converted, untouched, emptyStatus := 0, 0, 0
	for f, text := range before {
		b, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			t.Fatal(err)
		}
		if f == "cert-manager-resources.yaml" {
			if string(b) != text {
				t.Errorf("%s (every object already at v1) was written:\n%s", f, cmp.Diff(text, string(b)))
			}
			continue
		}
		if string(b) == text {
			t.Errorf("%s (objects at v1alpha2/v1alpha3) was not written", f)
			continue
		}
		for _, line := range strings.Split(text, "\n") {
			if c := strings.TrimSpace(line); strings.HasPrefix(c, "#") && !strings.Contains(string(b), line) {
				t.Errorf("%s: comment line %q lost or moved", f, line)
			}
		}
		olds, news := splitDocs(t, text, "cert-manager.io"), splitDocs(t, string(b), "cert-manager.io")
		if len(olds) != len(news) {
			t.Fatalf("%s: %d documents became %d", f, len(olds), len(news))
		}
		// The objects go to a namespace per file (names and namespaces repeat across files).
		ns := "cm-" + strings.ReplaceAll(strings.TrimSuffix(strings.ReplaceAll(f, "_", "-"), ".yaml"), ".", "-")
		if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = kube.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{}) })
		var written []map[string]any
		for j := range olds {
			old, neu := olds[j], news[j]
			if old.obj == nil {
				if old.text != neu.text {
					t.Errorf("%s document %d (not cert-manager's) changed:\n%s", f, j+1, cmp.Diff(old.text, neu.text))
				}
				if strings.TrimSpace(old.text) != "" {
					untouched++
				}
				continue
			}
			what := f + ": " + old.obj.GetKind() + " " + old.obj.GetName()
			if neu.obj == nil || neu.obj.GetAPIVersion() != "cert-manager.io/v1" || neu.obj.GetKind() != old.obj.GetKind() ||
				neu.obj.GetName() != old.obj.GetName() || neu.obj.GetNamespace() != old.obj.GetNamespace() {
				t.Errorf("%s: not written as the same object at v1:\n%s", what, neu.text)
				continue
			}
			converted++
			written = append(written, neu.obj.Object)
			if st, ok := neu.obj.Object["status"].(map[string]any); ok && len(st) == 0 {
				emptyStatus++
			}
			oldVersion := strings.TrimPrefix(old.obj.GetAPIVersion(), "cert-manager.io/")
			gvr := func(v string) dynamic.ResourceInterface {
				return dyn.Resource(schema.GroupVersionResource{Group: "cert-manager.io", Version: v, Resource: plural[old.obj.GetKind()]}).Namespace(ns)
			}
			in := neu.obj.DeepCopy()
			in.SetNamespace(ns)
			orig := old.obj.DeepCopy()
			orig.SetNamespace(ns)
			agreesWithServer(t, ctx, what, gvr, oldVersion, "v1", orig, in)
		}
		// cert-manager's own expected output for the same input (cmctl convert --output-version
		// cert-manager.io/v1 in its integration tests): same objects, same spec.
		if exp, ok := certManagerExpected[f]; ok {
			want := certManagerExpectedObjects(t, exp)
			if len(want) != len(written) {
				t.Errorf("%s: %d objects written, cert-manager's %s has %d", f, len(written), exp, len(want))
				continue
			}
			for i := range want {
				for _, field := range [][]string{{"apiVersion"}, {"kind"}, {"metadata", "name"}, {"metadata", "namespace"}, {"spec"}} {
					a, _, _ := unstructured.NestedFieldNoCopy(want[i], field...)
					b, _, _ := unstructured.NestedFieldNoCopy(written[i], field...)
					if d := cmp.Diff(a, b); d != "" {
						t.Errorf("%s object %d: .%s differs from cert-manager's own %s (-cmctl +written):\n%s", f, i+1, strings.Join(field, "."), exp, d)
					}
				}
			}
		}
	}
	if converted != 10 || untouched != 2 {
		t.Errorf("%d cert-manager objects converted (want 10: 1+3+1+1+1 and mixed.yaml's 3), %d other documents kept (want mixed.yaml's 2)", converted, untouched)
	}
	// The empty status cert-manager's conversion adds is not written into manifests that had none.
	if emptyStatus != 0 {
		t.Errorf("%d of %d converted objects written with status: {} (the manifests had none)", emptyStatus, converted)
	}
	// Run again: every object is at v1 now, nothing is written.
	again := run(t, "", "convert", "--crd-file", crdFile, "--to", "v1", "-f", dir, "--write")
	if again.code != 0 {
		t.Errorf("convert --write again: exit %d\n%s%s", again.code, again.stdout, again.stderr)
	}
	check := run(t, "", "convert", "--crd-file", crdFile, "--to", "v1", "-f", dir, "--check")
	if check.code != 0 {
		t.Errorf("convert --check after --write: exit %d\n%s%s", check.code, check.stdout, check.stderr)
	}
}
