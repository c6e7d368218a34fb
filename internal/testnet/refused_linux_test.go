package testnet

import (
	"errors"
	"net"
	"syscall"
	"testing"
)

// TestRefusedAddr: a connect to the address is refused, a sample of
// listeners on port 0 never gets its port (the kernel's choice is random,
// so only a sample), and a listener asking for it by number gets it.
func TestRefusedAddr(t *testing.T) {
	addr := RefusedAddr(t)
	if c, err := net.Dial("tcp", addr); !errors.Is(err, syscall.ECONNREFUSED) {
		if c != nil {
			c.Close()
		}
		t.Fatalf("dial %s: %v, want ECONNREFUSED", addr, err)
	}
	for range 2000 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		got := ln.Addr().String()
		ln.Close()
		if got == addr {
			t.Fatalf("a listener on port 0 was given %s", addr)
		}
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("listen on %s on purpose: %v", addr, err)
	}
	ln.Close()
}
