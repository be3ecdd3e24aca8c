package testenv

import (
	"bytes"
	"crypto/sha256"
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

// Proxy is one local address (127.0.0.1) in front of one API server at a time, the network
// path between a client and the cluster, with the faults such a path has. Every fault is
// chosen by an option when it starts or by a method while it runs:
//
//   - the path: Latency adds a round-trip time (each chunk delayed by half of it in each
//     direction, requests still pipelined, bandwidth not limited);
//   - the tunnel: DropConnections cuts a fraction of new connections (half before anything is
//     sent, half in the middle of a request), ResetEvery cuts every open connection
//     periodically (over HTTP/2 every request in flight fails), Down refuses connections for a
//     while (a restart behind a load balancer), Switch forwards to another API server (an SSH
//     tunnel or minikube's fixed address re-opened to another cluster);
//   - the server: with ServerErrors the proxy terminates TLS, sees every request and can answer
//     some in the API server's place (Fail, FailWith: 429, 503, a 500 after the write happened),
//     recording writes the API server carried out twice (Duplicates).
//
// Without ServerErrors TLS passes through untouched: the client verifies the API server's own
// certificate (issued for 127.0.0.1) with that cluster's kubeconfig, and the proxy costs the
// machine far less than an HTTP proxy, which terminates and re-opens TLS for every request.
type Proxy struct {
	// Addr is the proxy's address (host:port); every Config and Kubeconfig points at it.
	Addr string

	rtt   time.Duration
	ln    net.Listener
	mu    sync.Mutex
	to    *Env
	conns map[net.Conn]struct{}
	drop  float64
	// downUntil: connections are refused until then (Down).
	downUntil time.Time
	rnd       *rand.Rand // connections to drop; seeded, so a run drops the same ones
	wg        sync.WaitGroup
	closed    bool

	http *httpFaults // nil without ServerErrors
}

// ProxyOption chooses what a Proxy does from its start.
type ProxyOption func(*Proxy) error

// Latency adds rtt to every round trip through the proxy.
func Latency(rtt time.Duration) ProxyOption {
	return func(p *Proxy) error { p.rtt = rtt; return nil }
}

// ServerErrors makes the proxy terminate TLS (with its own CA) and authenticate to the API
// server with the admin's credentials, so that Fail and FailWith can answer requests in the
// API server's place. A client reaches it with Config or Kubeconfig (no credentials of its own).
func ServerErrors() ProxyOption {
	return func(p *Proxy) error {
		h, err := startHTTPFaults(p)
		p.http = h
		return err
	}
}

// StartProxy starts a proxy forwarding to env, with the faults opts choose; it fails nothing
// else until told to. Close stops it and cuts its connections.
func StartProxy(env *Env, opts ...ProxyOption) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &Proxy{Addr: ln.Addr().String(), ln: ln, to: env, conns: map[net.Conn]struct{}{}, rnd: rand.New(rand.NewPCG(1, 2))}
	for _, o := range opts {
		if err := o(p); err != nil {
			p.Close()
			return nil, err
		}
	}
	p.wg.Add(1)
	go p.serve()
	return p, nil
}

// Switch forwards new connections to env and cuts the open ones (a tunnel re-opened to
// another cluster).
func (p *Proxy) Switch(env *Env) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.to = env
	p.cutAll()
}

// cutAll closes every open connection (p.mu held).
func (p *Proxy) cutAll() {
	for c := range p.conns {
		c.Close()
		delete(p.conns, c)
	}
}

// DropConnections makes the proxy cut this fraction (0..1) of new connections: half of them at
// once, half after the first bytes of the request have gone through. Seeded: the same run
// drops the same connections.
func (p *Proxy) DropConnections(fraction float64) {
	p.mu.Lock()
	p.drop = fraction
	p.mu.Unlock()
}

// ResetEvery cuts every open connection once per interval until stop is called (a tunnel that
// keeps breaking): over HTTP/2, which client-go uses, one connection carries every request of
// a client, so each cut fails every request in flight, some before they reached the API
// server and some after it acted on them. stop returns how many cuts found a connection.
func (p *Proxy) ResetEvery(interval time.Duration) (stop func() int) {
	done := make(chan struct{})
	var n int
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
			}
			p.mu.Lock()
			if len(p.conns) > 0 {
				n++
			}
			p.cutAll()
			p.mu.Unlock()
		}
	}()
	return func() int {
		close(done)
		wg.Wait()
		return n
	}
}

// Down makes the API server unreachable through the proxy for d (a restart, a tunnel that is
// re-opened): every open connection is cut and new ones are closed at once until d has passed.
func (p *Proxy) Down(d time.Duration) {
	p.mu.Lock()
	p.downUntil = time.Now().Add(d)
	p.cutAll()
	p.mu.Unlock()
}

// UpAt is when the proxy forwards again after Down.
func (p *Proxy) UpAt() time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.downUntil
}

// Config is a client configuration that reaches env through the proxy: env's credentials and
// CA, or with ServerErrors the proxy's CA and no credentials (the proxy holds env's).
func (p *Proxy) Config(env *Env) *rest.Config {
	if p.http != nil {
		cfg := rest.AnonymousClientConfig(env.Config)
		cfg.Host = "https://" + p.Addr
		cfg.TLSClientConfig = rest.TLSClientConfig{CAData: p.http.ca}
		return cfg
	}
	cfg := rest.CopyConfig(env.Config)
	cfg.Host = "https://" + p.Addr
	if cfg.TLSClientConfig.ServerName == "" {
		cfg.TLSClientConfig.ServerName = hostname(env)
	}
	return cfg
}

// Kubeconfig writes, into dir, a kubeconfig for Config(env) (for kubectl and --kubeconfig);
// each environment gets its own file.
func (p *Proxy) Kubeconfig(env *Env, dir string) (string, error) {
	var kc *clientcmdapi.Config
	if p.http != nil {
		kc = clientcmdapi.NewConfig()
		kc.Clusters["proxy"] = &clientcmdapi.Cluster{Server: "https://" + p.Addr, CertificateAuthorityData: p.http.ca}
		kc.AuthInfos["admin"] = &clientcmdapi.AuthInfo{}
		kc.Contexts["proxy"] = &clientcmdapi.Context{Cluster: "proxy", AuthInfo: "admin", Namespace: "default"}
		kc.CurrentContext = "proxy"
	} else {
		var err error
		if kc, err = clientcmd.Load(env.env.KubeConfig); err != nil {
			return "", err
		}
		for _, c := range kc.Clusters {
			c.Server = "https://" + p.Addr
			c.TLSServerName = hostname(env)
		}
	}
	path := filepath.Join(dir, fmt.Sprintf("kubeconfig-%p", env))
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		return "", fmt.Errorf("writing %s: %w", path, err)
	}
	return path, os.Chmod(path, 0o600)
}

func hostname(env *Env) string {
	u, _ := url.Parse(env.Config.Host)
	return u.Hostname()
}

// Close stops the proxy and cuts its connections.
func (p *Proxy) Close() {
	p.mu.Lock()
	p.closed = true
	for c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	p.ln.Close()
	if p.http != nil && p.http.srv != nil {
		_ = p.http.srv.Close()
		_ = p.http.ln.Close()
	}
	p.wg.Wait()
}

func (p *Proxy) serve() {
	defer p.wg.Done()
	for {
		client, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			client.Close()
			return
		}
		to := p.to
		if time.Now().Before(p.downUntil) {
			p.mu.Unlock()
			client.Close()
			continue
		}
		cut := p.drop > 0 && p.rnd.Float64() < p.drop
		early := cut && p.rnd.IntN(2) == 0
		p.mu.Unlock()
		if early {
			client.Close()
			continue
		}
		upstream := hostPort(to)
		if p.http != nil {
			upstream = p.http.ln.Addr().String()
		}
		server, err := net.Dial("tcp", upstream)
		if err != nil {
			client.Close()
			continue
		}
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			client.Close()
			server.Close()
			return
		}
		p.conns[client], p.conns[server] = struct{}{}, struct{}{}
		p.mu.Unlock()
		p.wg.Add(2)
		var done sync.WaitGroup
		done.Add(2)
		go p.pipe(server, client, cut, &done)
		go p.pipe(client, server, false, &done)
		go func() {
			done.Wait()
			p.untrack(client, server)
		}()
	}
}

func hostPort(env *Env) string {
	u, _ := url.Parse(env.Config.Host)
	return u.Host
}

// untrack closes the connections of a pair both of whose directions ended.
func (p *Proxy) untrack(conns ...net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range conns {
		c.Close()
		delete(p.conns, c)
	}
}

type chunk struct {
	data []byte
	due  time.Time
}

// pipe copies src to dst, each chunk delivered half an RTT after it was read (at once without
// Latency), then closes dst's writing side. The queue is bounded (a slow reader stalls the
// sender, as TCP's window would). cut closes both after the first chunk (a connection reset in
// the middle of a request).
func (p *Proxy) pipe(dst, src net.Conn, cut bool, done *sync.WaitGroup) {
	defer p.wg.Done()
	defer done.Done()
	if cut {
		buf := make([]byte, 512)
		if n, err := src.Read(buf); n > 0 && err == nil {
			_, _ = dst.Write(buf[:n])
		}
		dst.Close()
		src.Close()
		return
	}
	if p.rtt == 0 {
		_, _ = io.Copy(dst, src)
		closeWrite(dst)
		return
	}
	oneWay := p.rtt / 2
	queue := make(chan chunk, 256)
	go func() {
		defer close(queue)
		for {
			buf := make([]byte, 32<<10)
			n, err := src.Read(buf)
			if n > 0 {
				queue <- chunk{data: buf[:n], due: time.Now().Add(oneWay)}
			}
			if err != nil {
				return
			}
		}
	}()
	for c := range queue {
		if d := time.Until(c.due); d > 0 {
			time.Sleep(d)
		}
		if _, err := dst.Write(c.data); err != nil {
			src.Close() // the reader stops
			break
		}
	}
	closeWrite(dst)
	// Unblock the reader if the writer gave up first.
	for range queue {
	}
}

func closeWrite(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.CloseWrite()
	} else {
		c.Close()
	}
}

// Fault is an answer the proxy gives in the API server's place (ServerErrors).
type Fault struct {
	Code    int
	Reason  string
	Message string
	// RetryAfter, in seconds, is sent as the Retry-After header and in the Status's details.
	RetryAfter int
	// AfterServer: the request is carried out by the API server first, and its answer replaced
	// by this one (the write happened; the client is told it failed).
	AfterServer bool
}

// The errors an API server under load, restarting, or behind a load balancer gives.
var (
	// TooManyRequests is API Priority and Fairness's 429, before the request reaches the server.
	TooManyRequests = Fault{Code: http.StatusTooManyRequests, Reason: "TooManyRequests", Message: "too many requests, please try again later", RetryAfter: 1}
	// NoHealthyUpstream is a load balancer's 503 with no healthy backend (no Retry-After),
	// before the request reaches the server.
	NoHealthyUpstream = Fault{Code: http.StatusServiceUnavailable, Reason: "ServiceUnavailable", Message: "no healthy upstream"}
	// TimedOutAfterWrite is a 500 after the server carried the request out ("etcdserver:
	// request timed out" on the reply).
	TimedOutAfterWrite = Fault{Code: http.StatusInternalServerError, Reason: "InternalError", Message: "etcdserver: request timed out", AfterServer: true}
)

// httpFaults is the HTTPS server behind a Proxy with ServerErrors.
type httpFaults struct {
	p        *Proxy
	ca       []byte
	srv      *http.Server
	ln       net.Listener
	mu       sync.Mutex
	rnd      *rand.Rand
	answer   func(*http.Request) *Fault
	injected map[int]int
	written  map[string]string // write key → resourceVersion the first 2xx answer gave
	dups     []string
	rts      map[*Env]http.RoundTripper
}

func startHTTPFaults(p *Proxy) (*httpFaults, error) {
	h := &httpFaults{p: p, rnd: rand.New(rand.NewPCG(3, 4)),
		injected: map[int]int{}, written: map[string]string{}, rts: map[*Env]http.RoundTripper{}}
	rp := &httputil.ReverseProxy{
		Rewrite:       func(*httputil.ProxyRequest) {}, // the transport picks the API server
		Transport:     roundTripper(h.roundTrip),
		FlushInterval: -1, // watches stream
	}
	var err error
	h.srv, h.ln, h.ca, err = serveLocalTLS(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { h.serve(w, r, rp) }))
	return h, err
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// roundTrip sends r to the API server the proxy forwards to now, with its admin's credentials.
func (h *httpFaults) roundTrip(r *http.Request) (*http.Response, error) {
	h.p.mu.Lock()
	to := h.p.to
	h.p.mu.Unlock()
	h.mu.Lock()
	rt, ok := h.rts[to]
	if !ok {
		var err error
		if rt, err = rest.TransportFor(to.Config); err != nil {
			h.mu.Unlock()
			return nil, err
		}
		h.rts[to] = rt
	}
	h.mu.Unlock()
	upstream, err := url.Parse(to.Config.Host)
	if err != nil {
		return nil, err
	}
	r = r.Clone(r.Context())
	r.URL.Scheme, r.URL.Host, r.Host = upstream.Scheme, upstream.Host, upstream.Host
	return rt.RoundTrip(r)
}

// Fail makes the proxy answer a fraction rate of the requests match selects (nil: every
// request but watches) with TooManyRequests, NoHealthyUpstream or TimedOutAfterWrite at
// random (seeded). Fail(0, nil) fails nothing.
func (p *Proxy) Fail(rate float64, match func(*http.Request) bool) {
	p.FailWith(func(r *http.Request) *Fault {
		if r.URL.Query().Get("watch") == "true" || rate <= 0 || (match != nil && !match(r)) || p.http.rnd.Float64() >= rate {
			return nil
		}
		return &[]Fault{TooManyRequests, NoHealthyUpstream, TimedOutAfterWrite}[p.http.rnd.IntN(3)]
	})
}

// FailWith makes the proxy answer each request with what answer returns for it (nil: the API
// server's answer). answer is called with no other request's call running.
func (p *Proxy) FailWith(answer func(*http.Request) *Fault) {
	if p.http == nil {
		panic("testenv: Proxy.Fail needs the ServerErrors option")
	}
	p.http.mu.Lock()
	defer p.http.mu.Unlock()
	p.http.answer = answer
}

// Injected is how many answers of each status code the proxy made up.
func (p *Proxy) Injected() map[int]int {
	if p.http == nil {
		return nil
	}
	p.http.mu.Lock()
	defer p.http.mu.Unlock()
	out := map[int]int{}
	for k, v := range p.http.injected {
		out[k] = v
	}
	return out
}

// Duplicates are the writes (not dry runs) the API server carried out more than once with the
// same method, path and body, the later one changing the object again (another
// resourceVersion): a client that repeats a write whose first try went through. A repeat the
// server took as a no-op (the same resourceVersion: a server-side apply of the same intent)
// changes nothing and is not one. (ServerErrors only.)
func (p *Proxy) Duplicates() []string {
	if p.http == nil {
		return nil
	}
	p.http.mu.Lock()
	defer p.http.mu.Unlock()
	return append([]string(nil), p.http.dups...)
}

func (h *httpFaults) serve(w http.ResponseWriter, r *http.Request, rp *httputil.ReverseProxy) {
	write := r.Method != http.MethodGet && r.Method != http.MethodHead && !strings.Contains(r.URL.RawQuery, "dryRun=All")
	var key string
	if write {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		sum := sha256.Sum256(body)
		key = r.Method + " " + r.URL.Path + " " + hex.EncodeToString(sum[:8])
	}
	var f *Fault
	h.mu.Lock()
	if h.answer != nil {
		f = h.answer(r)
	}
	if f != nil {
		h.injected[f.Code]++
	}
	h.mu.Unlock()
	rec := &recorder{ResponseWriter: w, header: http.Header{}, pass: f == nil}
	if f == nil || f.AfterServer {
		rp.ServeHTTP(rec, r) // carried out, and passed on unless f replaces the answer
		h.record(key, write, rec)
	}
	if f != nil {
		f.write(w)
	}
}

func (f *Fault) write(w http.ResponseWriter) {
	details := ""
	if f.RetryAfter > 0 {
		w.Header().Set("Retry-After", fmt.Sprint(f.RetryAfter))
		details = fmt.Sprintf(`,"details":{"retryAfterSeconds":%d}`, f.RetryAfter)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(f.Code)
	fmt.Fprintf(w, `{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":%q,"reason":%q,"code":%d%s}`, f.Message, f.Reason, f.Code, details)
}

func (h *httpFaults) record(key string, write bool, rec *recorder) {
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
	h.mu.Lock()
	defer h.mu.Unlock()
	first, seen := h.written[key]
	if !seen {
		h.written[key] = rv
		return
	}
	if rv != first {
		h.dups = append(h.dups, fmt.Sprintf("%s (resourceVersion %s, then %s)", key, first, rv))
	}
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
