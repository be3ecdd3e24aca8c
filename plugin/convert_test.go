package plugin

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"

	"github.com/crdver/kubectl-crdver/convert"
	"github.com/crdver/kubectl-crdver/internal/testcrd"
	"github.com/crdver/kubectl-crdver/internal/testenv"
	"github.com/crdver/kubectl-crdver/internal/testwebhook"
)

// webhookCRD reads testdata/crds/crontab-webhook.yaml, points it at srv, and optionally
// renames its group (so that cluster tests do not collide with other tests' CronTabs).
func webhookCRD(t *testing.T, srv *testwebhook.Server, group string) *apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	crd := testenv.LoadCRD(t, "crontab-webhook.yaml")
	if srv != nil {
		crd.Spec.Conversion = srv.WebhookConversion("v1", "v1beta1")
	}
	if group != "" {
		crd = testcrd.With(crd, testcrd.Group(group))
	}
	return crd
}

// writeCRD writes crd to a temporary file and returns its path.
func writeCRD(t *testing.T, crd *apiextensionsv1.CustomResourceDefinition) string {
	t.Helper()
	crd = crd.DeepCopy()
	crd.APIVersion, crd.Kind = "apiextensions.k8s.io/v1", "CustomResourceDefinition"
	crd.Status = apiextensionsv1.CustomResourceDefinitionStatus{}
	b, err := yaml.Marshal(crd)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "crd.yaml")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

var (
	portRE    = regexp.MustCompile(`127\.0\.0\.1:\d+`)
	latencyRE = regexp.MustCompile(`(?m)^Latency: .*$`)
	msJSONRE  = regexp.MustCompile(`"(p50Ms|p99Ms|maxMs)": [0-9.e+-]+`)
	msYAMLRE  = regexp.MustCompile(`(?m)^(\s+)(p50Ms|p99Ms|maxMs): [0-9.e+-]+$`)
)

// stable replaces what changes from run to run (ports, latencies) for golden files.
func stable(s string) string {
	s = portRE.ReplaceAllString(s, "127.0.0.1:PORT")
	s = latencyRE.ReplaceAllString(s, "Latency:    (varies)")
	s = msYAMLRE.ReplaceAllString(s, "${1}${2}: 0")
	return msJSONRE.ReplaceAllString(s, `"$1": 0`)
}

var cronTabsV1beta1 = repoFile("testdata", "convert", "crontabs-v1beta1.yaml")

// TestConvertCommand runs the command against the test webhook: reports, exit codes, output
// formats.
func TestConvertCommand(t *testing.T) {
	srv := testwebhook.StartForTest(t, testwebhook.Options{})
	crdFile := writeCRD(t, webhookCRD(t, srv, ""))
	noneFile := repoFile("testdata", "crds", "crontab.yaml")
	cases := []struct {
		name      string
		behaviour testwebhook.Behaviour
		args      []string
		code      int
		golden    string
		stderr    string
	}{
		{name: "well-behaved round trip", args: []string{"--to", "v1", "-f", cronTabsV1beta1, "--round-trip"}, code: 0, golden: "convert/good.txt"},
		{name: "lossy round trip", behaviour: testwebhook.Lossy, args: []string{"--to", "v1", "-f", cronTabsV1beta1, "--round-trip"}, code: 1, golden: "convert/lossy.txt",
			stderr: "error: crontabs.stable.example.com: 1 failed check(s), 0 warning(s) converting to v1"},
		{name: "lossy json", behaviour: testwebhook.Lossy, args: []string{"--to", "v1", "-f", cronTabsV1beta1, "--round-trip", "-o", "json"}, code: 1, golden: "convert/lossy.json"},
		{name: "reordered yaml", behaviour: testwebhook.Reorder, args: []string{"--to", "v1", "-f", cronTabsV1beta1, "-o", "yaml"}, code: 1, golden: "convert/reorder.yaml"},
		{name: "metadata changed is a warning", behaviour: testwebhook.ChangeMetadata, args: []string{"--to", "v1", "-f", cronTabsV1beta1, "--batch-size", "2"}, code: 0, golden: "convert/metadata.txt"},
		{name: "failed status", behaviour: testwebhook.Failed, args: []string{"--to", "v1", "-f", cronTabsV1beta1}, code: 1, golden: "convert/failed.txt"},
		{name: "slow webhook", behaviour: testwebhook.Slow, args: []string{"--to", "v1", "-f", cronTabsV1beta1, "--timeout", "200ms"}, code: 1, golden: "convert/timeout.txt"},
		{name: "v1beta1 review", args: []string{"--to", "v1", "-f", cronTabsV1beta1, "--review-version", "v1beta1"}, code: 0, golden: "convert/review-v1beta1.txt"},
		// kube-apiserver decodes a text/plain answer as JSON: a warning, exit 0; --strict fails.
		{name: "text/plain is a warning", behaviour: testwebhook.WrongContentType, args: []string{"--to", "v1", "-f", cronTabsV1beta1}, code: 0, golden: "convert/content-type.txt"},
		{name: "text/plain with --strict", behaviour: testwebhook.WrongContentType, args: []string{"--to", "v1", "-f", cronTabsV1beta1, "--strict"}, code: 1, golden: "convert/content-type.txt",
			stderr: "error: crontabs.stable.example.com: 1 warning(s) converting to v1, and --strict makes warnings fail"},
		{name: "generated", args: []string{"--to", "v1beta1", "--generate", "20", "--seed", "4", "--round-trip"}, code: 0, golden: "convert/generated.txt"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			srv.Set(tc.behaviour)
			defer srv.Set(testwebhook.Good)
			got := run(t, "", append([]string{"convert", "--crd-file", crdFile}, tc.args...)...)
			if got.code != tc.code {
				t.Errorf("exit code %d, want %d\nstdout:\n%s\nstderr:\n%s", got.code, tc.code, got.stdout, got.stderr)
			}
			golden(t, tc.golden, stable(got.stdout))
			if tc.stderr != "" {
				mustContain(t, "stderr", got.stderr, tc.stderr)
			}
		})
	}
	t.Run("strategy None", func(t *testing.T) {
		got := run(t, "", "convert", "--crd-file", noneFile, "--to", "v1", "-f", cronTabsV1beta1, "--round-trip")
		if got.code != 1 {
			t.Errorf("exit code %d, want 1 (None prunes hostPort)\n%s%s", got.code, got.stdout, got.stderr)
		}
		golden(t, "convert/none.txt", stable(got.stdout))
	})
	t.Run("progress on stderr", func(t *testing.T) {
		// Plain progress lines come only on runs longer than the interval: 1ms makes this short
		// run one.
		got := run(t, "", "convert", "--crd-file", crdFile, "--to", "v1beta1", "--generate", "30", "--batch-size", "10", "--round-trip", "--progress-interval", "1ms")
		if got.code != 0 {
			t.Fatalf("exit %d\n%s%s", got.code, got.stdout, got.stderr)
		}
		mustContain(t, "stderr", got.stderr, "convert: 30/30 objects converted, ")
		mustContain(t, "stdout", got.stdout, "30 given, 0 skipped, 30 converted without error, 0 failed; 6 request(s)")
		quiet := run(t, "", "convert", "--crd-file", crdFile, "--to", "v1beta1", "--generate", "30", "--batch-size", "10", "-q")
		if quiet.stderr != "" {
			t.Errorf("--quiet printed %q", quiet.stderr)
		}
	})
	t.Run("unreachable", func(t *testing.T) {
		gone := testwebhook.StartForTest(t, testwebhook.Options{})
		file := writeCRD(t, webhookCRD(t, gone, ""))
		gone.Close()
		got := run(t, "", "convert", "--crd-file", file, "--to", "v1", "-f", cronTabsV1beta1)
		if got.code != 3 {
			t.Errorf("exit code %d, want 3\n%s%s", got.code, got.stdout, got.stderr)
		}
		mustContain(t, "stderr", got.stderr, "cannot reach the conversion webhook: cannot connect", "is the webhook running?")
		if strings.Count(got.stderr, "\n") != 1 {
			t.Errorf("want one error line, got:\n%s", got.stderr)
		}
	})
	t.Run("same seed gives the same objects", func(t *testing.T) {
		keep1, keep2 := filepath.Join(t.TempDir(), "a.yaml"), filepath.Join(t.TempDir(), "b.yaml")
		srv.Set(testwebhook.Lossy)
		defer srv.Set(testwebhook.Good)
		a := run(t, "", "convert", "--crd-file", crdFile, "--to", "v1beta1", "--from", "v1", "--generate", "30", "--seed", "9", "--round-trip", "--keep", keep1)
		b := run(t, "", "convert", "--crd-file", crdFile, "--to", "v1beta1", "--from", "v1", "--generate", "30", "--seed", "9", "--round-trip", "--keep", keep2)
		if a.code != 1 || b.code != 1 {
			t.Fatalf("exit codes %d, %d; want 1 (lossy)", a.code, b.code)
		}
		ka, _ := os.ReadFile(keep1)
		kb, _ := os.ReadFile(keep2)
		if len(ka) == 0 || string(ka) != string(kb) {
			t.Errorf("--keep files differ or are empty:\n%s\n---\n%s", ka, kb)
		}
		// What --keep wrote converts again, and fails again.
		c := run(t, "", "convert", "--crd-file", crdFile, "--to", "v1beta1", "-f", keep1, "--round-trip", "-o", "json")
		var rep convert.Report
		if err := json.Unmarshal([]byte(c.stdout), &rep); err != nil {
			t.Fatalf("%v\n%s%s", err, c.stdout, c.stderr)
		}
		if c.code != 1 || rep.Objects == 0 || len(rep.Failed) != 0 && rep.Objects != len(rep.Failed) {
			t.Errorf("re-running the kept objects: exit %d, %d objects", c.code, rep.Objects)
		}
		for _, f := range rep.Findings {
			if f.Check != convert.CheckRoundTrip {
				t.Errorf("unexpected finding %+v", f)
			}
		}
	})
}

// TestConvertBisect: a webhook that fails a whole ConversionReview because of one object in
// 40: the report names that object, --keep writes only it, and the kept file reproduces the
// failure on its own.
func TestConvertBisect(t *testing.T) {
	srv := testwebhook.StartForTest(t, testwebhook.Options{})
	crdFile := writeCRD(t, webhookCRD(t, srv, ""))
	srv.Set(testwebhook.FailBatchIf)
	srv.SetPoison(testwebhook.BadHostPort)
	keep := filepath.Join(t.TempDir(), "failing.yaml")
	got := run(t, "", "convert", "--crd-file", crdFile, "--to", "v1", "--from", "v1beta1", "--generate", "40", "--seed", "3", "--keep", keep)
	if got.code != 1 {
		t.Fatalf("exit %d, want 1\n%s%s", got.code, got.stdout, got.stderr)
	}
	golden(t, "convert/bisect.txt", strings.ReplaceAll(stable(got.stdout), keep, "KEEP.yaml"))
	mustContain(t, "stdout", got.stdout, "minimal failing object(s):\n  generated #3 (seed 3)\n", "1 failing (bisected) object(s) written to "+keep)
	b, err := os.ReadFile(keep)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Count(string(b), "\n---\n") != 1 || !strings.Contains(string(b), "hostPort: a:b/c,d=e") {
		t.Errorf("--keep wrote:\n%s", b)
	}
	again := run(t, "", "convert", "--crd-file", crdFile, "--to", "v1", "-f", keep, "-o", "json")
	var rep convert.Report
	if err := json.Unmarshal([]byte(again.stdout), &rep); err != nil {
		t.Fatalf("%v\n%s%s", err, again.stdout, again.stderr)
	}
	if again.code != 1 || rep.Objects != 1 || rep.Requests != 1 || len(rep.Findings) != 1 || rep.Findings[0].Check != convert.CheckResultStatus {
		t.Errorf("the kept object alone: exit %d, %d object(s), %d request(s), findings %+v", again.code, rep.Objects, rep.Requests, rep.Findings)
	}
}

// TestConvertUsage: bad flags and input give one error line and exit 2.
func TestConvertUsage(t *testing.T) {
	srv := testwebhook.StartForTest(t, testwebhook.Options{})
	crdFile := writeCRD(t, webhookCRD(t, srv, ""))
	badObj := filepath.Join(t.TempDir(), "cm.yaml")
	if err := os.WriteFile(badObj, []byte("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"--crd-file", crdFile, "-f", cronTabsV1beta1}, "--to is required"},
		{[]string{"--crd-file", crdFile, "--to", "v1", "-f", cronTabsV1beta1, "--write", "--check"}, "--write rewrites the files and --check only lists"},
		{[]string{"--crd-file", crdFile, "--to", "v1", "-f", cronTabsV1beta1, "--dry-run"}, "--dry-run goes with --write"},
		{[]string{"--crd-file", crdFile, "--to", "v1", "-f", cronTabsV1beta1, "--allow-data-loss"}, "--allow-data-loss goes with --write"},
		{[]string{"--crd-file", crdFile, "--to", "v1", "-f", "-", "--write"}, "-f - (standard input) cannot be rewritten"},
		{[]string{"--crd-file", crdFile, "--to", "v1", "--generate", "3", "--check"}, "--write and --check work on files"},
		{[]string{"--crd-file", crdFile, "--to", "v1", "-f", cronTabsV1beta1, "-o", "markdown"}, "-o markdown is for --write, --check and --load reports"},
		{[]string{"--crd-file", crdFile, "--to", "v1"}, "give exactly one source of objects"},
		{[]string{"--crd-file", crdFile, "--to", "v1", "-f", cronTabsV1beta1, "--generate", "3"}, "give exactly one source of objects"},
		{[]string{"--crd-file", crdFile, "--to", "v3", "-f", cronTabsV1beta1}, `version "v3" is not in spec.versions (have: v1, v1beta1, v1alpha1)`},
		{[]string{"--crd-file", crdFile, "--to", "v1", "-f", cronTabsV1beta1, "--review-version", "v2"}, `--review-version "v2": use v1 or v1beta1`},
		{[]string{"--crd-file", crdFile, "--to", "v1", "-f", cronTabsV1beta1, "-l", "a=b"}, "need --from-cluster"},
		{[]string{"--crd-file", crdFile, "--to", "v1", "-f", cronTabsV1beta1, "--batch-size", "0"}, "--batch-size 0"},
		{[]string{"--crd-file", crdFile, "--to", "v1", "-f", cronTabsV1beta1, "--via-apiserver", "--webhook-address", "127.0.0.1:1"}, "--via-apiserver lets the API server call the webhook"},
		{[]string{"--crd-file", crdFile, "--to", "v1", "-f", badObj}, `cm.yaml (document 1): apiVersion "v1" is not a version of crontabs.stable.example.com`},
		{[]string{"--crd-file", crdFile, "--to", "v1", "-f", "does-not-exist.yaml"}, "does-not-exist.yaml: no such file or directory"},
		{[]string{"--crd-file", crdFile, "--to", "v1", "-f", cronTabsV1beta1, "--webhook-address", "nonsense"}, `--webhook-address "nonsense": want HOST:PORT`},
		{[]string{"--crd-file", crdFile, "--to", "v1", "-f", cronTabsV1beta1, "--via-service-proxy"}, "--via-service-proxy needs a service-referenced webhook"},
		{[]string{"--crd-file", crdFile, "--to", "v1", "--generate", "2", "--from", "v9"}, `version "v9" is not in spec.versions`},
	}
	for _, tc := range cases {
		t.Run(tc.want, func(t *testing.T) {
			got := run(t, "", append([]string{"convert"}, tc.args...)...)
			if got.code != 2 {
				t.Errorf("exit code %d, want 2\n%s%s", got.code, got.stdout, got.stderr)
			}
			mustContain(t, "stderr", got.stderr, tc.want)
			if strings.Count(got.stderr, "\n") != 1 || !strings.HasPrefix(got.stderr, "error: ") {
				t.Errorf("want one error line, got:\n%s", got.stderr)
			}
		})
	}
}

var _ = time.Second

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestConvertCompletion: --to completes the CRD's versions.
func TestConvertCompletion(t *testing.T) {
	got := run(t, "", "__complete", "convert", "--crd-file", repoFile("testdata", "crds", "crontab.yaml"), "--to", "")
	mustContain(t, "completion", got.stdout, "v1\n", "v1beta1\n", "v1alpha1\n", ":4")
}
