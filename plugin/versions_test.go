package plugin

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/yaml"

	"github.com/crdver/kubectl-crdver/explain"
	"github.com/crdver/kubectl-crdver/internal/buildinfo"
)

var (
	crontabFile = filepath.Join("..", "testdata", "crds", "crontab.yaml")
	// versionsFiles are the CRDs of the offline --all tests.
	versionsFiles = []string{crontabFile, filepath.Join("..", "testdata", "crds", "group-mixed.yaml"), filepath.Join("..", "testdata", "crds", "widgets-v1beta1.yaml")}
)

// TestVersionsGolden runs offline command lines and compares their output with golden files,
// one per output mode.
func TestVersionsGolden(t *testing.T) {
	runGoldenCases(t, []goldenCase{
		{"versions-crontab.txt", []string{"versions", "-f", crontabFile}, 0},
		{"versions-crontab-wide.txt", []string{"versions", "-f", crontabFile, "-o", "wide"}, 0},
		{"versions-crontab.json", []string{"versions", "-f", crontabFile, "-o", "json"}, 0},
		{"versions-crontab.yaml", []string{"versions", "-f", crontabFile, "-o", "yaml"}, 0},
		{"versions-crontab-no-headers.txt", []string{"versions", "-f", crontabFile, "--no-headers"}, 0},
		{"versions-widgets-v1beta1.txt", []string{"versions", "-f", filepath.Join("..", "testdata", "crds", "widgets-v1beta1.yaml")}, 0},
		{"versions-gizmos.txt", []string{"versions", "gizmos", "-f", filepath.Join("..", "testdata", "crds", "group-mixed.yaml")}, 0},
		{"versions-all-files.txt", append([]string{"versions", "--all"}, fileArgs(versionsFiles)...), 0},
		{"versions-all-files.json", append([]string{"versions", "--all", "-o", "json"}, fileArgs(versionsFiles)...), 0},
		{"versions-sort.txt", append([]string{"versions", "--sort"}, strings.Fields("foo10 v1 v11alpha2 v2 foo1 v12alpha1 v10beta3 v10 v3beta1 v11beta2")...), 0},
		{"versions-can-remove-v1beta1.txt", []string{"versions", "-f", crontabFile, "--can-remove", "v1beta1"}, 1},
		// A release manifest has no status: storedVersions is unknown, nothing is called safe.
		{"versions-release.txt", []string{"versions", "-f", releaseFile}, 0},
		{"versions-release.json", []string{"versions", "-f", releaseFile, "-o", "json"}, 0},
		{"versions-release-can-remove-v1alpha1.txt", []string{"versions", "-f", releaseFile, "--can-remove", "v1alpha1"}, 1},
		{"versions-all-release.txt", []string{"versions", "--all", "-f", releaseFile + "," + td("crds", "widget.yaml")}, 0},
	})
}

var releaseFile = filepath.Join("..", "testdata", "crds", "crontab-release.yaml")

// TestVersionsFromFileWithoutStatus: from a file without status.storedVersions, no version is
// safe to remove on an assumption; --can-remove exits 1 and says to check the cluster, and the
// JSON says storedVersions is unknown.
func TestVersionsFromFileWithoutStatus(t *testing.T) {
	r := run(t, "", "versions", "-f", releaseFile, "--can-remove", "v1alpha1")
	if r.code != ExitProblems {
		t.Errorf("--can-remove v1alpha1 from a file without status: exit %d, want 1", r.code)
	}
	mustContain(t, "stderr", r.stderr, `whether version "v1alpha1" is safe to remove is unknown`, "check the cluster")
	if strings.Contains(r.stdout, "safe to remove") && !strings.Contains(r.stdout, "not safe to remove") && !strings.Contains(r.stdout, "unknown") {
		t.Errorf("table calls a version safe to remove:\n%s", r.stdout)
	}
	mustContain(t, "stdout", r.stdout, "storedVersions unknown")
	j := run(t, "", "versions", "-f", releaseFile, "-o", "json")
	var rep explain.VersionsReport
	if err := json.Unmarshal([]byte(j.stdout), &rep); err != nil {
		t.Fatal(err)
	}
	if rep.StoredVersionsKnown || rep.StoredVersions != nil || rep.MigrationPending != nil {
		t.Errorf("storedVersionsKnown=%v storedVersions=%v migrationPending=%v, want false, null, null", rep.StoredVersionsKnown, rep.StoredVersions, rep.MigrationPending)
	}
	for _, v := range rep.Versions {
		if v.SafeToRemove {
			t.Errorf("version %s is called safe to remove with storedVersions unknown", v.Name)
		}
		if (v.Stored == nil) == v.Storage {
			t.Errorf("version %s: stored = %v; want true for the storage version, null otherwise", v.Name, v.Stored)
		}
	}
	// The same CRD with its status: v1alpha1 is known to be safe.
	if r := run(t, "", "versions", "-f", crontabFile, "--can-remove", "v1alpha1"); r.code != 0 {
		t.Errorf("with status: exit %d, want 0: %s", r.code, r.stderr)
	}
}

func TestVersionsSortIssueOrder(t *testing.T) {
	want := "v10 v2 v1 v11beta2 v10beta3 v3beta1 v12alpha1 v11alpha2 foo1 foo10"
	// Reverse order and one other permutation must both come out in exactly the issue's order.
	for _, in := range []string{
		"foo10 foo1 v11alpha2 v12alpha1 v3beta1 v10beta3 v11beta2 v1 v2 v10",
		"v3beta1 foo1 v1 v12alpha1 v10 foo10 v11beta2 v2 v11alpha2 v10beta3",
	} {
		r := run(t, "", append([]string{"versions", "--sort"}, strings.Fields(in)...)...)
		if got := strings.Join(strings.Fields(r.stdout), " "); got != want || r.code != 0 {
			t.Errorf("versions --sort %s = %q (exit %d), want %q", in, got, r.code, want)
		}
	}
}

// TestVersionsJSONShape pins the documented JSON field names: scripts depend on them.
func TestVersionsJSONShape(t *testing.T) {
	r := run(t, "", "versions", "-f", crontabFile, "-o", "json")
	var doc map[string]any
	if err := json.Unmarshal([]byte(r.stdout), &doc); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, r.stdout)
	}
	for _, k := range []string{"name", "storageVersion", "preferredVersion", "storedVersions", "versions"} {
		if _, ok := doc[k]; !ok {
			t.Errorf("top-level field %q missing", k)
		}
	}
	versions := doc["versions"].([]any)
	for i, v := range versions {
		row := v.(map[string]any)
		for _, k := range []string{"name", "rank", "stability", "served", "storage", "stored", "deprecated", "deprecationWarning", "preferred", "safeToRemove", "notes"} {
			if _, ok := row[k]; !ok {
				t.Errorf("versions[%d] lacks %q", i, k)
			}
		}
		if rank := int(row["rank"].(float64)); rank != i+1 {
			t.Errorf("versions[%d].rank = %d, want %d", i, rank, i+1)
		}
	}
}

func TestVersionsYAMLEqualsJSON(t *testing.T) {
	j := run(t, "", "versions", "-f", crontabFile, "-o", "json")
	y := run(t, "", "versions", "-f", crontabFile, "-o", "yaml")
	var a, b explain.VersionsReport
	if err := json.Unmarshal([]byte(j.stdout), &a); err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal([]byte(y.stdout), &b); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(a, b); diff != "" {
		t.Errorf("-o yaml and -o json differ:\n%s", diff)
	}
}

func TestVersionsInputs(t *testing.T) {
	crontab, err := os.ReadFile(crontabFile)
	if err != nil {
		t.Fatal(err)
	}
	t.Run("stdin", func(t *testing.T) {
		r := run(t, string(crontab), "versions", "-f", "-", "-o", "json")
		mustContain(t, "stdout", r.stdout, `"name": "crontabs.stable.example.com"`)
	})
	t.Run("List document", func(t *testing.T) {
		js, err := yaml.YAMLToJSON(crontab)
		if err != nil {
			t.Fatal(err)
		}
		list := `{"apiVersion": "v1", "kind": "List", "items": [` + string(js) + `]}`
		r := run(t, list, "versions", "-f", "-", "ct", "-o", "json")
		mustContain(t, "stdout", r.stdout, `"storageVersion": "v1"`)
	})
	for _, alias := range []string{"crontabs", "crontab", "ct", "CronTab", "crontabs.stable.example.com", "crontabs.stable.example.com"} {
		t.Run("alias "+alias, func(t *testing.T) {
			r := run(t, "", "versions", alias, "-f", crontabFile, "-f", filepath.Join("..", "testdata", "crds", "group-mixed.yaml"), "-o", "json")
			if r.code != 0 {
				t.Fatalf("exit %d: %s", r.code, r.stderr)
			}
			mustContain(t, "stdout", r.stdout, `"name": "crontabs.stable.example.com"`)
		})
	}
}

// TestVersionsErrors: bad input gives one clear line naming the object, the right exit code,
// nothing on stdout, and never a stack trace.
func TestVersionsErrors(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	malformed := write("malformed.yaml", "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata: {name: a\n")
	notCRD := write("deploy.yaml", bundleCRD+"---\napiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\n")
	onlyDeploy := write("only-deploy.yaml", "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\n")
	empty := write("empty.yaml", "# nothing here\n---\n")
	scalar := write("scalar.yaml", "just a string\n")
	for _, tc := range []struct {
		name string
		args []string
		code int
		want string
	}{
		{"malformed YAML", []string{"versions", "-f", malformed}, 2, malformed + " (document 1): malformed YAML"},
		{"not a CRD, --strict-kinds", []string{"versions", "-f", notCRD, "--strict-kinds"}, 2, notCRD + " (document 2): apps/v1 Deployment is not a CustomResourceDefinition"},
		{"no CRD at all", []string{"versions", "-f", onlyDeploy}, 2, onlyDeploy + ": no CustomResourceDefinition found: the first of 1 document is " + onlyDeploy + " (document 1): apps/v1 Deployment is not a CustomResourceDefinition"},
		{"empty file", []string{"versions", "-f", empty}, 2, empty + ": no documents found"},
		{"scalar document", []string{"versions", "-f", scalar}, 2, scalar + " (document 1): not a Kubernetes object"},
		{"missing file", []string{"versions", "-f", filepath.Join(dir, "nope.yaml")}, 2, "nope.yaml: no such file or directory"},
		{"unknown name", []string{"versions", "nosuch", "-f", crontabFile}, 2, `no CustomResourceDefinition matches "nosuch"`},
		{"same CRD in two files", []string{"versions", "ct", "-f", crontabFile, "-f", filepath.Join("..", "testdata", "crds", "crontab-webhook.yaml")}, 2, `"ct" matches crontabs.stable.example.com, which is defined 2 times: pass only one file that defines it`},
		{"same CRD in two files, full name", []string{"versions", "crontabs.stable.example.com", "-f", crontabFile, "-f", crontabFile}, 2, `crontabs.stable.example.com is defined 2 times: pass only one file that defines it`},
		{"ambiguous short name", []string{"versions", "ct", "-f", crontabFile, "-f", filepath.Join("testdata", "versions-cluster.yaml")}, 2, `"ct" is ambiguous: it matches crontabs.other.example.com, crontabs.stable.example.com, crontabs.third.example.com; use the full name`},
		{"several CRDs, none named", []string{"versions", "-f", filepath.Join("..", "testdata", "crds", "group-mixed.yaml")}, 2, "holds 3 CustomResourceDefinitions (doodads.mixed.example.com, gadgets.mixed.example.com, gizmos.mixed.example.com): name the one you mean"},
		{"unknown version", []string{"versions", "-f", crontabFile, "--can-remove", "v3"}, 2, `crontabs.stable.example.com: version "v3" is not in spec.versions (have: v1, v1beta1, v1alpha1)`},
		{"bad output", []string{"versions", "-f", crontabFile, "-o", "xml"}, 2, `--output "xml" is not supported: use one of wide (for one CRD), json, yaml, markdown (with --all)`},
		{"unknown flag", []string{"versions", "--bogus"}, 2, "unknown flag: --bogus"},
		{"unknown command", []string{"verzions"}, 2, `unknown command "verzions"`},
		{"two names", []string{"versions", "a", "b"}, 2, "versions takes one CRD name, got 2"},
		{"sort with -f", []string{"versions", "--sort", "v1", "-f", crontabFile}, 2, "--sort takes only version strings"},
		{"sort without args", []string{"versions", "--sort"}, 2, "--sort needs version strings"},
		{"nothing named", []string{"versions"}, 2, "name a CRD"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := run(t, "", tc.args...)
			if r.code != tc.code {
				t.Errorf("exit code %d, want %d", r.code, tc.code)
			}
			if r.stdout != "" && tc.code == 2 {
				t.Errorf("stdout not empty on a usage error: %q", r.stdout)
			}
			lines := strings.Split(strings.TrimSpace(r.stderr), "\n")
			if len(lines) != 1 || !strings.HasPrefix(lines[0], "error: ") {
				t.Errorf("stderr is not one error line: %q", r.stderr)
			}
			mustContain(t, "stderr", r.stderr, tc.want)
			for _, bad := range []string{"panic", "goroutine ", ".go:"} {
				if strings.Contains(r.stderr, bad) {
					t.Errorf("stderr contains %q: %s", bad, r.stderr)
				}
			}
		})
	}
}

const bundleCRD = "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata: {name: xs.y.z}\nspec: {group: y.z, names: {plural: xs, kind: X}, scope: Namespaced, versions: [{name: v1, served: true, storage: true, schema: {openAPIV3Schema: {type: object}}}]}\n"

// TestVersionsSkipsOtherDocuments: in a helm template stream, documents that are not CRDs are
// skipped, counted on stderr and listed with -v.
func TestVersionsSkipsOtherDocuments(t *testing.T) {
	stream := "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web, namespace: prod}\n---\n" + bundleCRD + "---\napiVersion: v1\nkind: Service\nmetadata: {name: web}\n"
	r := run(t, stream, "versions", "-f", "-")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	mustContain(t, "stdout", r.stdout, "v1 ")
	if r.stderr != "skipped 2 documents: not a CustomResourceDefinition (-v lists them)\n" {
		t.Errorf("stderr = %q", r.stderr)
	}
	r = run(t, stream, "versions", "-f", "-", "-v")
	mustContain(t, "stderr", r.stderr, "skipped 2 documents: not a CustomResourceDefinition:\n  stdin (document 1): apps/v1 Deployment prod/web\n  stdin (document 3): v1 Service web\n")
	r = run(t, stream, "versions", "-f", "-", "--strict-kinds")
	if r.code != 2 || !strings.Contains(r.stderr, "stdin (document 1): apps/v1 Deployment is not a CustomResourceDefinition") {
		t.Errorf("--strict-kinds: exit %d, %s", r.code, r.stderr)
	}
}

func TestVersionCommand(t *testing.T) {
	r := run(t, "", "version", "-o", "json")
	var bi BuildInfo
	// (The Kubernetes library version comes from the binary's build info, which test binaries
	// lack; cmd/kubectl-crdver's tests check it on the built binary.)
	if err := json.Unmarshal([]byte(r.stdout), &bi); err != nil || bi.Version != buildinfo.Version || bi.GoVersion == "" {
		t.Errorf("version -o json = %s (err %v); want version %q", r.stdout, err, buildinfo.Version)
	}
}
