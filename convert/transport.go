package convert

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
)

// Transport posts a ConversionReview to the webhook.
type Transport interface {
	// Post sends body and returns the HTTP response. An error means no HTTP response was
	// received (connection, TLS, timeout): it is a *TransportError.
	Post(ctx context.Context, body []byte) (*HTTPResponse, error)
	// Describe says how the webhook is reached, for the report.
	Describe() string
}

// HTTPResponse is what came back.
type HTTPResponse struct {
	StatusCode  int
	ContentType string
	Body        []byte
}

// TransportError is a failure to get an HTTP response. Timeout tells a slow webhook from an
// unreachable one; Hint says what to do about it (a command words it with its own flags).
type TransportError struct {
	Timeout bool
	Err     error
	Hint    Hint
}

func (e *TransportError) Error() string {
	if a := e.Hint.Advice(); a != "" {
		return e.Err.Error() + " (" + a + ")"
	}
	return e.Err.Error()
}
func (e *TransportError) Unwrap() error { return e.Err }

// Hint is what to do about a TransportError.
type Hint string

// The hints.
const (
	HintTimeout      Hint = "timeout"       // the webhook is too slow: make it faster, or measure it with a longer timeout
	HintCA           Hint = "ca"            // the certificate is not signed by the caBundle: fix it, or give the right CA
	HintServerName   Hint = "server-name"   // the certificate lacks the name the API server uses
	HintRenew        Hint = "renew"         // the certificate is expired or not yet valid
	HintTLS          Hint = "tls"           // another TLS failure: certificate, caBundle, client certificate
	HintConnect      Hint = "connect"       // nothing answers: is it running, is the port-forward up?
	HintServiceProxy Hint = "service-proxy" // the API server's service proxy could not reach the service
	HintReachable    Hint = "reachable"     // anything else
)

// Advice words h without naming any command-line flag.
func (h Hint) Advice() string {
	switch h {
	case HintTimeout:
		return "the API server would fail the conversion too; make the webhook faster, or measure it with a longer timeout"
	case HintCA:
		return "fix spec.conversion.webhook.clientConfig.caBundle, or give the CA that signed the webhook's certificate"
	case HintServerName:
		return "the serving certificate must carry the name the API server uses (for a service: <service>.<namespace>.svc) as a subject alternative name"
	case HintRenew:
		return "renew the webhook's serving certificate"
	case HintTLS:
		return "check the webhook's certificate, the caBundle, and the client certificate if the webhook demands one"
	case HintConnect:
		return "is the webhook running? for a service, port-forward to it and give the local address, or go through the API server's service proxy"
	case HintServiceProxy:
		return "check that the service exists and has ready endpoints, and that you may create services/proxy in its namespace"
	case HintReachable:
		return "check that the webhook is running and reachable"
	}
	return ""
}

// OptionError is a TransportOptions field that cannot be used. Field is the Go field name
// (Address, CAFile, ClientCert, ClientKey).
type OptionError struct {
	Field string
	Value string
	Err   error
}

var optionWords = map[string]string{"Address": "webhook address", "CAFile": "CA file", "ClientCert": "client certificate", "ClientKey": "client key"}

func (e *OptionError) Error() string {
	return fmt.Sprintf("%s %q: %v", optionWords[e.Field], e.Value, e.Err)
}
func (e *OptionError) Unwrap() error { return e.Err }

// ServiceAddressError: the webhook is a service, and no local address to reach it was given.
type ServiceAddressError struct {
	CRD, Namespace, Name string
	Port                 int32
}

func (e *ServiceAddressError) Error() string {
	return fmt.Sprintf("%s: the conversion webhook is service %s/%s port %d: give a local address to reach it (e.g. after kubectl port-forward -n %s svc/%s 9443:%d), or go through the API server's service proxy",
		e.CRD, e.Namespace, e.Name, e.Port, e.Namespace, e.Name, e.Port)
}

// NotServiceError: the API server's service proxy was asked for, but the webhook is a url.
type NotServiceError struct{ CRD, URL string }

func (e *NotServiceError) Error() string {
	return fmt.Sprintf("%s: the API server's service proxy needs a service-referenced webhook, but clientConfig has url %q: call it directly", e.CRD, e.URL)
}

// TransportOptions say how to reach the webhook of a CRD's clientConfig.
type TransportOptions struct {
	// Address (HOST:PORT) to connect to instead of the clientConfig's host: for a service,
	// e.g. after kubectl port-forward. TLS is still verified with the name of the clientConfig
	// (<service>.<namespace>.svc for a service).
	Address string
	// CAFile replaces the clientConfig's caBundle (PEM).
	CAFile string
	// InsecureSkipVerify turns TLS verification off.
	InsecureSkipVerify bool
	// ClientCert and ClientKey are a PEM client certificate and key, for webhooks that demand one.
	ClientCert, ClientKey string
	// Timeout per request (0: 30s, the API server's default for conversion webhooks).
	Timeout time.Duration
}

// DefaultTimeout is the per-request timeout when none is given.
const DefaultTimeout = 30 * time.Second

// httpTransport posts to a URL with a TLS configuration built from the clientConfig.
type httpTransport struct {
	client   *http.Client
	url      string
	describe string
	timeout  time.Duration
}

// NewHTTPTransport reaches the webhook of crd directly: its url, or its service through
// opts.Address. TLS is verified against the caBundle (or opts.CAFile) with the server name
// of the clientConfig unless opts.InsecureSkipVerify.
func NewHTTPTransport(crd *apiextensionsv1.CustomResourceDefinition, opts TransportOptions) (Transport, error) {
	cc, err := webhookClientConfig(crd)
	if err != nil {
		return nil, err
	}
	var target *url.URL
	var serverName, describe string
	switch {
	case cc.URL != nil:
		target, err = url.Parse(*cc.URL)
		if err != nil {
			return nil, fmt.Errorf("%s: spec.conversion.webhook.clientConfig.url %q: %w", crd.Name, *cc.URL, err)
		}
		if target.Scheme != "https" {
			return nil, fmt.Errorf("%s: spec.conversion.webhook.clientConfig.url %q must be https", crd.Name, *cc.URL)
		}
		serverName = target.Hostname()
		describe = "url " + target.String()
	case cc.Service != nil:
		svc := cc.Service
		port := int32(443)
		if svc.Port != nil {
			port = *svc.Port
		}
		path := ""
		if svc.Path != nil {
			path = *svc.Path
		}
		serverName = svc.Name + "." + svc.Namespace + ".svc"
		target = &url.URL{Scheme: "https", Host: net.JoinHostPort(serverName, strconv.Itoa(int(port))), Path: path}
		if opts.Address == "" {
			return nil, &ServiceAddressError{CRD: crd.Name, Namespace: svc.Namespace, Name: svc.Name, Port: port}
		}
		describe = fmt.Sprintf("service %s/%s:%d%s", svc.Namespace, svc.Name, port, path)
	default:
		return nil, fmt.Errorf("%s: spec.conversion.webhook.clientConfig has neither url nor service", crd.Name)
	}
	if opts.Address != "" {
		if _, _, err := net.SplitHostPort(opts.Address); err != nil {
			return nil, &OptionError{Field: "Address", Value: opts.Address, Err: errors.New("want HOST:PORT, e.g. 127.0.0.1:9443")}
		}
		describe += " via " + opts.Address
	}

	tlsConfig := &tls.Config{ServerName: serverName, MinVersion: tls.VersionTLS12}
	switch {
	case opts.InsecureSkipVerify:
		tlsConfig.InsecureSkipVerify = true
		describe += ", TLS not verified (verification turned off)"
	case opts.CAFile != "":
		pem, err := os.ReadFile(opts.CAFile)
		if err != nil {
			return nil, &OptionError{Field: "CAFile", Value: opts.CAFile, Err: err}
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, &OptionError{Field: "CAFile", Value: opts.CAFile, Err: errors.New("no PEM certificates in it")}
		}
		tlsConfig.RootCAs = pool
		describe += ", TLS verified against the CA file " + opts.CAFile + " as " + serverName
	case len(bytes.TrimSpace(cc.CABundle)) > 0:
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(cc.CABundle) {
			return nil, fmt.Errorf("%s: spec.conversion.webhook.clientConfig.caBundle holds no PEM certificate", crd.Name)
		}
		tlsConfig.RootCAs = pool
		describe += ", TLS verified against caBundle as " + serverName
	default:
		describe += ", TLS verified against the system roots as " + serverName + " (no caBundle)"
	}
	if opts.ClientCert != "" || opts.ClientKey != "" {
		if opts.ClientCert == "" || opts.ClientKey == "" {
			return nil, &OptionError{Field: "ClientCert", Value: opts.ClientCert, Err: errors.New("a client certificate and its key go together")}
		}
		cert, err := tls.LoadX509KeyPair(opts.ClientCert, opts.ClientKey)
		if err != nil {
			return nil, &OptionError{Field: "ClientCert", Value: opts.ClientCert, Err: fmt.Errorf("with key %q: %w", opts.ClientKey, err)}
		}
		tlsConfig.Certificates = []tls.Certificate{cert}
	}
	dialer := &net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}
	tr := &http.Transport{
		TLSClientConfig:     tlsConfig,
		ForceAttemptHTTP2:   true,
		MaxIdleConnsPerHost: 4,
		DialContext:         dialer.DialContext,
		TLSHandshakeTimeout: 10 * time.Second,
	}
	if opts.Address != "" {
		addr := opts.Address
		tr.DialContext = func(ctx context.Context, network, _ string) (net.Conn, error) {
			return dialer.DialContext(ctx, network, addr)
		}
	}
	timeout := opts.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	return &httpTransport{client: &http.Client{Transport: tr}, url: target.String(), describe: describe, timeout: timeout}, nil
}

func (t *httpTransport) Describe() string { return t.describe }

func (t *httpTransport) Post(ctx context.Context, body []byte) (*HTTPResponse, error) {
	ctx, cancel := context.WithTimeout(ctx, t.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, t.url, bytes.NewReader(body))
	if err != nil {
		return nil, &TransportError{Err: err}
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	resp, err := t.client.Do(req)
	if err != nil {
		return nil, classify(ctx, err, t.timeout)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, classify(ctx, err, t.timeout)
	}
	return &HTTPResponse{StatusCode: resp.StatusCode, ContentType: resp.Header.Get("Content-Type"), Body: b}, nil
}

// classify turns a transport failure into a TransportError that says what to do.
func classify(ctx context.Context, err error, timeout time.Duration) *TransportError {
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	var unknownAuthority x509.UnknownAuthorityError
	var hostname x509.HostnameError
	var invalid x509.CertificateInvalidError
	var netErr net.Error
	var opErr *net.OpError
	switch {
	case errors.Is(ctx.Err(), context.DeadlineExceeded) || errors.Is(err, context.DeadlineExceeded):
		return &TransportError{Timeout: true, Err: fmt.Errorf("no response within %s", timeout), Hint: HintTimeout}
	case errors.As(err, &unknownAuthority):
		return &TransportError{Err: fmt.Errorf("TLS: the webhook's certificate is not signed by the caBundle: %w", err), Hint: HintCA}
	case errors.As(err, &hostname):
		return &TransportError{Err: fmt.Errorf("TLS: %w", err), Hint: HintServerName}
	case errors.As(err, &invalid):
		return &TransportError{Err: fmt.Errorf("TLS: %w", err), Hint: HintRenew}
	case strings.Contains(err.Error(), "tls:") || strings.Contains(err.Error(), "x509:"),
		// The TCP connection was made but TLS or HTTP/2 set-up failed after the handshake: with
		// TLS 1.3 a server that refuses the client certificate says so only then, and under load
		// the HTTP/2 client reports that race as this instead of the TLS alert.
		strings.Contains(err.Error(), "http2: client conn could not be established"):
		return &TransportError{Err: fmt.Errorf("TLS: %w", err), Hint: HintTLS}
	case errors.As(err, &opErr) && opErr.Op == "dial":
		return &TransportError{Err: fmt.Errorf("cannot connect: %w", err), Hint: HintConnect}
	case errors.As(err, &netErr) && netErr.Timeout():
		return &TransportError{Timeout: true, Err: fmt.Errorf("no response within %s: %w", timeout, err), Hint: HintTimeout}
	}
	return &TransportError{Err: err, Hint: HintReachable}
}

// serviceProxyTransport posts through the API server's service proxy.
type serviceProxyTransport struct {
	client                rest.Interface
	namespace, name, path string
	port                  int32
	timeout               time.Duration
}

// NewServiceProxyTransport reaches a service-referenced webhook through the API server's
// service proxy (POST .../services/https:NAME:PORT/proxy/PATH). client is a core/v1 REST
// client (clientset.CoreV1().RESTClient()). The API server does not verify the caBundle on
// this path; the description says so.
func NewServiceProxyTransport(crd *apiextensionsv1.CustomResourceDefinition, client rest.Interface, timeout time.Duration) (Transport, error) {
	cc, err := webhookClientConfig(crd)
	if err != nil {
		return nil, err
	}
	if cc.Service == nil {
		return nil, &NotServiceError{CRD: crd.Name, URL: *cc.URL}
	}
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	t := &serviceProxyTransport{client: client, namespace: cc.Service.Namespace, name: cc.Service.Name, port: 443, timeout: timeout}
	if cc.Service.Port != nil {
		t.port = *cc.Service.Port
	}
	if cc.Service.Path != nil {
		t.path = *cc.Service.Path
	}
	return t, nil
}

func (t *serviceProxyTransport) Describe() string {
	return fmt.Sprintf("service %s/%s:%d%s through the API server's service proxy (the caBundle is NOT verified on this path)", t.namespace, t.name, t.port, t.path)
}

func (t *serviceProxyTransport) Post(ctx context.Context, body []byte) (*HTTPResponse, error) {
	ctx, cancel := context.WithTimeout(ctx, t.timeout)
	defer cancel()
	req := t.client.Post().Namespace(t.namespace).Resource("services").
		Name(fmt.Sprintf("https:%s:%d", t.name, t.port)).SubResource("proxy").
		SetHeader("Content-Type", "application/json").Body(body)
	if t.path != "" {
		req = req.Suffix(t.path)
	}
	var code int
	var ct string
	res := req.Do(ctx).StatusCode(&code).ContentType(&ct)
	raw, err := res.Raw()
	if code == 0 && err != nil {
		return nil, classify(ctx, err, t.timeout)
	}
	if code >= 400 {
		// The proxy's own errors (no such service, no endpoints, forbidden) come back as a
		// Status: the webhook was not reached.
		var st metav1.Status
		if json.Unmarshal(raw, &st) == nil && st.Kind == "Status" && st.APIVersion == "v1" {
			return nil, &TransportError{Err: fmt.Errorf("the API server's service proxy answered %d: %s", code, st.Message), Hint: HintServiceProxy}
		}
	}
	return &HTTPResponse{StatusCode: code, ContentType: ct, Body: raw}, nil
}

func webhookClientConfig(crd *apiextensionsv1.CustomResourceDefinition) (*apiextensionsv1.WebhookClientConfig, error) {
	c := crd.Spec.Conversion
	if c == nil || c.Strategy != apiextensionsv1.WebhookConverter || c.Webhook == nil || c.Webhook.ClientConfig == nil {
		return nil, fmt.Errorf("%s: spec.conversion.strategy is not Webhook: there is no webhook to call", crd.Name)
	}
	return c.Webhook.ClientConfig, nil
}

// DefaultTransport is the way to crd's conversion webhook that needs no option: its URL
// directly (TLS verified against the caBundle), or, for a service, the API server's service
// proxy through client (core/v1's REST client; the caBundle is not verified on that path).
func DefaultTransport(crd *apiextensionsv1.CustomResourceDefinition, client rest.Interface, timeout time.Duration) (Transport, error) {
	cc, err := webhookClientConfig(crd)
	if err != nil {
		return nil, err
	}
	if cc.URL != nil {
		return NewHTTPTransport(crd, TransportOptions{Timeout: timeout})
	}
	if client == nil {
		return nil, fmt.Errorf("%s: the conversion webhook is a service and no client for the API server's service proxy was given", crd.Name)
	}
	return NewServiceProxyTransport(crd, client, timeout)
}
