package testenv

import (
	"bufio"
	"bytes"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
)

// CAPIWebhook is Cluster API's own conversion webhook (hack/tools/capi-webhook: controller-
// runtime's conversion handler with Cluster API's scheme and v1beta1 <-> v1beta2 converters),
// running as a process on 127.0.0.1 over HTTPS with a certificate of a test CA.
type CAPIWebhook struct {
	URL      string // https://127.0.0.1:PORT/convert
	CABundle []byte
	Version  string // the sigs.k8s.io/cluster-api version it is built from

	cmd  *exec.Cmd
	mu   sync.Mutex
	logs bytes.Buffer
}

// CAPIRefVersions are the versions StartCAPIWebhook's webhook gives the providers' references
// when it converts v1beta2 back to v1beta1 (Cluster API reads them from the provider CRDs'
// contract labels; these are those of the v1.10 providers the testdata manifests name).
var CAPIRefVersions = []string{
	"infrastructure.cluster.x-k8s.io=v1beta1",
	"controlplane.cluster.x-k8s.io=v1beta1",
	"bootstrap.cluster.x-k8s.io=v1beta1",
}

// CAPIWebhookBinary builds (once, cached: hack/build-webhook.sh capi) Cluster API's conversion
// webhook and returns its path. When it cannot be built the test fails under CI=true and is
// skipped otherwise, with the reason.
func CAPIWebhookBinary(t testing.TB) string {
	t.Helper()
	return projectBinary(t, "Cluster API's conversion webhook", "capi")
}

// StartCAPIWebhook builds (cached) and starts Cluster API's conversion webhook for one test,
// with --ref-version for each of CAPIRefVersions, then args (more of its flags: a later
// --ref-version of the same group wins; --json-content-type). It is stopped when the test ends.
func StartCAPIWebhook(t testing.TB, args ...string) *CAPIWebhook {
	t.Helper()
	bin := CAPIWebhookBinary(t)
	certFile, keyFile, caPEM := LocalhostCertFiles(t)
	flags := []string{"--listen", "127.0.0.1:0", "--tls-cert-file", certFile, "--tls-key-file", keyFile}
	for _, r := range CAPIRefVersions {
		flags = append(flags, "--ref-version", r)
	}
	args = append(flags, args...)
	w := &CAPIWebhook{CABundle: caPEM, Version: filepath.Base(filepath.Dir(bin))}
	w.Version = strings.TrimPrefix(w.Version, "capi-webhook-")
	if i := strings.LastIndexByte(w.Version, '-'); i > 0 {
		w.Version = w.Version[:i]
	}
	w.cmd = exec.Command(bin, args...)
	stdout, err := w.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	w.cmd.Stderr = &lockedWriter{mu: &w.mu, buf: &w.logs}
	if err := w.cmd.Start(); err != nil {
		t.Fatalf("starting %s: %v", bin, err)
	}
	done := make(chan struct{})
	go func() { _ = w.cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		_ = w.cmd.Process.Kill()
		<-done
		if t.Failed() {
			t.Logf("capi-webhook logs:\n%s", w.Logs())
		}
	})
	url := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if u, ok := strings.CutPrefix(sc.Text(), "serving "); ok {
				url <- u
			}
		}
	}()
	select {
	case w.URL = <-url:
	case <-done:
		t.Fatalf("capi-webhook exited before serving:\n%s", w.Logs())
	case <-time.After(30 * time.Second):
		t.Fatalf("capi-webhook did not start serving in 30s:\n%s", w.Logs())
	}
	return w
}

// Logs returns what the webhook wrote to its standard error so far.
func (w *CAPIWebhook) Logs() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.logs.String()
}

// PointCRD makes crd's conversion this webhook's: strategy Webhook, its URL and caBundle,
// ConversionReview v1 (what Cluster API's kustomize patch and cert-manager's CA injection give
// the CRDs in a real installation).
func (w *CAPIWebhook) PointCRD(crd *apiextensionsv1.CustomResourceDefinition) {
	url := w.URL
	crd.Spec.Conversion = &apiextensionsv1.CustomResourceConversion{
		Strategy: apiextensionsv1.WebhookConverter,
		Webhook: &apiextensionsv1.WebhookConversion{
			ClientConfig:             &apiextensionsv1.WebhookClientConfig{URL: &url, CABundle: w.CABundle},
			ConversionReviewVersions: []string{"v1"},
		},
	}
}

// CAPIReleaseCRDs reads the Cluster API CRDs of testdata/releases/cluster-api/<version>, each
// pointed at w (when not nil).
func CAPIReleaseCRDs(t testing.TB, version string, w *CAPIWebhook) []*apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	root, err := RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	files, err := filepath.Glob(filepath.Join(root, "testdata", "releases", "cluster-api", version, "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no Cluster API %s CRDs in testdata/releases/cluster-api (%v)", version, err)
	}
	var out []*apiextensionsv1.CustomResourceDefinition
	for _, f := range files {
		for _, crd := range ReadCRDs(t, f) {
			if w != nil {
				w.PointCRD(crd)
			}
			out = append(out, crd)
		}
	}
	return out
}
