// Package testwebhook is a real HTTPS conversion webhook for tests, benchmarks and the
// docs/commands/convert.md example: the CronTab seed example (stable.example.com v1beta1 spec.hostPort "host:port" ↔
// v1 spec.host and spec.port), served on 127.0.0.1 with a generated CA and serving
// certificate. Switches make it misbehave one way at a time.
package testwebhook

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kjson "sigs.k8s.io/json"

	"github.com/crdver/kubectl-crdver/internal/testca"
)

// Behaviour is one way to misbehave ("" is well-behaved).
type Behaviour string

// The misbehaviours.
const (
	Good             Behaviour = ""
	WrongUID         Behaviour = "wrong-uid"          // response.uid differs
	WrongCount       Behaviour = "wrong-count"        // one object too few
	Reorder          Behaviour = "reorder"            // objects in reverse order
	WrongAPIVersion  Behaviour = "wrong-apiversion"   // converted objects keep the old apiVersion
	WrongKind        Behaviour = "wrong-kind"         // kind changed
	Rename           Behaviour = "rename"             // metadata.name changed
	ChangeNamespace  Behaviour = "change-namespace"   // metadata.namespace changed
	ChangeUID        Behaviour = "change-uid"         // metadata.uid changed
	ChangeMetadata   Behaviour = "change-metadata"    // metadata.generateName and finalizers changed (discarded by the API server)
	BadLabel         Behaviour = "bad-label"          // an invalid label added
	NoMetadata       Behaviour = "no-metadata"        // metadata dropped
	Failed           Behaviour = "failed"             // result.status Failure with a message
	Non200           Behaviour = "non-200"            // HTTP 500
	WrongContentType Behaviour = "wrong-content-type" // text/plain
	MalformedJSON    Behaviour = "malformed-json"     // body is not JSON
	WrongReviewKind  Behaviour = "wrong-review-kind"  // response kind AdmissionReview
	NoReviewKind     Behaviour = "no-review-kind"     // response without apiVersion and kind
	NoResponse       Behaviour = "no-response"        // .response missing
	Slow             Behaviour = "slow"               // answers after Delay
	Lossy            Behaviour = "lossy"              // v1 -> v1beta1 drops spec.port
	UnknownField     Behaviour = "unknown-field"      // adds spec.extra, which no schema has
	InvalidInTarget  Behaviour = "invalid-in-target"  // v1 gets replicas 0 (minimum 1)
	Identity         Behaviour = "identity"           // any CRD: only apiVersion is rewritten (a no-op conversion)
	FailBatchIf      Behaviour = "fail-batch-if"      // result.status Failure for the whole request when any object matches SetPoison's test
	Non200BatchIf    Behaviour = "non-200-batch-if"   // HTTP 500 for the whole request when any object matches SetPoison's test
)

// PoisonAnnotation marks an object that FailBatchIf and Non200BatchIf fail on by default.
const PoisonAnnotation = "crdver.io/poison"

// Server is a running webhook.
type Server struct {
	// URL of the conversion endpoint (https://127.0.0.1:PORT/convert).
	URL string
	// Addr is HOST:PORT.
	Addr string
	// CABundle is the PEM CA that signed the serving certificate.
	CABundle []byte
	// ClientCAFile etc. are set when client certificates are required.
	ClientCert, ClientKey []byte

	srv       *http.Server
	listener  net.Listener
	mu        sync.Mutex
	behaviour Behaviour
	poison    func(obj map[string]any) bool
	delay     time.Duration
	latency   time.Duration
	requests  int
}

// Options of the server.
type Options struct {
	// DNSNames the serving certificate carries besides 127.0.0.1 and localhost (e.g.
	// "crontab-conversion.default.svc").
	DNSNames []string
	// RequireClientCert makes the server demand a client certificate signed by its CA;
	// Server.ClientCert/ClientKey hold one.
	RequireClientCert bool
}

// Start starts the webhook on 127.0.0.1 on a free port.
func Start(opts Options) (*Server, error) {
	ca, err := testca.New()
	if err != nil {
		return nil, err
	}
	certPEM, keyPEM, err := ca.Issue("crontab-conversion", append([]string{"localhost"}, opts.DNSNames...), []net.IP{net.ParseIP("127.0.0.1")}, false)
	if err != nil {
		return nil, err
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, err
	}
	s := &Server{CABundle: ca.CertPEM, delay: 2 * time.Second}
	tlsConfig := &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	if opts.RequireClientCert {
		s.ClientCert, s.ClientKey, err = ca.Issue("crdver-test-client", nil, nil, true)
		if err != nil {
			return nil, err
		}
		pool := x509.NewCertPool()
		pool.AppendCertsFromPEM(ca.CertPEM)
		tlsConfig.ClientCAs = pool
		tlsConfig.ClientAuth = tls.RequireAndVerifyClientCert
		// Under TLS 1.3 the refusal of a missing client certificate reaches the client only
		// after its side of the handshake is done, racing its first write (a broken pipe, or an
		// HTTP/2 preface error, instead of the TLS alert). TLS 1.2 refuses inside the handshake,
		// so what the client reports does not depend on timing.
		tlsConfig.MaxVersion = tls.VersionTLS12
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/convert", s.serve)
	s.srv = &http.Server{Handler: mux, TLSConfig: tlsConfig, ReadHeaderTimeout: 10 * time.Second, ErrorLog: nil}
	s.srv.ErrorLog = newQuietLogger()
	s.Addr = l.Addr().String()
	s.URL = "https://" + s.Addr + "/convert"
	s.listener = l
	go func() { _ = s.srv.ServeTLS(l, "", "") }()
	return s, nil
}

// StartForTest starts the webhook for a test and stops it when the test ends.
func StartForTest(t testing.TB, opts Options) *Server {
	t.Helper()
	srv, err := Start(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	return srv
}

// Close stops the server. The listener is closed here too: when Close runs before the serving
// goroutine has started, http.Server.Close does not know the listener yet, and connections
// would still be accepted by the kernel (and then reset) instead of refused.
func (s *Server) Close() {
	_ = s.srv.Close()
	_ = s.listener.Close()
}

// Set switches the behaviour.
func (s *Server) Set(b Behaviour) {
	s.mu.Lock()
	s.behaviour = b
	s.mu.Unlock()
}

// SetPoison sets the test FailBatchIf and Non200BatchIf apply to each object of a request (nil:
// the object has the PoisonAnnotation).
func (s *Server) SetPoison(poison func(obj map[string]any) bool) {
	s.mu.Lock()
	s.poison = poison
	s.mu.Unlock()
}

func hasPoisonAnnotation(obj map[string]any) bool {
	meta, _ := obj["metadata"].(map[string]any)
	ann, _ := meta["annotations"].(map[string]any)
	_, ok := ann[PoisonAnnotation]
	return ok
}

// SetDelay sets how long Slow waits.
func (s *Server) SetDelay(d time.Duration) {
	s.mu.Lock()
	s.delay = d
	s.mu.Unlock()
}

// SetLatency delays every answer by d, to stand for the network between the API server and a
// webhook running in a pod (benchmarks).
func (s *Server) SetLatency(d time.Duration) {
	s.mu.Lock()
	s.latency = d
	s.mu.Unlock()
}

// Requests returns how many requests were served.
func (s *Server) Requests() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.requests
}

// WebhookConversion returns a conversion section that points the CRD at this server by url.
func (s *Server) WebhookConversion(reviewVersions ...string) *apiextensionsv1.CustomResourceConversion {
	if len(reviewVersions) == 0 {
		reviewVersions = []string{"v1"}
	}
	url := s.URL
	return &apiextensionsv1.CustomResourceConversion{
		Strategy: apiextensionsv1.WebhookConverter,
		Webhook: &apiextensionsv1.WebhookConversion{
			ClientConfig:             &apiextensionsv1.WebhookClientConfig{URL: &url, CABundle: s.CABundle},
			ConversionReviewVersions: reviewVersions,
		},
	}
}

// review is both ConversionReview versions (same shape).
type review struct {
	APIVersion string `json:"apiVersion,omitempty"`
	Kind       string `json:"kind,omitempty"`
	Request    *struct {
		UID               string            `json:"uid"`
		DesiredAPIVersion string            `json:"desiredAPIVersion"`
		Objects           []json.RawMessage `json:"objects"`
	} `json:"request,omitempty"`
	Response *response `json:"response,omitempty"`
}

type response struct {
	UID              string           `json:"uid"`
	ConvertedObjects []map[string]any `json:"convertedObjects"`
	Result           metav1.Status    `json:"result"`
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	b, delay, latency, poison := s.behaviour, s.delay, s.latency, s.poison
	s.requests++
	s.mu.Unlock()
	if latency > 0 {
		time.Sleep(latency)
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var in review
	if err := kjson.UnmarshalCaseSensitivePreserveInts(body, &in); err != nil || in.Request == nil {
		http.Error(w, fmt.Sprintf("not a ConversionReview: %v", err), http.StatusBadRequest)
		return
	}
	if poison == nil {
		poison = hasPoisonAnnotation
	}
	poisoned := false
	if b == FailBatchIf || b == Non200BatchIf {
		for _, raw := range in.Request.Objects {
			var obj map[string]any
			if kjson.UnmarshalCaseSensitivePreserveInts(raw, &obj) == nil && poison(obj) {
				poisoned = true
			}
		}
	}
	switch {
	case b == Non200, b == Non200BatchIf && poisoned:
		http.Error(w, "internal error: conversion crashed", http.StatusInternalServerError)
		return
	case b == MalformedJSON:
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"apiVersion":"apiextensions.k8s.io/v1","kind":"ConversionReview","response":{`)
		return
	case b == Slow:
		select {
		case <-time.After(delay):
		case <-r.Context().Done():
			return
		}
	}
	out := review{APIVersion: in.APIVersion, Kind: "ConversionReview", Response: &response{UID: in.Request.UID, Result: metav1.Status{Status: metav1.StatusSuccess}}}
	for _, raw := range in.Request.Objects {
		var obj map[string]any
		if err := kjson.UnmarshalCaseSensitivePreserveInts(raw, &obj); err != nil {
			out.Response.Result = metav1.Status{Status: metav1.StatusFailure, Message: "cannot decode object: " + err.Error()}
			break
		}
		var converted map[string]any
		if b == Identity {
			converted = obj
			converted["apiVersion"] = in.Request.DesiredAPIVersion
			if _, ok := converted["metadata"]; !ok {
				// A typed webhook (controller-runtime, apimachinery conversion) always writes
				// metadata; the API server refuses a converted object without it, and sends
				// objects without metadata (server-side apply converts pruned field sets).
				converted["metadata"] = map[string]any{}
			}
		} else {
			converted, err = Convert(obj, in.Request.DesiredAPIVersion, b == Lossy)
		}
		if err != nil {
			out.Response.Result = metav1.Status{Status: metav1.StatusFailure, Message: err.Error()}
			out.Response.ConvertedObjects = nil
			break
		}
		out.Response.ConvertedObjects = append(out.Response.ConvertedObjects, converted)
	}
	objs := out.Response.ConvertedObjects
	meta := func(i int) map[string]any {
		m, _ := objs[i]["metadata"].(map[string]any)
		if m == nil {
			m = map[string]any{}
			objs[i]["metadata"] = m
		}
		return m
	}
	switch b {
	case WrongUID:
		out.Response.UID = "00000000-0000-0000-0000-000000000000"
	case WrongCount:
		if len(objs) > 0 {
			out.Response.ConvertedObjects = objs[:len(objs)-1]
		}
	case Reorder:
		for i, j := 0, len(objs)-1; i < j; i, j = i+1, j-1 {
			objs[i], objs[j] = objs[j], objs[i]
		}
	case WrongAPIVersion:
		for i := range objs {
			g, _, _ := strings.Cut(fmt.Sprint(objs[i]["apiVersion"]), "/")
			objs[i]["apiVersion"] = g + "/v1alpha1"
		}
	case WrongKind:
		for i := range objs {
			objs[i]["kind"] = "CronJob"
		}
	case Rename:
		for i := range objs {
			meta(i)["name"] = fmt.Sprint(meta(i)["name"], "-converted")
		}
	case ChangeNamespace:
		for i := range objs {
			meta(i)["namespace"] = "elsewhere"
		}
	case ChangeUID:
		for i := range objs {
			meta(i)["uid"] = "11111111-1111-1111-1111-111111111111"
		}
	case ChangeMetadata:
		for i := range objs {
			meta(i)["generateName"] = "converted-"
			meta(i)["finalizers"] = []any{"example.com/converted"}
		}
	case BadLabel:
		for i := range objs {
			labels, _ := meta(i)["labels"].(map[string]any)
			if labels == nil {
				labels = map[string]any{}
				meta(i)["labels"] = labels
			}
			labels["converted-by"] = "crontab webhook!"
		}
	case NoMetadata:
		for i := range objs {
			delete(objs[i], "metadata")
		}
	case Failed:
		out.Response.ConvertedObjects = nil
		out.Response.Result = metav1.Status{Status: metav1.StatusFailure, Message: "conversion refused: spec.hostPort is required"}
	case FailBatchIf:
		if poisoned {
			out.Response.ConvertedObjects = nil
			out.Response.Result = metav1.Status{Status: metav1.StatusFailure, Message: "conversion failed: cannot convert one of the objects"}
		}
	case WrongReviewKind:
		out.Kind = "AdmissionReview"
	case NoReviewKind:
		out.APIVersion, out.Kind = "", ""
	case NoResponse:
		out.Response = nil
	case UnknownField:
		for i := range objs {
			if spec, ok := objs[i]["spec"].(map[string]any); ok {
				spec["extra"] = "not in any schema"
			}
		}
	case InvalidInTarget:
		for i := range objs {
			if spec, ok := objs[i]["spec"].(map[string]any); ok && version(objs[i]["apiVersion"]) == "v1" {
				spec["replicas"] = int64(0)
			}
		}
	}
	js, err := json.Marshal(out)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	if b == WrongContentType {
		w.Header().Set("Content-Type", "text/plain")
	} else {
		w.Header().Set("Content-Type", "application/json")
	}
	_, _ = w.Write(js)
}
