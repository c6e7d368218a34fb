package proxy

import (
	"crypto/tls"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestHealthTLSCloseBounded: a TLS check's close_notify is bounded by
// the check's timeout. The server completes the handshake and then reads
// nothing: the check's request (a 16 MiB path) fills the connection, its
// write fails at the timeout, and close_notify finds no room, unless an
// ACK came after the write went to sleep (the kernel then takes a small
// write without waking the large one), which it did in about half the
// checks: ten are made (with five, 2 runs of 3 failed before the fix).
// crypto/tls gives close_notify a write deadline of its own, 5 s from the
// Close, over the check's, and the deferred stop that would close the
// socket ran before the Close: a check whose close_notify found no room
// returned 5 s after its timeout. The bound checked is crypto/tls's less
// a second, far above the timeout.
func TestHealthTLSCloseBounded(t *testing.T) {
	ca := newTestCA(t)
	var handshakes atomic.Int32
	release := make(chan struct{})
	u := newTLSUp(t, ca, "app", []string{"app.test"}, nil, nil, func(c *tls.Conn) {
		if c.Handshake() == nil {
			handshakes.Add(1)
			<-release // (reads nothing until the test ends)
		}
	})
	t.Cleanup(func() { close(release) }) // (before newTLSUp's, which waits for serve)
	const timeout = 150 * time.Millisecond
	h := &HealthConfig{Type: HealthHTTP, Path: "/" + strings.Repeat("a", 16<<20), Timeout: Duration(timeout)}
	pr := newProber(h, u.addr, "app.test", false)
	cc := &tls.Config{RootCAs: ca.roots, ServerName: "app.test"}
	pr.tls = func() *tls.Config { return cc }
	for i := range 10 {
		start := time.Now()
		if pr.probe(t.Context()) {
			t.Fatal("the check passed, want it failed")
		}
		if took := time.Since(start); took > 4*time.Second {
			t.Errorf("check %d took %v with a timeout of %v: its close_notify was not bounded by the timeout", i, took, timeout)
		}
	}
	if n := handshakes.Load(); n < 5 {
		t.Errorf("%d of the 10 checks completed their handshake, want 5 at least: the others wrote no request", n)
	}
}
