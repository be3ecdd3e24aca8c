package testenv

import (
	"crypto/tls"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/crdver/kubectl-crdver/internal/testwebhook"
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
	ca, err := testwebhook.NewCA()
	if err != nil {
		return nil, err
	}
	certPEM, keyPEM, err := ca.Issue("127.0.0.1", []string{"localhost"}, []net.IP{net.ParseIP("127.0.0.1")}, false)
	if err != nil {
		return nil, err
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
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
	srv := &http.Server{Handler: mux, TLSConfig: &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.ServeTLS(ln, "", "") }()
	return &AdmissionServer{URL: fmt.Sprintf("https://%s/validate", ln.Addr()), CABundle: ca.CertPEM, srv: srv, ln: ln}, nil
}

// Close stops the server (and its listener, which http.Server.Close does not know of when the
// serving goroutine has not started yet).
func (s *AdmissionServer) Close() {
	_ = s.srv.Close()
	_ = s.ln.Close()
}
