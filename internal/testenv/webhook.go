package testenv

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"

	"github.com/crdver/kubectl-crdver/internal/testca"
)

// AdmissionServer is a real HTTPS admission webhook on 127.0.0.1 with a certificate signed by
// its own CA (CABundle, for the webhook configuration's clientConfig).
type AdmissionServer struct {
	URL      string // https://127.0.0.1:PORT/validate
	CABundle []byte
	srv      *http.Server
	ln       net.Listener
}

// AdmissionFunc decides one request: nil allows it, an error denies it with its message.
type AdmissionFunc func(req *admissionv1.AdmissionRequest) error

// StartAdmissionServer starts a validating webhook answering AdmissionReview v1 with decide.
func StartAdmissionServer(decide AdmissionFunc) (*AdmissionServer, error) {
	mux := http.NewServeMux()
	mux.HandleFunc("/validate", func(w http.ResponseWriter, r *http.Request) {
		var review admissionv1.AdmissionReview
		if err := json.NewDecoder(r.Body).Decode(&review); err != nil || review.Request == nil {
			http.Error(w, "bad AdmissionReview", http.StatusBadRequest)
			return
		}
		resp := &admissionv1.AdmissionResponse{UID: review.Request.UID, Allowed: true}
		if err := decide(review.Request); err != nil {
			resp.Allowed = false
			resp.Result = &metav1.Status{Status: metav1.StatusFailure, Message: err.Error(), Code: http.StatusForbidden}
		}
		review.Response = resp
		review.Request = nil
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(&review)
	})
	srv, ln, caPEM, err := serveLocalTLS(mux)
	if err != nil {
		return nil, err
	}
	return &AdmissionServer{URL: fmt.Sprintf("https://%s/validate", ln.Addr()), CABundle: caPEM, srv: srv, ln: ln}, nil
}

// Close stops the server (and its listener, which http.Server.Close does not know of when the
// serving goroutine has not started yet).
func (s *AdmissionServer) Close() {
	_ = s.srv.Close()
	_ = s.ln.Close()
}

// RejectUpdates installs a validating webhook (a real HTTPS AdmissionServer) that denies the
// updates of gvr's objects for which reject returns a reason, and waits until the API server
// applies it: a dry-run update of the probe object (namespace/name, one that reject denies)
// is refused. The webhook configuration is removed and the server closed when the test ends.
func (e *Env) RejectUpdates(t testing.TB, gvr schema.GroupVersionResource, probeNamespace, probeName string, reject func(namespace, name string) string) {
	t.Helper()
	ctx := context.Background()
	hook, err := StartAdmissionServer(func(req *admissionv1.AdmissionRequest) error {
		if req.Operation != admissionv1.Update {
			return nil
		}
		if why := reject(req.Namespace, req.Name); why != "" {
			return errors.New(why)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(hook.Close)
	e.installWebhook(t, "reject-"+gvr.Resource+"."+gvr.Group, hook, admissionregistrationv1.ValidatingWebhook{Name: "reject." + gvr.Group,
		Rules: []admissionregistrationv1.RuleWithOperations{{Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Update},
			Rule: admissionregistrationv1.Rule{APIGroups: []string{gvr.Group}, APIVersions: []string{"*"}, Resources: []string{gvr.Resource}}}}})
	dyn, err := dynamic.NewForConfig(e.Config)
	if err != nil {
		t.Fatal(err)
	}
	ri := dyn.Resource(gvr).Namespace(probeNamespace)
	want := reject(probeNamespace, probeName)
	// The API server picks the configuration up asynchronously: wait until it rejects.
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		obj, err := ri.Get(ctx, probeName, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		_, err = ri.Update(ctx, obj, metav1.UpdateOptions{DryRun: []string{metav1.DryRunAll}})
		return err != nil && strings.Contains(err.Error(), want), nil
	})
	if err != nil {
		t.Fatalf("the rejecting webhook never took effect: %v", err)
	}
}

// serveLocalTLS serves h over HTTPS on a free port of 127.0.0.1 with a certificate of a new
// CA, whose certificate (PEM) it returns for the clients' trust. Close both srv and ln.
func serveLocalTLS(h http.Handler) (srv *http.Server, ln net.Listener, caPEM []byte, err error) {
	cert, caPEM, err := localhostCert()
	if err != nil {
		return nil, nil, nil, err
	}
	if ln, err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
		return nil, nil, nil, err
	}
	srv = &http.Server{Handler: h, TLSConfig: &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.ServeTLS(ln, "", "") }()
	return srv, ln, caPEM, nil
}

// localhostCert is a serving certificate for 127.0.0.1 and localhost from a new CA, and that
// CA's certificate (PEM) for the clients' trust (a caBundle, a kubeconfig).
func localhostCert() (tls.Certificate, []byte, error) {
	certPEM, keyPEM, caPEM, err := issueLocalhost()
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	return cert, caPEM, err
}

// issueLocalhost is a serving certificate and key for 127.0.0.1 and localhost from a new CA,
// and that CA's certificate, in PEM.
func issueLocalhost() (certPEM, keyPEM, caPEM []byte, err error) {
	ca, err := testca.New()
	if err != nil {
		return nil, nil, nil, err
	}
	certPEM, keyPEM, err = ca.Issue("127.0.0.1", []string{"localhost"}, []net.IP{net.ParseIP("127.0.0.1")}, false)
	return certPEM, keyPEM, ca.CertPEM, err
}

// LocalhostCertFiles writes a serving certificate and key for 127.0.0.1 and localhost (from a
// new CA) into a temporary folder of the test, for a webhook started as a process; caPEM is
// the CA's certificate, for a caBundle.
func LocalhostCertFiles(t testing.TB) (certFile, keyFile string, caPEM []byte) {
	t.Helper()
	certPEM, keyPEM, caPEM, err := issueLocalhost()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	certFile, keyFile = filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	if err := os.WriteFile(certFile, certPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, keyPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	return certFile, keyFile, caPEM
}
