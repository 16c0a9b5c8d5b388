// Package balancer stands in for a Service and kube-proxy in front of
// webhook replicas run as processes on loopback: it forwards each TCP
// connection, untouched (TLS and the API server's client certificate end
// to end), to the next backend in turn. Like kube-proxy it balances
// connections, not requests: an HTTP/1.1 keep-alive connection, or an
// HTTP/2 one, stays with the backend it first reached. For tests and
// benchmarks only.
package balancer

import (
	"io"
	"net"
	"sync"
	"testing"
)

// Backend is one replica behind the balancer.
type Backend struct {
	// Addr is the replica's host:port.
	Addr string
	// Ready, when set, is asked before each connection goes to the
	// backend (as endpoints list only ready pods); a backend not ready
	// is skipped.
	Ready func() bool
}

// Balancer forwards connections to its backends in turn.
type Balancer struct {
	ln       net.Listener
	mu       sync.Mutex
	backends []Backend
	next     int
	opened   map[string]int // connections forwarded, by backend address
}

// Start listens on addr (host:port; port 0 picks one) and forwards every
// connection until the test ends.
func Start(t testing.TB, addr string, backends ...Backend) *Balancer {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	b := &Balancer{ln: ln, backends: backends, opened: map[string]int{}}
	go b.serve()
	t.Cleanup(func() { _ = ln.Close() })
	return b
}

// Addr is the address the balancer listens on.
func (b *Balancer) Addr() string { return b.ln.Addr().String() }

// Port is the port the balancer listens on.
func (b *Balancer) Port() int { return b.ln.Addr().(*net.TCPAddr).Port }

// Set replaces the backends; connections already forwarded stay where
// they are.
func (b *Balancer) Set(backends ...Backend) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.backends = backends
}

// Opened is how many connections went to each backend address so far.
func (b *Balancer) Opened() map[string]int {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := make(map[string]int, len(b.opened))
	for k, v := range b.opened {
		out[k] = v
	}
	return out
}

func (b *Balancer) serve() {
	for {
		in, err := b.ln.Accept()
		if err != nil {
			return
		}
		go b.forward(in)
	}
}

// order is the backends from the next one in turn.
func (b *Balancer) order() []Backend {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := make([]Backend, 0, len(b.backends))
	for i := range b.backends {
		out = append(out, b.backends[(b.next+i)%len(b.backends)])
	}
	b.next++
	return out
}

func (b *Balancer) forward(in net.Conn) {
	defer func() { _ = in.Close() }()
	for _, be := range b.order() {
		if be.Ready != nil && !be.Ready() {
			continue
		}
		out, err := net.Dial("tcp", be.Addr)
		if err != nil {
			continue
		}
		defer func() { _ = out.Close() }()
		b.mu.Lock()
		b.opened[be.Addr]++
		b.mu.Unlock()
		go func() {
			_, _ = io.Copy(out, in)
			if tcp, ok := out.(*net.TCPConn); ok {
				_ = tcp.CloseWrite()
			}
		}()
		_, _ = io.Copy(in, out)
		return
	}
}
