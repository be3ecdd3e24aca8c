package main

import (
	"bytes"
	"crypto/tls"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/crdver/kubectl-crdver/internal/testca"
)

// TestURLPrivateCA: -f (and so --via, --releases and every other input that takes a URL)
// downloads over HTTPS from a server whose certificate a private authority signed, as a user
// behind a company's authority runs it: the built binary refuses with one line that names
// SSL_CERT_FILE, and with SSL_CERT_FILE naming the authority's certificate reads the file.
func TestURLPrivateCA(t *testing.T) {
	ca, err := testca.New()
	if err != nil {
		t.Fatal(err)
	}
	certPEM, keyPEM, err := ca.Issue("127.0.0.1", nil, []net.IP{net.ParseIP("127.0.0.1")}, false)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.ServeFile(w, r, filepath.Join("..", "..", "testdata", "crds", "crontab.yaml"))
	}))
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{cert}}
	srv.StartTLS()
	defer srv.Close()
	caFile := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(caFile, ca.CertPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	run := func(env ...string) (string, string, int) {
		cmd := exec.Command(filepath.Join(binDir, "kubectl-crdver"), "versions", "-f", srv.URL+"/crontab.yaml")
		cmd.Env = append(os.Environ(), "KUBECONFIG="+filepath.Join(t.TempDir(), "none"), "SSL_CERT_DIR="+t.TempDir())
		cmd.Env = append(cmd.Env, env...)
		var out, errOut bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errOut
		err := cmd.Run()
		var ee *exec.ExitError
		if err != nil && !errors.As(err, &ee) {
			t.Fatal(err)
		}
		return out.String(), errOut.String(), cmd.ProcessState.ExitCode()
	}
	// No SSL_CERT_FILE: the system's authorities (SSL_CERT_DIR points at an empty folder, so a
	// machine whose store trusted everything would not make this pass).
	_, stderr, code := run("SSL_CERT_FILE=" + filepath.Join(t.TempDir(), "no-such-file"))
	if code != 3 || strings.Count(strings.TrimSpace(stderr), "\n") != 0 ||
		!strings.Contains(stderr, "certificate signed by unknown authority") || !strings.Contains(stderr, "SSL_CERT_FILE=FILE") {
		t.Fatalf("untrusted: want exit 3 and one line naming SSL_CERT_FILE, got exit %d:\n%s", code, stderr)
	}
	stdout, stderr, code := run("SSL_CERT_FILE=" + caFile)
	if code != 0 || !strings.Contains(stdout, "v1beta1") {
		t.Fatalf("trusted through SSL_CERT_FILE: exit %d\n%s%s", code, stdout, stderr)
	}
}
