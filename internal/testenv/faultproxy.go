package testenv

import (
	"bytes"
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// FaultProxy is an HTTPS reverse proxy in front of an API server that answers a fraction of
// the requests with the errors an API server under load, restarting, or behind a load
// balancer gives:
//
//   - 429 Too Many Requests with Retry-After (API Priority and Fairness), before the request
//     reaches the server;
//   - 503 Service Unavailable without Retry-After (a load balancer with no healthy backend),
//     before the request reaches the server;
//   - 500 Internal Error after the server carried the request out ("etcdserver: request timed
//     out" on the reply: the write happened, the client is told it failed).
//
// It terminates TLS with its own CA and authenticates to the API server with the admin's
// credentials, so it sees every request; it records writes the API server carried out twice
// with the same body, the second changing the object again (Duplicates).
type FaultProxy struct {
	// URL is the proxy's address (https://127.0.0.1:port).
	URL string

	ca       []byte
	srv      *http.Server
	ln       net.Listener
	mu       sync.Mutex
	rnd      *rand.Rand
	rate     float64
	match    func(*http.Request) bool
	injected map[int]int
	written  map[string]string // write key → resourceVersion the first 2xx answer gave
	dups     []string
}

// StartFaultProxy starts a proxy in front of env that fails nothing until Fail is called.
func StartFaultProxy(env *Env) (*FaultProxy, error) {
	cert, caPEM, err := localhostCert()
	if err != nil {
		return nil, err
	}
	upstream, err := url.Parse(env.Config.Host)
	if err != nil {
		return nil, err
	}
	rt, err := rest.TransportFor(env.Config)
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &FaultProxy{URL: "https://" + ln.Addr().String(), ca: caPEM, ln: ln, rnd: rand.New(rand.NewPCG(3, 4)),
		injected: map[int]int{}, written: map[string]string{}}
	rp := &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(upstream)
			r.Out.Host = upstream.Host
		},
		Transport:     rt,
		FlushInterval: -1, // watches stream
	}
	p.srv = &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { p.serve(w, r, rp) }),
		TLSConfig: &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = p.srv.ServeTLS(ln, "", "") }()
	return p, nil
}

// Fail makes the proxy fail a fraction rate of the requests match selects (nil: every
// request), each time with one of the three errors at random.
func (p *FaultProxy) Fail(rate float64, match func(*http.Request) bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.rate, p.match = rate, match
}

// Injected is how many responses of each status code the proxy made up.
func (p *FaultProxy) Injected() map[int]int {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := map[int]int{}
	for k, v := range p.injected {
		out[k] = v
	}
	return out
}

// Duplicates are the writes (not dry runs) the API server carried out more than once with the
// same method, path and body, the later one changing the object again (another
// resourceVersion): a client that repeats a write whose first try went through. A repeat the
// server took as a no-op (the same resourceVersion: a server-side apply of the same intent)
// changes nothing and is not one.
func (p *FaultProxy) Duplicates() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.dups...)
}

// Kubeconfig writes, into dir, a kubeconfig for the proxy (no credentials: the proxy holds
// the admin's).
func (p *FaultProxy) Kubeconfig(dir string) (string, error) {
	kc := clientcmdapi.NewConfig()
	kc.Clusters["faulty"] = &clientcmdapi.Cluster{Server: p.URL, CertificateAuthorityData: p.ca}
	kc.AuthInfos["admin"] = &clientcmdapi.AuthInfo{}
	kc.Contexts["faulty"] = &clientcmdapi.Context{Cluster: "faulty", AuthInfo: "admin", Namespace: "default"}
	kc.CurrentContext = "faulty"
	path := filepath.Join(dir, "kubeconfig-faulty")
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		return "", fmt.Errorf("writing %s: %w", path, err)
	}
	return path, os.Chmod(path, 0o600)
}

// Close stops the proxy.
func (p *FaultProxy) Close() {
	_ = p.srv.Close()
	_ = p.ln.Close()
}

func (p *FaultProxy) serve(w http.ResponseWriter, r *http.Request, rp *httputil.ReverseProxy) {
	write := r.Method != http.MethodGet && r.Method != http.MethodHead && !strings.Contains(r.URL.RawQuery, "dryRun=All")
	var key string
	if write {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		sum := sha256.Sum256(body)
		key = r.Method + " " + r.URL.Path + " " + hex.EncodeToString(sum[:8])
	}
	code := 0
	p.mu.Lock()
	if r.URL.Query().Get("watch") != "true" && p.rate > 0 && (p.match == nil || p.match(r)) && p.rnd.Float64() < p.rate {
		code = []int{http.StatusTooManyRequests, http.StatusServiceUnavailable, http.StatusInternalServerError}[p.rnd.IntN(3)]
		p.injected[code]++
	}
	p.mu.Unlock()
	switch code {
	case http.StatusTooManyRequests:
		w.Header().Set("Retry-After", "1")
		status(w, code, "TooManyRequests", "too many requests, please try again later")
		return
	case http.StatusServiceUnavailable:
		status(w, code, "ServiceUnavailable", "no healthy upstream")
		return
	}
	rec := &recorder{ResponseWriter: w, header: http.Header{}}
	if code == http.StatusInternalServerError {
		rp.ServeHTTP(rec, r) // carried out, then reported failed
		p.record(key, write, rec)
		status(w, code, "InternalError", "etcdserver: request timed out")
		return
	}
	rec.pass = true
	rp.ServeHTTP(rec, r)
	p.record(key, write, rec)
}

func (p *FaultProxy) record(key string, write bool, rec *recorder) {
	if !write || rec.code < 200 || rec.code > 299 {
		return
	}
	var obj struct {
		Metadata struct {
			ResourceVersion string `json:"resourceVersion"`
		} `json:"metadata"`
	}
	_ = json.Unmarshal(rec.body.Bytes(), &obj)
	rv := obj.Metadata.ResourceVersion
	p.mu.Lock()
	defer p.mu.Unlock()
	first, seen := p.written[key]
	if !seen {
		p.written[key] = rv
		return
	}
	if rv != first {
		p.dups = append(p.dups, fmt.Sprintf("%s (resourceVersion %s, then %s)", key, first, rv))
	}
}

func status(w http.ResponseWriter, code int, reason, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	fmt.Fprintf(w, `{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":%q,"reason":%q,"code":%d}`, msg, reason, code)
}

// recorder notes the status code of a response; it passes the response through when pass is
// set, and swallows it otherwise (the proxy answers in its place).
type recorder struct {
	http.ResponseWriter
	header http.Header
	code   int
	pass   bool
	body   bytes.Buffer // the first MiB of the answer
}

func (r *recorder) Header() http.Header {
	if r.pass {
		return r.ResponseWriter.Header()
	}
	return r.header
}

func (r *recorder) WriteHeader(code int) {
	r.code = code
	if r.pass {
		r.ResponseWriter.WriteHeader(code)
	}
}

func (r *recorder) Write(b []byte) (int, error) {
	if r.code == 0 {
		r.code = http.StatusOK
	}
	if n := 1<<20 - r.body.Len(); n > 0 {
		r.body.Write(b[:min(n, len(b))])
	}
	if r.pass {
		return r.ResponseWriter.Write(b)
	}
	return len(b), nil
}

// Flush passes flushes through (watches).
func (r *recorder) Flush() {
	if f, ok := r.ResponseWriter.(http.Flusher); ok && r.pass {
		f.Flush()
	}
}
