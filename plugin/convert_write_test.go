package plugin

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/dynamic"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/crdver/kubectl-crdver/internal/testwebhook"
)

const cronTabManifest = `# CronTabs of the backup team. Keep this comment.
apiVersion: v1
kind: ConfigMap   # not a CronTab: byte-identical
metadata:
  name: settings
data:
  a: "1"
---
# the nightly backup
apiVersion: stable.example.com/v1beta1
kind: CronTab
metadata:
  name: nightly-backup
  namespace: default
spec:
  cronSpec: "0 3 * * *"   # 03:00 UTC
  image: backup:1.2
  hostPort: "db.example.com:5432"
---
apiVersion: stable.example.com/v1
kind: CronTab   # already at v1
metadata:
  name: done
  namespace: default
spec:
  cronSpec: "0 4 * * *"
  image: done:1
  host: done.example.com
`

// convert --write through the repository's test conversion webhook (real HTTPS on loopback):
// the CronTab is converted (hostPort split into host and port by the webhook) with its
// comments; the other documents stay byte-identical; a webhook that loses the port on the
// way back leaves the file untouched, exit 1.
func TestConvertWriteWebhook(t *testing.T) {
	srv := testwebhook.StartForTest(t, testwebhook.Options{})
	crdFile := writeCRD(t, webhookCRD(t, srv, ""))
	dir := t.TempDir()
	file := filepath.Join(dir, "crontabs.yaml")
	if err := os.WriteFile(file, []byte(cronTabManifest), 0o600); err != nil {
		t.Fatal(err)
	}
	read := func() string {
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}

	srv.Set(testwebhook.Lossy)
	got := run(t, "", "convert", "--crd-file", crdFile, "--to", "v1", "-f", dir, "--write")
	srv.Set(testwebhook.Good)
	if got.code != 1 || read() != cronTabManifest {
		t.Fatalf("lossy webhook: exit %d (want 1), file changed: %v\n%s%s", got.code, read() != cronTabManifest, got.stdout, got.stderr)
	}
	mustContain(t, "stdout", got.stdout, "not converted: not proven", "round-trip")

	got = run(t, "", "convert", "--crd-file", crdFile, "--to", "v1", "-f", dir, "--write", "--dry-run")
	if got.code != 0 || read() != cronTabManifest {
		t.Fatalf("dry run: exit %d, file changed: %v\n%s%s", got.code, read() != cronTabManifest, got.stdout, got.stderr)
	}
	mustContain(t, "stdout", got.stdout, "would write", "-apiVersion: stable.example.com/v1beta1", "+apiVersion: stable.example.com/v1", `-  hostPort: "db.example.com:5432"`)

	// A warning (a text/plain answer, as controller-runtime's conversion handler sends: the
	// API server decodes it as JSON anyway) does not stop the write unless --strict.
	srv.Set(testwebhook.WrongContentType)
	got = run(t, "", "convert", "--crd-file", crdFile, "--to", "v1", "-f", dir, "--write", "--strict")
	if got.code != 1 || read() != cronTabManifest {
		t.Fatalf("text/plain with --strict: exit %d (want 1), file changed: %v\n%s%s", got.code, read() != cronTabManifest, got.stdout, got.stderr)
	}
	mustContain(t, "stdout", got.stdout, "not converted: not proven", "content-type")
	got = run(t, "", "convert", "--crd-file", crdFile, "--to", "v1", "-f", dir, "--write")
	srv.Set(testwebhook.Good)
	if got.code != 0 || read() == cronTabManifest {
		t.Fatalf("text/plain: exit %d (want 0), file written: %v\n%s%s", got.code, read() != cronTabManifest, got.stdout, got.stderr)
	}
	mustContain(t, "stdout", got.stdout, "warning content-type")
	if err := os.WriteFile(file, []byte(cronTabManifest), 0o600); err != nil {
		t.Fatal(err)
	}

	got = run(t, "", "convert", "--crd-file", crdFile, "--to", "v1", "-f", dir, "--write")
	if got.code != 0 {
		t.Fatalf("write: exit %d\n%s%s", got.code, got.stdout, got.stderr)
	}
	out := read()
	docs := strings.Split(out, "\n---\n")
	want := strings.Split(cronTabManifest, "\n---\n")
	if len(docs) != 3 || docs[0] != want[0] || docs[2] != want[2] {
		t.Errorf("the ConfigMap and the v1 CronTab must be byte-identical; got\n%s", out)
	}
	mustContain(t, "converted CronTab", docs[1], "# the nightly backup\napiVersion: stable.example.com/v1\n", `cronSpec: "0 3 * * *" # 03:00 UTC`, "host: db.example.com", `port: "5432"`)
	if strings.Contains(docs[1], "hostPort") {
		t.Errorf("hostPort left in the converted CronTab:\n%s", docs[1])
	}
	if st, _ := os.Stat(file); st.Mode().Perm() != 0o600 {
		t.Errorf("mode %v, want 0600 kept", st.Mode().Perm())
	}

	got = run(t, "", "convert", "--crd-file", crdFile, "--to", "v1", "-f", dir, "--check")
	if got.code != 0 {
		t.Errorf("check after write: exit %d, want 0\n%s%s", got.code, got.stdout, got.stderr)
	}
}

// --check on the Gateway API manifests: exit 1 and every HTTPRoute below v1, as Markdown.
func TestConvertCheckMarkdown(t *testing.T) {
	crd := repoFile("testdata", "releases", "gateway-api", "v1.0.0", "gateway.networking.k8s.io_httproutes.yaml")
	got := run(t, "", "convert", "--crd-file", crd, "--to", "v1", "-f", repoFile("testdata", "manifests", "gateway-api"), "--check", "-o", "markdown")
	if got.code != 1 {
		t.Fatalf("exit %d, want 1\n%s%s", got.code, got.stdout, got.stderr)
	}
	mustContain(t, "stdout", got.stdout, "### httproutes.gateway.networking.k8s.io: 2 object(s) still at a version other than `v1`",
		"| 11 | HTTPRoute | `foo-route` | `v1beta1` | `v1` | still at an old version |", "| 31 | HTTPRoute | `bar-route` | `v1beta1` | `v1` |")
	mustContain(t, "stderr", got.stderr, "convert them with --write")
}

// convert --write against the real API server: the Gateway API HTTPRoutes of
// testdata/manifests, v1beta1 -> v1 (strategy None), named by the cluster's CRD. Each converted
// object is accepted by the API server (server-side dry-run create at v1) and equals, once the
// server has defaulted it, what the API server itself returns when reading the original at v1.
func TestConvertWriteServerAgrees(t *testing.T) {
	crd := installCRDFile(t, repoFile("testdata", "releases", "gateway-api", "v1.0.0", "gateway.networking.k8s.io_httproutes.yaml"))
	dir := t.TempDir()
	orig, err := os.ReadFile(repoFile("testdata", "manifests", "gateway-api", "http-routing.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "http-routing.yaml")
	if err := os.WriteFile(file, orig, 0o644); err != nil {
		t.Fatal(err)
	}
	got := runCluster(t, "convert", crd.Name, "--to", "v1", "-f", dir, "--write")
	if got.code != 0 {
		t.Fatalf("exit %d\n%s%s", got.code, got.stdout, got.stderr)
	}
	written, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	dyn, err := dynamic.NewForConfig(quietConfig())
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	gvr := func(v string) dynamic.ResourceInterface {
		return dyn.Resource(schema.GroupVersionResource{Group: crd.Spec.Group, Version: v, Resource: crd.Spec.Names.Plural}).Namespace("default")
	}
	routes := func(data []byte) []*unstructured.Unstructured {
		var out []*unstructured.Unstructured
		for _, d := range strings.Split(string(data), "\n---") {
			var m map[string]any
			if err := sigsyaml.Unmarshal([]byte(d), &m); err != nil {
				t.Fatal(err)
			}
			if m["kind"] == "HTTPRoute" {
				out = append(out, &unstructured.Unstructured{Object: m})
			}
		}
		return out
	}
	before, after := routes(orig), routes(written)
	if len(before) != 2 || len(after) != 2 {
		t.Fatalf("%d and %d HTTPRoutes, want 2 and 2", len(before), len(after))
	}
	for i := range before {
		if v := after[i].GetAPIVersion(); v != "gateway.networking.k8s.io/v1" {
			t.Fatalf("%s: apiVersion %s after --write", after[i].GetName(), v)
		}
		dry, err := gvr("v1").Create(ctx, after[i], metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if err != nil {
			t.Fatalf("%s: the API server rejects the converted object: %v", after[i].GetName(), err)
		}
		if _, err := gvr("v1beta1").Create(ctx, before[i], metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		name := before[i].GetName()
		t.Cleanup(func() { _ = gvr("v1beta1").Delete(context.Background(), name, metav1.DeleteOptions{}) })
		read, err := gvr("v1").Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if d := cmp.Diff(read.Object["spec"], dry.Object["spec"]); d != "" {
			t.Errorf("%s: the converted spec differs from the API server's own conversion (-server +written):\n%s", name, d)
		}
		if read.GetAPIVersion() != dry.GetAPIVersion() || read.GetKind() != dry.GetKind() {
			t.Errorf("%s: %s %s, the server reads %s %s", name, dry.GetAPIVersion(), dry.GetKind(), read.GetAPIVersion(), read.GetKind())
		}
	}
}

// Ctrl-C while a big file's result is listed (-o yaml reads it back object by object from its
// spill): the listing stops at its next write, exit 3, and the message says that file was done
// and the files after it left as they were. The interrupt comes from stdout's first write, so
// the file is written by then; without the stop the whole listing (megabytes) is printed.
func TestConvertWriteInterruptedWhileListing(t *testing.T) {
	dir := t.TempDir()
	var b strings.Builder
	for i := range 8000 {
		fmt.Fprintf(&b, "---\napiVersion: stable.example.com/v1beta1\nkind: CronTab\nmetadata:\n  name: ct-%05d\n  namespace: default\nspec:\n  cronSpec: \"*/5 * * * *\"\n  image: img:%d\n  replicas: 1\n", i, i)
	}
	first, second := filepath.Join(dir, "a.yaml"), filepath.Join(dir, "b.yaml")
	for _, p := range []string{first, second} {
		if err := os.WriteFile(p, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	out := &cancelOnWrite{cancel: cancel}
	errOut := &bytes.Buffer{}
	root := NewRootCmd(genericiooptions.IOStreams{In: strings.NewReader(""), Out: out, ErrOut: errOut})
	root.SetArgs([]string{"convert", "--crd-file", td("crds", "crontab.yaml"), "--to", "v1", "-f", dir, "--write", "-o", "yaml", "--kube-version", "1.34", "-q"})
	err := root.ExecuteContext(ctx)
	if ExitCode(err) != 3 || !strings.Contains(ErrorLine(err), "while the result of "+first+" was printed (that file was done); 1 file rewritten") {
		t.Fatalf("exit %d, error %q; want 3 and the listing of %s interrupted", ExitCode(err), ErrorLine(err), first)
	}
	// The first file's listing alone is megabytes (8,000 objects); what was printed is its
	// first write and the report's end.
	if out.Len() > 64<<10 {
		t.Errorf("%d bytes printed after Ctrl-C; want the listing stopped", out.Len())
	}
	a, err := os.ReadFile(first)
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(a), "apiVersion: stable.example.com/v1\n"); n != 8000 {
		t.Errorf("%s: %d objects at v1, want all 8000 (the file was done before its listing)", first, n)
	}
	if got, _ := os.ReadFile(second); string(got) != b.String() {
		t.Errorf("%s was changed; want it left as it was", second)
	}
}

// cancelOnWrite is stdout that ends the run's context at its first write.
type cancelOnWrite struct {
	bytes.Buffer
	cancel func()
}

func (c *cancelOnWrite) Write(p []byte) (int, error) {
	c.cancel()
	return c.Buffer.Write(p)
}
