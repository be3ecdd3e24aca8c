package plugin

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/crdver/kubectl-crdver/crdschema"
	"github.com/crdver/kubectl-crdver/crdsource"
)

// invalidCRDs are CRDs the API server refuses, with what the one-line error must say.
var invalidCRDs = []struct {
	file, name, want string
}{
	{"two-storage.yaml", "gears.invalid.example.com", "spec.versions: Invalid value: must have exactly one version marked as storage version"},
	{"bad-name.yaml", "gear.invalid.example.com", `metadata.name: Invalid value: "gear.invalid.example.com": must be spec.names.plural+"."+spec.group`},
	{"bad-cel.yaml", "gears.invalid.example.com", "x-kubernetes-validations[0].rule: Invalid value: compilation failed: ERROR: <input>:1:11: found no matching overload for '_>_' applied to '(int, string)'"},
}

// TestInvalidCRDFilesRefused: every command that reads CRDs from files refuses a CRD the API
// server would refuse, with its messages, naming the file, the document and the CRD (exit 2).
func TestInvalidCRDFilesRefused(t *testing.T) {
	for _, tc := range invalidCRDs {
		file := td("invalid-crds", tc.file)
		for _, args := range [][]string{
			{"versions", "-f", file},
			{"versions", "--all", "-f", file},
			{"explain", "--crd-file", file},
			{"preview", "-f", td("invalid-crds", "gear.yaml"), "--crd-file", file},
			// (a CRD in the objects' input: see TestPreviewPipeline)
		} {
			t.Run(tc.file+" "+args[0], func(t *testing.T) {
				r := run(t, "", args...)
				if r.code != ExitUsage {
					t.Errorf("exit %d, want 2; stdout:\n%s", r.code, r.stdout)
				}
				lines := strings.Split(strings.TrimSpace(r.stderr), "\n")
				if len(lines) != 1 {
					t.Errorf("want one error line, got %q", r.stderr)
				}
				mustContain(t, "stderr", r.stderr, "error: "+file+" (document 1): CustomResourceDefinition "+tc.name+" is invalid", tc.want)
				if strings.Contains(r.stdout, "verdict") {
					t.Errorf("objects were previewed with an invalid CRD:\n%s", r.stdout)
				}
			})
		}
	}
}

// TestInvalidCRDsMatchAPIServer: the real API server refuses each of these CRDs with the same
// messages.
func TestInvalidCRDsMatchAPIServer(t *testing.T) {
	c, err := apiextensionsclient.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range invalidCRDs {
		t.Run(tc.file, func(t *testing.T) {
			docs, err := ReadDocuments([]string{td("invalid-crds", tc.file)}, nil)
			if err != nil {
				t.Fatal(err)
			}
			crd, err := crdsource.DecodeOne(docs[0])
			if err != nil {
				t.Fatal(err)
			}
			ours, err := crdschema.Validate(context.Background(), crd)
			if err != nil || len(ours) == 0 {
				t.Fatalf("crdschema.Validate: %v, %d errors; want errors", err, len(ours))
			}
			_, err = c.ApiextensionsV1().CustomResourceDefinitions().Create(context.Background(), crd, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
			if err == nil {
				t.Fatal("the API server accepted the CRD")
			}
			for _, e := range ours {
				if !strings.Contains(err.Error(), e.Field+": "+e.Type.String()) || !strings.Contains(err.Error(), e.Detail) {
					t.Errorf("the API server's error lacks %q:\n%v", crdschema.FieldErrorText(e), err)
				}
			}
		})
	}
}

// TestValidCRDFilesLoad: every CRD of the repository's testdata and of the corpus passes the
// validation (the corpus is skipped when absent).
func TestValidCRDFilesLoad(t *testing.T) {
	dirs := []string{td("crds"), td("migrate"), td("explain")}
	corpus := filepath.Join("..", "..", "shared", "corpus", "crds")
	if _, err := os.Stat(corpus); err == nil {
		dirs = append(dirs, corpus)
	} else {
		t.Log("corpus (../shared/corpus/crds) absent: checking the repository's testdata only")
	}
	// One file at a time: a folder may define a CRD in several files (versions of one CRD),
	// which versions --all -f DIR rightly refuses.
	for _, dir := range dirs {
		files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
		if err != nil || len(files) == 0 {
			t.Fatalf("%s: no CRD files (%v)", dir, err)
		}
		t.Run(filepath.Base(dir), func(t *testing.T) {
			for _, f := range files {
				r := run(t, "", "versions", "--all", "-f", f, "-o", "json")
				if r.code != 0 {
					t.Errorf("versions --all -f %s: exit %d: %s", f, r.code, r.stderr)
				}
			}
		})
	}
}
