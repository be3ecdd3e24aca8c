package plugin

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/crdver/kubectl-crdver/convert"
	"github.com/crdver/kubectl-crdver/internal/testenv"
)

// agnhostWebhook is the Kubernetes e2e conversion webhook (agnhost crd-conversion-webhook,
// built from the Go module proxy by hack/build-test-binaries.sh agnhost) served over HTTPS on
// 127.0.0.1 with a generated CA.
type agnhostWebhook struct {
	url      string
	caBundle []byte
}

func startAgnhost(t testing.TB) *agnhostWebhook {
	t.Helper()
	build := exec.Command("bash", repoFile("hack", "build-test-binaries.sh"), "agnhost")
	var stderr bytes.Buffer
	build.Stderr = &stderr
	out, err := build.Output()
	if err != nil {
		// CI starts from a fresh machine: there the build must work, never a silent skip.
		if os.Getenv("CI") != "" {
			t.Fatalf("building agnhost: %v\n%s", err, stderr.String())
		}
		t.Skipf("agnhost could not be built (hack/build-test-binaries.sh agnhost): %v\n%s", err, stderr.String())
	}
	bin := filepath.Join(strings.TrimSpace(string(out)), "agnhost")
	certFile, keyFile, caPEM := testenv.LocalhostCertFiles(t)
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	client := &http.Client{Timeout: time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	// agnhost takes a port, not a listener: pick a free one, and try again if another
	// process takes it first.
	for attempt := 0; attempt < 5; attempt++ {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		port := l.Addr().(*net.TCPAddr).Port
		l.Close()
		cmd := exec.Command(bin, "crd-conversion-webhook", "--tls-cert-file", certFile, "--tls-private-key-file", keyFile, "--port", fmt.Sprint(port))
		var logs bytes.Buffer
		cmd.Stderr = &logs
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		exited := make(chan struct{})
		go func() { _ = cmd.Wait(); close(exited) }()
		base := fmt.Sprintf("https://127.0.0.1:%d", port)
	wait:
		for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
			if resp, err := client.Get(base + "/readyz"); err == nil {
				resp.Body.Close()
				t.Cleanup(func() { _ = cmd.Process.Kill(); <-exited })
				return &agnhostWebhook{url: base + "/crdconvert", caBundle: caPEM}
			}
			select {
			case <-exited:
				t.Logf("agnhost exited (port %d taken?): %s", port, logs.String())
				break wait
			default:
			}
		}
		_ = cmd.Process.Kill()
		<-exited
	}
	t.Fatal("agnhost crd-conversion-webhook did not become ready")
	return nil
}

// e2eCRD is the CRD of the e2e test "CustomResourceConversionWebhook"
// (test/e2e/apimachinery/crd_conversion_webhook.go): v1 has hostPort, v2 host and port, at
// the top level of the object.
func (a *agnhostWebhook) e2eCRD() *apiextensionsv1.CustomResourceDefinition {
	schema := func(props ...string) *apiextensionsv1.CustomResourceValidation {
		p := map[string]apiextensionsv1.JSONSchemaProps{}
		for _, n := range props {
			p[n] = apiextensionsv1.JSONSchemaProps{Type: "string"}
		}
		return &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{Type: "object", Properties: p}}
	}
	url := a.url
	return &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "e2e-test-crds.stable.example.com"},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: "stable.example.com", Scope: apiextensionsv1.NamespaceScoped,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "e2e-test-crds", Singular: "e2e-test-crd", Kind: "E2eTestCrd", ListKind: "E2eTestCrdList"},
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{
				{Name: "v1", Served: true, Storage: true, Schema: schema("hostPort")},
				{Name: "v2", Served: true, Schema: schema("host", "port")},
			},
			Conversion: &apiextensionsv1.CustomResourceConversion{Strategy: apiextensionsv1.WebhookConverter, Webhook: &apiextensionsv1.WebhookConversion{
				ClientConfig:             &apiextensionsv1.WebhookClientConfig{URL: &url, CABundle: a.caBundle},
				ConversionReviewVersions: []string{"v1", "v1beta1"},
			}},
		},
	}
}

// e2eObjects writes n v1 objects as the e2e test creates them.
func e2eObjects(t testing.TB, n int) string {
	var b strings.Builder
	for i := 0; i < n; i++ {
		fmt.Fprintf(&b, "---\napiVersion: stable.example.com/v1\nkind: E2eTestCrd\nmetadata:\n  name: cr-instance-%d\n  namespace: default\nhostPort: localhost:%d\n", i, 8080+i)
	}
	path := filepath.Join(t.TempDir(), "objects.yaml")
	if err := os.WriteFile(path, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestConvertLoadAgnhost: --load against the Kubernetes e2e conversion webhook. Every answer
// is right (the first of each size checked in full), and agnhost on loopback meets the budget.
func TestConvertLoadAgnhost(t *testing.T) {
	a := startAgnhost(t)
	crdFile := writeCRD(t, a.e2eCRD())
	got := run(t, "", "convert", "--crd-file", crdFile, "--to", "v2", "-f", e2eObjects(t, 10), "--load", "--load-sizes", "1,1500", "--load-requests", "10", "-o", "json")
	var rep convert.LoadReport
	if err := json.Unmarshal([]byte(got.stdout), &rep); err != nil {
		t.Fatalf("exit %d: %v\n%s%s", got.code, err, got.stdout, got.stderr)
	}
	if got.code != 0 {
		t.Errorf("exit %d, want 0\n%s%s", got.code, got.stdout, got.stderr)
	}
	for _, s := range rep.Sizes {
		if s.Verdict != convert.VerdictWithin || s.Requests != 10 || s.Failed != 0 {
			t.Errorf("%d objects: %+v", s.Objects, s)
		}
	}
	checked := map[string]int{}
	for _, c := range rep.Checks {
		checked[c.Name] = c.Passed
		if c.Failed > 0 {
			t.Errorf("check %s failed: %+v", c.Name, rep.Findings)
		}
	}
	// Per object, in full, on the first answer of each size: 1 + 1,500.
	if checked[convert.CheckAPIVersion] != 1501 || checked[convert.CheckResponseUID] != 22 {
		t.Errorf("checks passed: %v", checked)
	}
}

// TestConvertLoadMatchesABareClient: the percentiles --load reports are the webhook's, not
// the tool's. At agnhost, a bare client POSTs the same bytes between the timed requests of a
// load run (in its progress callback, which runs after each timed request), so the two
// measurements alternate request by request and share whatever else the machine is doing; the
// run's p50 must be within 10% of the bare client's median (and, to show the size of the noise,
// the two p99s are logged).
func TestConvertLoadMatchesABareClient(t *testing.T) {
	a := startAgnhost(t)
	crd := a.e2eCRD()
	const requests = 150

	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(a.caBundle)
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}, ForceAttemptHTTP2: true}}
	var objects []convert.Object
	raws := make([][]byte, 1500)
	for i := range raws {
		obj := map[string]any{"apiVersion": "stable.example.com/v1", "kind": "E2eTestCrd", "hostPort": fmt.Sprintf("localhost:%d", 8080+i%10),
			"metadata": map[string]any{"name": fmt.Sprintf("cr-instance-%d", i%10), "namespace": "default"}}
		if i < 10 {
			objects = append(objects, convert.Object{Source: fmt.Sprint("object ", i), Object: obj})
		}
		raws[i], _ = json.Marshal(obj)
	}
	bareBody, err := convert.BuildReview("v1", types.UID("00000000-0000-0000-0000-000000000000"), "stable.example.com/v2", raws)
	if err != nil {
		t.Fatal(err)
	}
	var bare []time.Duration
	post := func() time.Duration {
		start := time.Now()
		resp, err := client.Post(a.url, "application/json", bytes.NewReader(bareBody))
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.ReadAll(resp.Body)
		resp.Body.Close()
		return time.Since(start)
	}
	post() // the bare client's connection, as the load run's untimed request opens its own
	tr, err := convert.NewHTTPTransport(crd, convert.TransportOptions{})
	if err != nil {
		t.Fatal(err)
	}
	rep, err := convert.Load(context.Background(), convert.LoadOptions{CRD: crd, To: "v2", Transport: tr, Sizes: convert.KEP95Sizes[1:2], Requests: requests,
		Progress: func(_, _, _ int) { bare = append(bare, post()) }}, objects)
	if err != nil {
		t.Fatal(err)
	}
	s := rep.Sizes[0]
	if s.Requests != requests || len(bare) != requests || s.Verdict != convert.VerdictWithin {
		t.Fatalf("load run: %+v, %d bare requests", s, len(bare))
	}
	if s.RequestBytes != len(bareBody) {
		t.Fatalf("--load sent %d bytes per request, the bare client %d", s.RequestBytes, len(bareBody))
	}
	tool := time.Duration(s.Latency.P50 * float64(time.Millisecond))
	mb := median(bare)
	sort.Slice(bare, func(i, j int) bool { return bare[i] < bare[j] })
	t.Logf("%d requests of 1,500 objects, alternating: --load p50 %s p99 %.1fms, bare client p50 %s p99 %s (%+.1f%% at p50)",
		requests, tool, s.Latency.P99, mb, bare[len(bare)*99/100], 100*(float64(tool)/float64(mb)-1))
	if d := float64(tool)/float64(mb) - 1; d > 0.10 || d < -0.10 {
		t.Errorf("--load's p50 %s is not within 10%% of the bare client's %s", tool, mb)
	}
}

func median(ds []time.Duration) time.Duration {
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[len(s)/2]
}
