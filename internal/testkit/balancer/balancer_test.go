package balancer

import (
	"bufio"
	"net"
	"testing"
)

// echoName serves every connection one line: its name.
func echoName(t *testing.T, name string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			_, _ = c.Write([]byte(name + "\n"))
			_ = c.Close()
		}
	}()
	return ln.Addr().String()
}

func dialName(t *testing.T, addr string) string {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Close() }()
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	return line[:len(line)-1]
}

// TestConnectionsInTurn: connections go to the backends in turn, a
// backend not ready is skipped, and Opened counts them.
func TestConnectionsInTurn(t *testing.T) {
	a, b := echoName(t, "a"), echoName(t, "b")
	lb := Start(t, "127.0.0.1:0", Backend{Addr: a}, Backend{Addr: b})
	var got []string
	for range 4 {
		got = append(got, dialName(t, lb.Addr()))
	}
	if got[0] == got[1] || got[0] != got[2] || got[1] != got[3] {
		t.Fatalf("connections went to %v: want the two backends in turn", got)
	}
	lb.Set(Backend{Addr: a, Ready: func() bool { return false }}, Backend{Addr: b})
	for range 3 {
		if n := dialName(t, lb.Addr()); n != "b" {
			t.Fatalf("a connection reached %s, which is not ready", n)
		}
	}
	if o := lb.Opened(); o[a] != 2 || o[b] != 5 {
		t.Fatalf("Opened() = %v, want 2 to a and 5 to b", o)
	}
}
