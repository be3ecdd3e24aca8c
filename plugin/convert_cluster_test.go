package plugin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	"github.com/crdver/kubectl-crdver/convert"
	"github.com/crdver/kubectl-crdver/internal/testenv"
	"github.com/crdver/kubectl-crdver/internal/testwebhook"
)

// createCronTabs creates n CronTabs at v1beta1 in namespace default: the API server calls
// the webhook to store them at v1.
func createCronTabs(t *testing.T, dyn dynamic.Interface, group string, n int) {
	t.Helper()
	gvr := schema.GroupVersionResource{Group: group, Version: "v1beta1", Resource: "crontabs"}
	hostPorts := []string{"db.example.com:5432", "cache.example.com", "", "a:b/c,d=e"}
	for i := 0; i < n; i++ {
		spec := map[string]any{"cronSpec": "*/5 * * * *", "image": "backup:1.2"}
		if hp := hostPorts[i%len(hostPorts)]; hp != "" {
			spec["hostPort"] = hp
		}
		u := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": group + "/v1beta1", "kind": "CronTab",
			"metadata": map[string]any{"name": fmt.Sprintf("crontab-%d", i), "labels": map[string]any{"app": "backup"}},
			"spec":     spec,
		}}
		if _, err := dyn.Resource(gvr).Namespace("default").Create(context.Background(), u, metav1.CreateOptions{}); err != nil {
			t.Fatalf("creating CronTab %d: %v", i, err)
		}
	}
}

// TestConvertAgainstAPIServer: the CRD registered with the test webhook (url clientConfig,
// caBundle); objects created through the API server; --from-cluster; and, with the API
// server as the oracle, each misbehaviour that makes the API server fail a conversion fails
// one of our error checks, and none that the API server accepts does.
func TestConvertAgainstAPIServer(t *testing.T) {
	srv := testwebhook.StartForTest(t, testwebhook.Options{})
	const group = "convert-it.example.com"
	crd := webhookCRD(t, srv, group)
	registerCRD(t, crd)
	dyn, err := dynamic.NewForConfig(quietConfig())
	if err != nil {
		t.Fatal(err)
	}
	createCronTabs(t, dyn, group, 4)
	name := crd.Name

	t.Run("from cluster: well-behaved", func(t *testing.T) {
		got := runCluster(t, "convert", name, "--to", "v1beta1", "--from-cluster", "-n", "default", "--round-trip")
		if got.code != 0 {
			t.Fatalf("exit %d\n%s%s", got.code, got.stdout, got.stderr)
		}
		mustContain(t, "stdout", got.stdout, "4 object(s) read from the cluster at v1", "4 given, 0 skipped, 4 converted without error", "No findings.")
	})
	t.Run("from cluster: lossy", func(t *testing.T) {
		srv.Set(testwebhook.Lossy)
		defer srv.Set(testwebhook.Good)
		got := runCluster(t, "convert", name, "--to", "v1beta1", "--from-cluster", "-A", "--round-trip", "-l", "app=backup", "--limit", "2")
		if got.code != 1 {
			t.Fatalf("exit %d, want 1\n%s%s", got.code, got.stdout, got.stderr)
		}
		mustContain(t, "stdout", got.stdout, "2 object(s) read from the cluster at v1", "default/crontab-0", "v1 -> v1beta1 -> v1", ".spec.port", `lost: was "5432"`)
	})
	t.Run("one paged input path, the same --limit", func(t *testing.T) {
		// The library source lists in pages, following continue tokens, up to the limit.
		var pages []int
		src := convert.NewClusterSource(dyn, crd, "v1", convert.Selection{Namespace: "default", PageSize: 3})
		for {
			page, err := src.Next(context.Background())
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			pages = append(pages, len(page))
		}
		if diff := cmp.Diff([]int{3, 1}, pages); diff != "" {
			t.Errorf("pages of 3 over 4 objects (-want +got):\n%s", diff)
		}
		limited := convert.NewClusterSource(dyn, crd, "v1", convert.Selection{Namespace: "default", PageSize: 2, Limit: 3})
		n := 0
		for {
			page, err := limited.Next(context.Background())
			if err != nil {
				break
			}
			n += len(page)
		}
		if n != 3 || limited.Read() != 3 {
			t.Errorf("--limit 3 over pages of 2: read %d", n)
		}
		// --limit means the same with and without --via-apiserver.
		direct := runCluster(t, "convert", name, "--to", "v1beta1", "--from-cluster", "-n", "default", "--limit", "3", "-o", "json")
		via := runCluster(t, "convert", name, "--to", "v1beta1", "--from-cluster", "-n", "default", "--limit", "3", "--via-apiserver", "-o", "json")
		for _, got := range []result{direct, via} {
			var rep convert.Report
			if err := json.Unmarshal([]byte(got.stdout), &rep); err != nil {
				t.Fatalf("%v\n%s%s", err, got.stdout, got.stderr)
			}
			if rep.Objects != 3 {
				t.Errorf("--limit 3: %d objects (%s)", rep.Objects, rep.Webhook)
			}
		}
	})
	t.Run("the API server agrees", func(t *testing.T) { agreeWithAPIServer(t, dyn, srv, crd) })
	t.Run("via the API server: dry-run create", func(t *testing.T) {
		got := runCluster(t, "convert", name, "--to", "v1", "--generate", "12", "--from", "v1beta1", "--via-apiserver", "-n", "default")
		if got.code != 0 {
			t.Fatalf("exit %d\n%s%s", got.code, got.stdout, got.stderr)
		}
		mustContain(t, "stdout", got.stdout, "server-side dry-run create", "12 given, 0 skipped, 12 converted without error", "No findings.")
		srv.Set(testwebhook.Lossy)
		defer srv.Set(testwebhook.Good)
		dir := t.TempDir()
		objFile := dir + "/crontab.yaml"
		writeFile(t, objFile, fmt.Sprintf("apiVersion: %s/v1beta1\nkind: CronTab\nmetadata: {name: dry-run, namespace: default}\nspec: {hostPort: \"db:5432\"}\n", group))
		got = runCluster(t, "convert", name, "--to", "v1", "-f", objFile, "--via-apiserver")
		if got.code != 1 {
			t.Fatalf("exit %d, want 1\n%s%s", got.code, got.stdout, got.stderr)
		}
		mustContain(t, "stdout", got.stdout, "v1beta1 -> v1 -> v1beta1", ".spec.hostPort", `changed: "db:5432" became "db"`)
		// Nothing was written.
		if _, err := dyn.Resource(gvr2(group, "v1")).Namespace("default").Get(context.Background(), "dry-run", metav1.GetOptions{}); err == nil {
			t.Errorf("a dry run created an object")
		}
	})
	t.Run("via the API server: an admission denial is a finding", func(t *testing.T) {
		// A policy with reason Forbidden refuses the dry-run create of one object: a verdict
		// on that object (apistatus.Refused), not a failure of the run (exit 3).
		objFile := t.TempDir() + "/crontab.yaml"
		writeFile(t, objFile, fmt.Sprintf("apiVersion: %s/v1beta1\nkind: CronTab\nmetadata: {name: refused, namespace: default}\nspec: {hostPort: \"db:5432\"}\n", group))
		forbidden := metav1.StatusReasonForbidden
		env.DenyByPolicy(t, testenv.Denial{Name: "convert-refused", Reason: &forbidden, Message: "no refused crontabs",
			Rule: admissionregistrationv1.RuleWithOperations{Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
				Rule: admissionregistrationv1.Rule{APIGroups: []string{group}, APIVersions: []string{"*"}, Resources: []string{"crontabs"}}},
			Refuse: "object.metadata.name == 'refused'",
			Probe: func(ctx context.Context) error {
				u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": group + "/v1beta1", "kind": "CronTab",
					"metadata": map[string]any{"name": "refused", "namespace": "default"}, "spec": map[string]any{"hostPort": "db:5432"}}}
				_, err := dyn.Resource(gvr2(group, "v1beta1")).Namespace("default").Create(ctx, u, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
				return err
			}})
		got := runCluster(t, "convert", name, "--to", "v1", "-f", objFile, "--via-apiserver", "-o", "json")
		if got.code != 1 {
			t.Fatalf("exit %d, want 1\n%s%s", got.code, got.stdout, got.stderr)
		}
		mustContain(t, "stdout", got.stdout, `"check": "apiserver"`, "no refused crontabs")
	})
	t.Run("via the API server: live objects", func(t *testing.T) {
		got := runCluster(t, "convert", name, "--to", "v1beta1", "--from-cluster", "--via-apiserver", "-n", "default")
		if got.code != 0 {
			t.Fatalf("exit %d\n%s%s", got.code, got.stdout, got.stderr)
		}
		mustContain(t, "stdout", got.stdout, "GET in every served version", "4 given", "No findings.",
			"the target version v1beta1 is not the storage version (v1)")
		// Reading the deprecated v1beta1: the API server's warning, on our stderr, once.
		if n := strings.Count(got.stderr, "Warning: stable.example.com/v1beta1 CronTab is deprecated"); n != 1 {
			t.Errorf("deprecation warning %d times on stderr:\n%s", n, got.stderr)
		}
		srv.Set(testwebhook.Failed)
		defer srv.Set(testwebhook.Good)
		got = runCluster(t, "convert", name, "--to", "v1", "--from-cluster", "--via-apiserver", "-n", "default", "-o", "json")
		if got.code != 1 {
			t.Fatalf("exit %d, want 1\n%s%s", got.code, got.stdout, got.stderr)
		}
		mustContain(t, "stdout", got.stdout, `"check": "apiserver"`, "conversion refused: spec.hostPort is required")
	})
}

// TestConvertLiveLossViaAPIServer: with v1beta1 as the storage version, a webhook that
// loses spec.port going to v1beta1 is caught by reading at v1 and dry-run updating there
// (v1 -> v1beta1 -> v1).
func TestConvertLiveLossViaAPIServer(t *testing.T) {
	srv := testwebhook.StartForTest(t, testwebhook.Options{})
	const group = "convert-live.example.com"
	crd := webhookCRD(t, srv, group)
	for i := range crd.Spec.Versions {
		v := &crd.Spec.Versions[i]
		v.Storage = v.Name == "v1beta1"
	}
	registerCRD(t, crd)
	dyn, err := dynamic.NewForConfig(quietConfig())
	if err != nil {
		t.Fatal(err)
	}
	createCronTabs(t, dyn, group, 2)
	srv.Set(testwebhook.Lossy)
	defer srv.Set(testwebhook.Good)
	got := runCluster(t, "convert", crd.Name, "--to", "v1beta1", "--from-cluster", "--via-apiserver", "-n", "default")
	if got.code != 1 {
		t.Fatalf("exit %d, want 1\n%s%s", got.code, got.stdout, got.stderr)
	}
	mustContain(t, "stdout", got.stdout, "default/crontab-0", "v1 -> v1beta1 -> v1", ".spec.port", `lost: was "5432"`)
}

// TestConvertServiceReference: a service-referenced webhook reached through --webhook-address,
// with TLS verified against the caBundle as <service>.<namespace>.svc; the CRD is read from
// the cluster.
func TestConvertServiceReference(t *testing.T) {
	const svcDNS = "crontab-conversion.default.svc"
	srv := testwebhook.StartForTest(t, testwebhook.Options{DNSNames: []string{svcDNS}})
	crd := webhookCRD(t, nil, "convert-svc.example.com")
	port, path := int32(443), "/convert"
	crd.Spec.Conversion.Webhook.ClientConfig = &apiextensionsv1.WebhookClientConfig{
		Service:  &apiextensionsv1.ServiceReference{Namespace: "default", Name: "crontab-conversion", Port: &port, Path: &path},
		CABundle: srv.CABundle,
	}
	registerCRD(t, crd)

	got := runCluster(t, "convert", "crontabs.convert-svc.example.com", "--to", "v1", "--generate", "8", "--from", "v1beta1", "--round-trip", "--webhook-address", srv.Addr)
	if got.code != 1 && got.code != 0 {
		t.Fatalf("exit %d\n%s%s", got.code, got.stdout, got.stderr)
	}
	mustContain(t, "stdout", got.stdout, "service default/crontab-conversion:443/convert via "+srv.Addr, "TLS verified against caBundle as "+svcDNS)
	for _, line := range strings.Split(got.stdout, "\n") {
		if strings.HasPrefix(line, "connection ") && !strings.HasSuffix(line, " 0") {
			t.Errorf("connection failures: %s", line)
		}
	}

	t.Run("no address", func(t *testing.T) {
		got := runCluster(t, "convert", "crontabs.convert-svc.example.com", "--to", "v1", "--generate", "1")
		if got.code != 2 {
			t.Errorf("exit %d, want 2\n%s", got.code, got.stderr)
		}
		mustContain(t, "stderr", got.stderr, "give --webhook-address HOST:PORT (e.g. after kubectl port-forward -n default svc/crontab-conversion 9443:443) or use --via-service-proxy")
	})
	t.Run("certificate without the service name", func(t *testing.T) {
		plain := testwebhook.StartForTest(t, testwebhook.Options{})
		got := runCluster(t, "convert", "crontabs.convert-svc.example.com", "--to", "v1", "--generate", "1", "--webhook-address", plain.Addr)
		if got.code != 3 {
			t.Errorf("exit %d, want 3\n%s%s", got.code, got.stdout, got.stderr)
		}
		mustContain(t, "stderr", got.stderr, "subject alternative name")
	})
	t.Run("service proxy without the service", func(t *testing.T) {
		got := runCluster(t, "convert", "crontabs.convert-svc.example.com", "--to", "v1", "--generate", "1", "--via-service-proxy")
		if got.code != 3 {
			t.Errorf("exit %d, want 3\n%s%s", got.code, got.stdout, got.stderr)
		}
		mustContain(t, "stdout", got.stdout, "through the API server's service proxy (the caBundle is NOT verified on this path)")
		mustContain(t, "stderr", got.stderr, "service proxy answered 404", `services "crontab-conversion" not found`)
	})
}

func gvr2(group, v string) schema.GroupVersionResource {
	return schema.GroupVersionResource{Group: group, Version: v, Resource: "crontabs"}
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}

// agreeWithAPIServer is the oracle test: a server-side dry-run create at v1beta1 makes the
// API server convert each object to v1 (storage) and back, calling the webhook both ways with
// one object per request. (Reads are no oracle: each version's watch cache holds objects
// converted when they last changed.) We convert the same objects to v1 and back, one per
// request too. For every misbehaviour, the API server fails iff one of our error checks does.
func agreeWithAPIServer(t *testing.T, dyn dynamic.Interface, srv *testwebhook.Server, crd *apiextensionsv1.CustomResourceDefinition) {
	group := crd.Spec.Group
	gvr := schema.GroupVersionResource{Group: group, Version: "v1beta1", Resource: "crontabs"}
	var objs []convert.Object
	for i, hp := range []string{"db.example.com:5432", "cache.example.com", "a:b/c,d=e"} {
		objs = append(objs, convert.Object{Source: fmt.Sprint(i), Object: map[string]any{
			"apiVersion": group + "/v1beta1", "kind": "CronTab",
			"metadata": map[string]any{"name": fmt.Sprintf("oracle-%d", i), "namespace": "default", "labels": map[string]any{"app": "backup"}},
			"spec":     map[string]any{"cronSpec": "*/5 * * * *", "hostPort": hp},
		}})
	}
	tr, err := convert.NewHTTPTransport(crd, convert.TransportOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range []testwebhook.Behaviour{
		testwebhook.Good, testwebhook.WrongUID, testwebhook.WrongCount, testwebhook.WrongAPIVersion,
		testwebhook.WrongKind, testwebhook.Rename, testwebhook.ChangeNamespace, testwebhook.ChangeUID, testwebhook.NoMetadata,
		testwebhook.BadLabel, testwebhook.Failed, testwebhook.Non200, testwebhook.MalformedJSON, testwebhook.WrongReviewKind,
		testwebhook.NoReviewKind, testwebhook.NoResponse, testwebhook.WrongContentType, testwebhook.UnknownField, testwebhook.InvalidInTarget, testwebhook.ChangeMetadata, testwebhook.Lossy,
	} {
		t.Run(string(b)+"-", func(t *testing.T) {
			srv.Set(b)
			defer srv.Set(testwebhook.Good)
			var serverErr error
			for _, o := range objs {
				u := &unstructured.Unstructured{Object: o.Object}
				if _, err := dyn.Resource(gvr).Namespace("default").Create(context.Background(), u.DeepCopy(), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}); err != nil {
					serverErr = err
					break
				}
			}
			rep, err := convert.Run(context.Background(), convert.Options{CRD: crd, To: "v1", BatchSize: 1, RoundTrip: true, Transport: tr}, objs)
			if err != nil {
				t.Fatal(err)
			}
			var errorChecks, warningChecks, ownChecks []string
			for _, f := range rep.Findings {
				switch {
				case f.Check == convert.CheckRoundTrip, f.Check == convert.CheckPruned, f.Check == convert.CheckTargetSchema:
					// Lossy or invalid, yet the API server accepts it: these are our own checks,
					// stricter than the API server's by design (asserted below).
					ownChecks = append(ownChecks, f.Check)
				case f.Severity == convert.SeverityError:
					errorChecks = append(errorChecks, f.Check)
				default:
					warningChecks = append(warningChecks, f.Check)
				}
			}
			sort.Strings(errorChecks)
			if (serverErr != nil) != (len(errorChecks) > 0) {
				t.Errorf("API server: %v; our error findings: %v", serverErr, errorChecks)
			}
			switch b {
			case testwebhook.UnknownField, testwebhook.InvalidInTarget:
				if len(ownChecks) == 0 {
					t.Errorf("the API server keeps quiet about %s; we must report it", b)
				}
			case testwebhook.ChangeMetadata, testwebhook.WrongContentType:
				if len(warningChecks) == 0 {
					t.Errorf("the API server tolerates %s: we must warn", b)
				}
			case testwebhook.Lossy:
				if rep.Problems() == 0 {
					t.Errorf("the lossy webhook passed the round trip")
				}
			}
			if serverErr != nil {
				t.Logf("API server: %s; we: %v", firstLine(serverErr.Error()), errorChecks)
			}
		})
	}
}

// TestConvertAgreesV1beta1Review: the same oracle with a CRD that asks for v1beta1
// ConversionReviews.
func TestConvertAgreesV1beta1Review(t *testing.T) {
	srv := testwebhook.StartForTest(t, testwebhook.Options{})
	crd := webhookCRD(t, srv, "convert-beta.example.com")
	crd.Spec.Conversion.Webhook.ConversionReviewVersions = []string{"v1beta1"}
	registerCRD(t, crd)
	dyn, err := dynamic.NewForConfig(quietConfig())
	if err != nil {
		t.Fatal(err)
	}
	agreeWithAPIServer(t, dyn, srv, crd)
}

// quietConfig is the admin configuration without client-go's warning log lines (the tests
// read the deprecated v1beta1 on purpose).
func quietConfig() *rest.Config {
	cfg := rest.CopyConfig(env.Config)
	cfg.WarningHandler = rest.NoWarnings{}
	return cfg
}
