package plugin

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var helmStream = td("pipeline", "helm-template.yaml")

// Golden files for -o name and --only-rejected, on a helm template stream through stdin.
func TestPreviewPipelineGolden(t *testing.T) {
	runGoldenCases(t, []goldenCase{
		{"preview-pipeline-name.txt", []string{"preview", "-f", helmStream, "-o", "name"}, ExitProblems},
		{"preview-pipeline-only-rejected.txt", []string{"preview", "-f", helmStream, "--only-rejected"}, ExitProblems},
		{"preview-pipeline-only-rejected.json", []string{"preview", "-f", helmStream, "--only-rejected", "-o", "json"}, ExitProblems},
		{"preview-pipeline-only-rejected.yaml", []string{"preview", "-f", helmStream, "--only-rejected", "-o", "yaml"}, ExitProblems},
	})
}

// TestPreviewPipeline: `helm template … | kubectl crdver preview -f -` — the CRD in the stream
// is used for the objects after it, other kinds are skipped (counted, listed with -v), with no
// cluster at all; --strict-kinds makes them errors.
func TestPreviewPipeline(t *testing.T) {
	stream := readTestFile(t, helmStream)
	noCluster := []string{"--kubeconfig", filepath.Join(t.TempDir(), "no-such-kubeconfig")}
	want := run(t, "", "preview", "-f", td("preview", "widgets.yaml"), "--crd-file", td("crds", "widget.yaml"))
	r := run(t, stream, append([]string{"preview", "-f", "-"}, noCluster...)...)
	if r.code != ExitProblems {
		t.Fatalf("exit %d, want 1: %s", r.code, r.stderr)
	}
	// The same results as with the objects and the CRD in separate files, sources aside.
	strip := func(s string) string {
		var out []string
		for _, l := range strings.Split(s, "\n") {
			if strings.HasPrefix(l, "# ") {
				l = l[strings.Index(l, "): "):]
			}
			out = append(out, l)
		}
		return strings.Join(out, "\n")
	}
	if strip(r.stdout) != strip(want.stdout) {
		t.Errorf("stdout differs from the preview with --crd-file:\n%s\nwant:\n%s", r.stdout, want.stdout)
	}
	// Past the progress display's last line (preview: N/? objects …), exactly these lines.
	var rest []string
	for _, l := range strings.SplitAfter(r.stderr, "\n") {
		if l != "" && !strings.HasPrefix(l, "preview: ") {
			rest = append(rest, l)
		}
	}
	// Without --crd-file preview tries the cluster's version; there is none, so the newest.
	const noteStart = "note: judged as Kubernetes " + "1.37, the newest known: the cluster's version could not be read ("
	if len(rest) != 3 || !strings.HasPrefix(rest[1], noteStart) || !strings.HasSuffix(rest[1], "); choose with --kube-version\n") ||
		rest[0]+rest[2] != "skipped 4 documents: no CustomResourceDefinition in the input or the cluster defines their kind (-v lists them)\nerror: 2 of 3 objects would be rejected by the API server\n" {
		t.Errorf("stderr = %q", r.stderr)
	}
	r = run(t, stream, append([]string{"preview", "-f", "-", "-v", "-o", "name"}, noCluster...)...)
	mustContain(t, "stderr", r.stderr, "  stdin (document 3): apps/v1 Deployment widgets/widget-controller\n", "  stdin (document 8): networking.k8s.io/v1 Ingress widgets/widgets\n")
	if n := strings.Count(r.stdout, "\n"); n != 3 {
		t.Errorf("-o name: %d lines, want one per object (3):\n%s", n, r.stdout)
	}
	r = run(t, stream, append([]string{"preview", "-f", "-", "--strict-kinds"}, noCluster...)...)
	if r.code != ExitUsage || !strings.Contains(r.stderr, "error: stdin (document 1): no CustomResourceDefinition defines v1 Namespace, in the input or in the cluster (--strict-kinds)") {
		t.Errorf("--strict-kinds: exit %d, %q", r.code, r.stderr)
	}
	// A kind that could be a custom resource, with no CRD in the input and no cluster: exit 3,
	// saying how to work offline.
	unknown := "apiVersion: monitoring.coreos.com/v1\nkind: ServiceMonitor\nmetadata: {name: m}\n---\n" + stream
	r = run(t, unknown, append([]string{"preview", "-f", "-"}, noCluster...)...)
	if r.code != ExitUnavailable || !strings.Contains(r.stderr, "stdin (document 1): monitoring.coreos.com/v1 ServiceMonitor: no CustomResourceDefinition for it in the input") || !strings.Contains(r.stderr, "--crd-file") {
		t.Errorf("unknown kind without a cluster: exit %d, %q", r.code, r.stderr)
	}
	// With --crd-file the run is offline: the unknown kind is skipped.
	r = run(t, unknown, "preview", "-f", "-", "--crd-file", td("crds", "crontab.yaml"))
	if r.code != ExitProblems || !strings.Contains(r.stderr, "skipped 5 documents") {
		t.Errorf("unknown kind with --crd-file: exit %d, %q", r.code, r.stderr)
	}
}

// TestPreviewBundle: one file holding a CRD and its objects works as -f alone, and as both
// -f and --crd-file.
func TestPreviewBundle(t *testing.T) {
	for _, args := range [][]string{
		{"preview", "-f", helmStream},
		{"preview", "-f", helmStream, "--crd-file", helmStream},
	} {
		r := run(t, "", args...)
		if r.code != ExitProblems || !strings.Contains(r.stdout, "3 objects: 1 accepted, 2 rejected") {
			t.Errorf("%v: exit %d\n%s%s", args, r.code, r.stdout, r.stderr)
		}
	}
	// A CRD defined differently in --crd-file and in the input is refused, naming both.
	r := run(t, "", "preview", "-f", td("invalid-crds", "gear.yaml"), "--crd-file", td("crds", "widget.yaml"), "-f", helmStream, "--crd-file", writeTemp(t, "other-widget.yaml", strings.Replace(readTestFile(t, td("crds", "widget.yaml")), "served: true", "served: false", 1)))
	if r.code != ExitUsage || !strings.Contains(r.stderr, "widgets.preview.example.com is defined 2 times, differently, in "+td("crds", "widget.yaml")+" (document 1) and ") {
		t.Errorf("two different definitions: exit %d, %q", r.code, r.stderr)
	}
	// An invalid CRD in the input is refused like one from --crd-file.
	r = run(t, "", "preview", "-f", td("invalid-crds", "bad-cel.yaml")+","+td("invalid-crds", "gear.yaml"))
	if r.code != ExitUsage || !strings.Contains(r.stderr, "bad-cel.yaml (document 1): CustomResourceDefinition gears.invalid.example.com is invalid") {
		t.Errorf("invalid CRD in the input: exit %d, %q", r.code, r.stderr)
	}
}

// TestPreviewRecursiveAndURL: directories recurse only with -R, and -f URL reads over HTTP.
func TestPreviewRecursiveAndURL(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "base", "widgets"), 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(dir, "crd.yaml"), readTestFile(t, td("crds", "widget.yaml")))
	writeFile(t, filepath.Join(dir, "base", "widgets", "widgets.yaml"), readTestFile(t, td("preview", "widgets.yaml")))
	r := run(t, "", "preview", "-f", dir)
	if r.code != ExitUsage || !strings.Contains(r.stderr, "only CustomResourceDefinitions, no objects to preview") {
		t.Errorf("without -R: exit %d, %q", r.code, r.stderr)
	}
	r = run(t, "", "preview", "-f", dir, "-R")
	if r.code != ExitProblems || !strings.Contains(r.stdout, "3 objects: 1 accepted, 2 rejected") {
		t.Errorf("-R: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	srv := httptest.NewServer(http.FileServer(http.Dir(filepath.Dir(helmStream))))
	defer srv.Close()
	r = run(t, "", "preview", "-f", srv.URL+"/helm-template.yaml", "-o", "name")
	if r.code != ExitProblems || strings.Count(r.stdout, "\n") != 3 || !strings.Contains(r.stdout, `source="`+srv.URL+`/helm-template.yaml (document 5)"`) {
		t.Errorf("-f URL: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}

func writeTemp(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	writeFile(t, p, content)
	return p
}
