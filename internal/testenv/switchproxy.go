package testenv

import (
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"sync"
	"time"

	"k8s.io/client-go/tools/clientcmd"
)

// SwitchProxy is one local address in front of several API servers, forwarding to one at a
// time: what a user reaches through an SSH tunnel or a bastion at https://127.0.0.1:6443, or
// through minikube's fixed address, when the cluster behind it changes. TLS passes through
// (each API server's certificate is issued for 127.0.0.1), so the client verifies the server
// it reaches with that cluster's own kubeconfig.
//
// It can also fail like a flaky tunnel: DropConnections cuts a fraction of connections at
// random, some before anything is sent and some in the middle of a request.
type SwitchProxy struct {
	// Addr is the proxy's address (host:port); every kubeconfig of Kubeconfig points at it.
	Addr string

	ln    net.Listener
	mu    sync.Mutex
	to    *Env
	conns map[net.Conn]struct{}
	drop  float64
	// downUntil: connections are refused until then (Down).
	downUntil time.Time
	rnd       *rand.Rand
	wg        sync.WaitGroup
	closed    bool
}

// StartSwitchProxy starts a proxy forwarding to env.
func StartSwitchProxy(env *Env) (*SwitchProxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &SwitchProxy{Addr: ln.Addr().String(), ln: ln, to: env, conns: map[net.Conn]struct{}{}, rnd: rand.New(rand.NewPCG(1, 2))}
	p.wg.Add(1)
	go p.serve()
	return p, nil
}

// Switch forwards new connections to env and cuts the open ones (a tunnel re-opened to
// another cluster).
func (p *SwitchProxy) Switch(env *Env) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.to = env
	p.cutAll()
}

// cutAll closes every open connection (p.mu held).
func (p *SwitchProxy) cutAll() {
	for c := range p.conns {
		c.Close()
		delete(p.conns, c)
	}
}

// DropConnections makes the proxy cut this fraction (0..1) of new connections: half of them at
// once, half after the first bytes of the request have gone through. Seeded: the same run
// drops the same connections.
func (p *SwitchProxy) DropConnections(fraction float64) {
	p.mu.Lock()
	p.drop = fraction
	p.mu.Unlock()
}

// ResetEvery cuts every open connection once per interval until stop is called (a tunnel that
// keeps breaking): over HTTP/2, which client-go uses, one connection carries every request of
// a client, so each cut fails every request in flight, some before they reached the API
// server and some after it acted on them.
func (p *SwitchProxy) ResetEvery(interval time.Duration) (stop func() int) {
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
func (p *SwitchProxy) Down(d time.Duration) {
	p.mu.Lock()
	p.downUntil = time.Now().Add(d)
	p.cutAll()
	p.mu.Unlock()
}

// UpAt is when the proxy forwards again after Down.
func (p *SwitchProxy) UpAt() time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.downUntil
}

// Kubeconfig writes, into dir, a kubeconfig with env's credentials and CA whose server is the
// proxy's address.
func (p *SwitchProxy) Kubeconfig(env *Env, dir string) (string, error) {
	kc, err := clientcmd.Load(env.env.KubeConfig)
	if err != nil {
		return "", err
	}
	target, err := url.Parse(env.Config.Host)
	if err != nil {
		return "", err
	}
	for _, c := range kc.Clusters {
		c.Server = "https://" + p.Addr
		c.TLSServerName = target.Hostname()
	}
	path := filepath.Join(dir, fmt.Sprintf("kubeconfig-%p", env))
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		return "", fmt.Errorf("writing %s: %w", path, err)
	}
	return path, os.Chmod(path, 0o600)
}

func (p *SwitchProxy) serve() {
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
		target, _ := url.Parse(to.Config.Host)
		server, err := net.Dial("tcp", target.Host)
		if err != nil {
			client.Close()
			continue
		}
		p.mu.Lock()
		p.conns[client], p.conns[server] = struct{}{}, struct{}{}
		p.mu.Unlock()
		p.wg.Add(2)
		go p.pipe(server, client, cut)
		go p.pipe(client, server, false)
	}
}

// pipe copies src to dst; cut closes both after the first chunk (a connection reset in the
// middle of a request).
func (p *SwitchProxy) pipe(dst, src net.Conn, cut bool) {
	defer p.wg.Done()
	defer func() {
		dst.Close()
		src.Close()
		p.mu.Lock()
		delete(p.conns, dst)
		delete(p.conns, src)
		p.mu.Unlock()
	}()
	if !cut {
		_, _ = io.Copy(dst, src)
		return
	}
	buf := make([]byte, 512)
	if n, err := src.Read(buf); n > 0 && err == nil {
		_, _ = dst.Write(buf[:n])
	}
}

// Close stops the proxy and cuts its connections.
func (p *SwitchProxy) Close() {
	p.mu.Lock()
	p.closed = true
	for c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	p.ln.Close()
	p.wg.Wait()
}
