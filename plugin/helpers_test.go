package plugin

import (
	"context"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	crdinfo "github.com/crdver/kubectl-crdver/crd"
	goldenfile "github.com/crdver/kubectl-crdver/internal/golden"
	"github.com/crdver/kubectl-crdver/internal/testenv"
)

// env is the package's real kube-apiserver + etcd.
var env *testenv.Env

func TestMain(m *testing.M) {
	flag.Parse()
	testenv.Main(m, &env, testenv.Options{})
}

// result is what one run of the root command produced.
type result struct {
	stdout, stderr string
	code           int
}

// run runs a fresh root command with args, as main does, and returns its output and exit code.
func run(t testing.TB, stdin string, args ...string) result {
	t.Helper()
	streams, in, out, errOut := genericiooptions.NewTestIOStreams()
	in.WriteString(stdin)
	root := NewRootCmd(streams)
	root.SetArgs(args)
	err := root.ExecuteContext(context.Background())
	if err != nil {
		errOut.WriteString(ErrorLine(err) + "\n")
	}
	return result{stdout: out.String(), stderr: errOut.String(), code: ExitCode(err)}
}

// runCluster runs the command against the test API server.
func runCluster(t testing.TB, args ...string) result {
	t.Helper()
	return run(t, "", append(args, "--kubeconfig", env.Kubeconfig)...)
}

// golden compares got with testdata/golden/name, or rewrites the file with -update.
func golden(t *testing.T, name, got string) {
	t.Helper()
	goldenfile.Check(t, name, got)
}

func mustContain(t *testing.T, what, got string, wants ...string) {
	t.Helper()
	for _, w := range wants {
		if !strings.Contains(got, w) {
			t.Errorf("%s does not contain %q:\n%s", what, w, got)
		}
	}
}

// repoFile is a path from the repository root, for tests running in plugin/.
func repoFile(parts ...string) string {
	return filepath.Join(append([]string{".."}, parts...)...)
}

// registerCRD creates crd in the test API server (deleted at the end of the test).
func registerCRD(t *testing.T, crd *apiextensionsv1.CustomResourceDefinition) {
	t.Helper()
	ctx := context.Background()
	c := crd.DeepCopy()
	c.Status = apiextensionsv1.CustomResourceDefinitionStatus{} // storedVersions comes from the server
	c.ResourceVersion = ""
	if _, err := env.CreateCRD(ctx, c); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := env.DeleteCRD(context.Background(), crd.Name); err != nil {
			t.Errorf("deleting CRD %s: %v", crd.Name, err)
		}
	})
}

// installCRDFile decodes the (single) CRD of a testdata file and registers it in the test API
// server for the duration of the test.
func installCRDFile(t *testing.T, path string) *apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	crd, err := crdinfo.Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	registerCRD(t, crd)
	return crd
}

// td is a path under the repository's testdata folder.
func td(parts ...string) string {
	return repoFile(append([]string{"testdata"}, parts...)...)
}

// goldenCase is a command line, the exit code it must end with, and the golden file
// (testdata/golden/<golden>) that its standard output must equal.
type goldenCase struct {
	golden string
	args   []string
	code   int
}

// runGoldenCases runs each case as a subtest named after its golden file.
func runGoldenCases(t *testing.T, cases []goldenCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.golden, func(t *testing.T) {
			r := run(t, "", tc.args...)
			if r.code != tc.code {
				t.Errorf("exit code %d, want %d; stderr: %s", r.code, tc.code, r.stderr)
			}
			golden(t, tc.golden, r.stdout)
		})
	}
}
