package testenv

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
)

// CertManagerWebhook is cert-manager's own webhook (./cmd/webhook of
// github.com/jetstack/cert-manager, built from the Go module proxy by hack/build-webhook.sh),
// running as a process over HTTPS with a loopback certificate of a test CA: its conversion of
// cert-manager.io and acme.cert-manager.io objects between v1alpha2, v1alpha3, v1beta1 and v1 is
// cert-manager's real one. It answers ConversionReview v1 only.
type CertManagerWebhook struct {
	URL      string // https://127.0.0.1:PORT/convert
	CABundle []byte
	Version  string // the cert-manager release it is built from

	cmd  *exec.Cmd
	mu   sync.Mutex
	logs bytes.Buffer
}

// CertManagerWebhookBinary builds (once, cached: hack/build-webhook.sh cert-manager VERSION;
// "" is the default version of hack/tools/cm-webhook/versions) cert-manager's webhook and
// returns its path. When it cannot be built the test fails under CI=true and is skipped
// otherwise, with the reason. Call it before a test moves HOME (see buildEnv).
func CertManagerWebhookBinary(t testing.TB, version string) string {
	t.Helper()
	args := []string{"cert-manager"}
	if version != "" {
		args = append(args, version)
	}
	return projectBinary(t, "cert-manager's webhook", args...)
}

// StartCertManagerWebhook builds (cached) and starts cert-manager's webhook of release version
// ("" for the default) for one test, with static TLS files (--tls-cert-file,
// --tls-private-key-file) and kubeconfig (it builds a client at start, for its validating
// plugins; conversion never calls the API server). cert-manager's webhook listens on all
// interfaces (":PORT", no flag takes a host); the URL names 127.0.0.1. It is stopped when the
// test ends; StartCertManagerWebhook returns once it has converted one Issuer.
func StartCertManagerWebhook(t testing.TB, version, kubeconfig string) *CertManagerWebhook {
	t.Helper()
	bin := CertManagerWebhookBinary(t, version)
	certFile, keyFile, caPEM := LocalhostCertFiles(t)
	w := &CertManagerWebhook{CABundle: caPEM, Version: filepath.Base(filepath.Dir(bin))}
	w.Version = strings.TrimPrefix(w.Version, "cm-webhook-")
	if i := strings.LastIndexByte(w.Version, '-'); i > 0 {
		w.Version = w.Version[:i]
	}
	// Its ports are flags: free ones are picked, and taken again if another process took one
	// in between.
	var lastErr error
	for attempt := 0; attempt < 3; attempt++ {
		ports, err := freePorts(2)
		if err != nil {
			t.Fatal(err)
		}
		if lastErr = w.start(t, bin, ports, certFile, keyFile, kubeconfig); lastErr == nil {
			return w
		}
	}
	t.Fatalf("cert-manager's webhook %s did not start: %v", w.Version, lastErr)
	return nil
}

func (w *CertManagerWebhook) start(t testing.TB, bin string, ports []int, certFile, keyFile, kubeconfig string) error {
	w.mu.Lock()
	w.logs.Reset()
	w.mu.Unlock()
	w.cmd = exec.Command(bin, "--secure-port", strconv.Itoa(ports[0]), "--healthz-port", strconv.Itoa(ports[1]),
		"--tls-cert-file", certFile, "--tls-private-key-file", keyFile, "--kubeconfig", kubeconfig)
	out := &lockedWriter{mu: &w.mu, buf: &w.logs}
	w.cmd.Stdout, w.cmd.Stderr = out, out
	if err := w.cmd.Start(); err != nil {
		t.Fatalf("starting %s: %v", bin, err)
	}
	done := make(chan struct{})
	go func() { _ = w.cmd.Wait(); close(done) }()
	stop := func() {
		_ = w.cmd.Process.Kill()
		<-done
	}
	w.URL = fmt.Sprintf("https://127.0.0.1:%d/convert", ports[0])
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := w.probe()
		if err == nil {
			break
		}
		select {
		case <-done:
			return fmt.Errorf("it exited before serving (%v):\n%s", err, w.Logs())
		default:
		}
		if time.Now().After(deadline) {
			stop()
			return fmt.Errorf("no conversion in 30s (%v):\n%s", err, w.Logs())
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Cleanup(func() {
		stop()
		if t.Failed() {
			t.Logf("cert-manager webhook logs:\n%s", w.Logs())
		}
	})
	return nil
}

// probe converts one v1alpha2 Issuer to v1.
func (w *CertManagerWebhook) probe() error {
	_, err := w.Convert("cert-manager.io/v1", map[string]any{"apiVersion": "cert-manager.io/v1alpha2", "kind": "Issuer",
		"metadata": map[string]any{"name": "probe", "namespace": "default"}, "spec": map[string]any{"selfSigned": map[string]any{}}})
	return err
}

// freePorts returns n loopback ports free at the time of the call.
func freePorts(n int) ([]int, error) {
	var out []int
	var lns []net.Listener
	defer func() {
		for _, ln := range lns {
			_ = ln.Close()
		}
	}()
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		lns = append(lns, ln)
		out = append(out, ln.Addr().(*net.TCPAddr).Port)
	}
	return out, nil
}

// Logs returns what the webhook wrote so far.
func (w *CertManagerWebhook) Logs() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.logs.String()
}

// PointCRD points crd's webhook conversion at this webhook (url and caBundle, in place of the
// in-cluster service cert-manager's CA injector would fill), keeping the CRD's strategy and
// conversionReviewVersions.
func (w *CertManagerWebhook) PointCRD(crd *apiextensionsv1.CustomResourceDefinition) {
	url := w.URL
	if crd.Spec.Conversion == nil || crd.Spec.Conversion.Webhook == nil {
		crd.Spec.Conversion = &apiextensionsv1.CustomResourceConversion{Strategy: apiextensionsv1.WebhookConverter,
			Webhook: &apiextensionsv1.WebhookConversion{ConversionReviewVersions: []string{"v1"}}}
	}
	crd.Spec.Conversion.Webhook.ClientConfig = &apiextensionsv1.WebhookClientConfig{URL: &url, CABundle: w.CABundle}
}

// Post sends body (a ConversionReview) to the webhook and returns the HTTP status and body.
func (w *CertManagerWebhook) Post(body []byte) (int, []byte, error) {
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(w.CABundle)
	client := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}}
	defer client.CloseIdleConnections()
	resp, err := client.Post(w.URL, "application/json", bytes.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, b, err
}

// Convert sends objs to the webhook in one ConversionReview v1 for desiredAPIVersion and
// returns the converted objects (an error for a failed review).
func (w *CertManagerWebhook) Convert(desiredAPIVersion string, objs ...map[string]any) ([]map[string]any, error) {
	req := map[string]any{"uid": "test", "desiredAPIVersion": desiredAPIVersion, "objects": objs}
	body, err := json.Marshal(map[string]any{"apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview", "request": req})
	if err != nil {
		return nil, err
	}
	status, b, err := w.Post(body)
	if err != nil {
		return nil, err
	}
	var got struct {
		Response *struct {
			ConvertedObjects []map[string]any `json:"convertedObjects"`
			Result           struct {
				Status, Message string
			} `json:"result"`
		} `json:"response"`
	}
	if err := json.Unmarshal(b, &got); err != nil || status != http.StatusOK || got.Response == nil {
		return nil, fmt.Errorf("conversion to %s: HTTP %d: %s", desiredAPIVersion, status, b)
	}
	if got.Response.Result.Status != "Success" {
		return nil, fmt.Errorf("conversion to %s: %s", desiredAPIVersion, got.Response.Result.Message)
	}
	return got.Response.ConvertedObjects, nil
}
