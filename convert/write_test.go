package convert

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	crdinfo "github.com/crdver/kubectl-crdver/crd"
)

func releaseCRD(t testing.TB, rel string) *apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "testdata", "releases", rel))
	if err != nil {
		t.Fatal(err)
	}
	crd, err := crdinfo.Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	return crd
}

// copyManifests copies testdata/manifests into a temporary directory.
func copyManifests(t *testing.T) string {
	t.Helper()
	dst := t.TempDir()
	src := filepath.Join("..", "testdata", "manifests")
	err := filepath.WalkDir(src, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), b, 0o640)
	})
	if err != nil {
		t.Fatal(err)
	}
	return dst
}

func readFile(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// Gateway API's HTTPRoutes v1beta1 -> v1 (strategy None): the file is rewritten with only the
// two apiVersion lines changed; the Helm template and the Kustomize patch are reported and
// left as they were.
func TestWriteGatewayAPINone(t *testing.T) {
	dir := copyManifests(t)
	crd := releaseCRD(t, "gateway-api/v1.0.0/gateway.networking.k8s.io_httproutes.yaml")
	before := map[string]string{}
	files, err := ExpandFiles([]string{dir})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		before[f] = readFile(t, f)
	}
	rep, err := Write(context.Background(), WriteOptions{Options: Options{CRD: crd, To: "v1"}, Files: []string{dir}})
	if err != nil {
		t.Fatal(err)
	}
	status := map[string]FileResult{}
	for _, f := range rep.Files {
		rel, _ := filepath.Rel(dir, f.Path)
		status[rel] = f
	}
	if s := status["gateway-api/http-routing.yaml"].Status; s != FileWritten {
		t.Fatalf("http-routing.yaml: status %q, want %q (report %+v)", s, FileWritten, rep.Files)
	}
	for _, rel := range []string{"helm/templates/httproute.yaml", "kustomize/route-hostname.yaml"} {
		f := status[rel]
		if f.Status != FileTemplate || len(f.Lines) != 1 || !strings.Contains(f.Lines[0], "gateway.networking.k8s.io/v1beta1") {
			t.Errorf("%s: %+v, want %q naming the v1beta1 line", rel, f, FileTemplate)
		}
	}
	if rep.Converted != 2 || rep.Problems() != 2 {
		t.Errorf("converted %d, problems %d; want 2 and 2 (the templates)", rep.Converted, rep.Problems())
	}
	for f, old := range before {
		got := readFile(t, f)
		if !strings.HasSuffix(f, "http-routing.yaml") {
			if got != old {
				t.Errorf("%s changed:\n%s", f, got)
			}
			continue
		}
		want := strings.ReplaceAll(old, "apiVersion: gateway.networking.k8s.io/v1beta1", "apiVersion: gateway.networking.k8s.io/v1")
		if got != want {
			t.Errorf("%s: only the apiVersion lines should change; got\n%s\ndiff:\n%s", f, got, unifiedDiff(f, []byte(want), []byte(got)))
		}
		if st, _ := os.Stat(f); st.Mode().Perm() != 0o640 {
			t.Errorf("%s: mode %v, want 0640 kept", f, st.Mode().Perm())
		}
	}
	// Converting again: nothing left to convert, nothing changes.
	rep, err = Check(context.Background(), WriteOptions{Options: Options{CRD: crd, To: "v1"}, Files: []string{filepath.Join(dir, "gateway-api")}})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Problems() != 0 || rep.AtTarget != 2 {
		t.Errorf("check after write: %d problem(s), %d at target; want 0 and 2", rep.Problems(), rep.AtTarget)
	}
}

// Strategy None where v1 has no hostPort: the API server would prune it, so the file is not
// written; with AllowDataLoss it is, hostPort is gone and listed as dropped, and the comment
// on the line before it stays.
func TestWriteAllowDataLoss(t *testing.T) {
	crd := loadCRD(t, "crontab.yaml")
	const text = "# backup\napiVersion: stable.example.com/v1beta1\nkind: CronTab\nmetadata:\n  name: b\n  namespace: default\nspec:\n  cronSpec: \"0 3 * * *\"\n  image: backup:1.2\n  # where to back up\n  hostPort: db:5432\n"
	file := filepath.Join(t.TempDir(), "b.yaml")
	if err := os.WriteFile(file, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	opts := WriteOptions{Options: Options{CRD: crd, To: "v1"}, Files: []string{file}}
	rep, err := Write(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	if got := readFile(t, file); got != text || rep.Files[0].Status != FileNotProven || len(rep.Files[0].Objects[0].Problems) == 0 {
		t.Fatalf("without AllowDataLoss: status %q, problems %v; file changed: %v", rep.Files[0].Status, rep.Files[0].Objects[0].Problems, got != text)
	}
	opts.AllowDataLoss = true
	if rep, err = Write(context.Background(), opts); err != nil {
		t.Fatal(err)
	}
	f := rep.Files[0]
	if f.Status != FileWrittenLoss || len(f.Objects[0].Dropped) == 0 || f.Objects[0].Dropped[0].Path != ".spec.hostPort" {
		t.Fatalf("with AllowDataLoss: %+v", f)
	}
	want := strings.Replace(strings.Replace(text, "v1beta1", "v1", 1), "  # where to back up\n  hostPort: db:5432\n", "", 1)
	if got := readFile(t, file); got != want {
		t.Logf("written:\n%s", got)
		if strings.Contains(got, "hostPort") || !strings.Contains(got, "# backup\napiVersion: stable.example.com/v1\n") {
			t.Errorf("hostPort kept or header comment lost:\n%s", got)
		}
	}
}

// TestGoTemplate: a "{{" YAML reads as structure, or that breaks the parse, makes a file a Go
// template; "{{" inside string values and comments (Cluster API's ClusterClass patches) does
// not.
func TestGoTemplate(t *testing.T) {
	for _, c := range []struct {
		name, text string
		want       bool
	}{
		{"helm value", "metadata:\n  name: {{ .Values.name }}\n", true},
		{"helm if", "{{- if .Values.x }}\napiVersion: v1\n{{- end }}\n", true},
		{"helm include", "spec:\n  b: {{ include \"x\" . | nindent 4 }}\n", true},
		{"helm toYaml", "spec:\n{{ toYaml .Values.x | indent 2 }}\n", true},
		{"quoted value", "spec:\n  template: \"{{ .cluster.name }}-md\"\n", false},
		{"plain value", "spec:\n  template: md-{{ .cluster.name }}\n", false},
		{"block value", "spec:\n  template: |\n    {{ .builtin.cluster.name }}\n", false},
		{"comment", "# {{ .name }} is filled in by the controller\nspec: {}\n", false},
		{"comment-only document", "spec: {}\n---\n# {{ x }}\n", false},
		{"one of two", "a: \"{{ x }}\"\n---\nb: {{ y }}\n", true},
		{"none", "a: b\n", false},
	} {
		path := filepath.Join(t.TempDir(), "manifest.yaml")
		if err := os.WriteFile(path, []byte(c.text), 0o600); err != nil {
			t.Fatal(err)
		}
		template, _, err := scanManifest(context.Background(), path)
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.HasPrefix(template, "Go template"); got != c.want {
			t.Errorf("%s: a Go template = %v (%q), want %v", c.name, got, template, c.want)
		}
	}
}

// TestOldVersionLines: a group is matched as a whole name, never as the end of a longer one.
func TestOldVersionLines(t *testing.T) {
	data := []byte("apiVersion: cluster.x-k8s.io/v1beta1\n  apiVersion: infrastructure.cluster.x-k8s.io/v1beta1\napiVersion: cluster.x-k8s.io/v1beta2\nx: [cluster.x-k8s.io/v1alpha4]\n")
	got := strings.Join(oldVersionLines(data, "cluster.x-k8s.io", "v1beta2"), "|")
	want := "1: apiVersion: cluster.x-k8s.io/v1beta1|4: x: [cluster.x-k8s.io/v1alpha4]"
	if got != want {
		t.Errorf("oldVersionLines = %q, want %q", got, want)
	}
}
