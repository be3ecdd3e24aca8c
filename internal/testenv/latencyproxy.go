package testenv

import (
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"sync"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// LatencyProxy is a TCP proxy on 127.0.0.1 in front of the API server that delays every byte by
// half the added round-trip time in each direction, as a network path would: requests still
// pipeline (a chunk waits only for its own delay, not for the chunks before it to be answered),
// bandwidth is not limited, and TLS passes through untouched, so the client verifies the API
// server's own certificate (issued for 127.0.0.1). It costs the machine far less than an HTTP
// proxy, which would have to terminate and re-open TLS for every request.
type LatencyProxy struct {
	// Config reaches the API server through the proxy.
	Config *rest.Config
	// Kubeconfig is a kubeconfig file for Config (for kubectl and --kubeconfig).
	Kubeconfig string
	// RTT is the round-trip time the proxy adds.
	RTT time.Duration

	ln     net.Listener
	wg     sync.WaitGroup
	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	closed bool
}

// StartLatencyProxy starts a proxy that adds rtt to every round trip between a client and the
// API server. Close stops it and cuts its connections.
func (e *Env) StartLatencyProxy(rtt time.Duration) (*LatencyProxy, error) {
	target, err := url.Parse(e.Config.Host)
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &LatencyProxy{RTT: rtt, ln: ln, conns: map[net.Conn]struct{}{}}
	cfg := rest.CopyConfig(e.Config)
	cfg.Host = "https://" + ln.Addr().String()
	if cfg.TLSClientConfig.ServerName == "" {
		cfg.TLSClientConfig.ServerName = target.Hostname()
	}
	p.Config = cfg
	dir, err := os.MkdirTemp(e.dir, "latency-proxy-")
	if err != nil {
		ln.Close()
		return nil, err
	}
	p.Kubeconfig = filepath.Join(dir, "kubeconfig")
	if err := e.proxiedKubeconfig(cfg.Host, cfg.TLSClientConfig.ServerName, p.Kubeconfig); err != nil {
		ln.Close()
		return nil, err
	}
	p.wg.Add(1)
	go p.serve(target.Host)
	return p, nil
}

func (p *LatencyProxy) serve(upstream string) {
	defer p.wg.Done()
	for {
		client, err := p.ln.Accept()
		if err != nil {
			return
		}
		server, err := net.Dial("tcp", upstream)
		if err != nil {
			client.Close()
			continue
		}
		if !p.track(client, server) {
			return
		}
		p.wg.Add(2)
		go p.pipe(server, client)
		go p.pipe(client, server)
	}
}

func (p *LatencyProxy) track(conns ...net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		for _, c := range conns {
			c.Close()
		}
		return false
	}
	for _, c := range conns {
		p.conns[c] = struct{}{}
	}
	return true
}

type chunk struct {
	data []byte
	due  time.Time
}

// pipe copies src to dst, each chunk delivered half an RTT after it was read. The queue is
// bounded (a slow reader stalls the sender, as TCP's window would).
func (p *LatencyProxy) pipe(dst, src net.Conn) {
	defer p.wg.Done()
	oneWay := p.RTT / 2
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
			break
		}
	}
	if tc, ok := dst.(*net.TCPConn); ok {
		_ = tc.CloseWrite()
	} else {
		dst.Close()
	}
	// Unblock the reader if the writer gave up first.
	for range queue {
	}
}

// Close stops accepting, cuts every proxied connection and waits for the copiers.
func (p *LatencyProxy) Close() {
	p.mu.Lock()
	p.closed = true
	for c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	p.ln.Close()
	p.wg.Wait()
}

// proxiedKubeconfig is the environment's kubeconfig with every cluster pointed at host.
func (e *Env) proxiedKubeconfig(host, serverName, path string) error {
	kc, err := clientcmd.Load(e.env.KubeConfig)
	if err != nil {
		return err
	}
	for _, c := range kc.Clusters {
		c.Server = host
		c.TLSServerName = serverName
	}
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}
