package engine

import (
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/spindlenet/spindle/internal/testnet"
)

// loopListeners is how many places the loop's table of listener sockets
// has (Loop.lns), read on the loop.
func loopListeners(l *Loop) int {
	n := make(chan int)
	l.Post(func() { n <- len(l.lns) })
	return <-n
}

// madeListeners is how many listeners the engine keeps for its loops'
// cleanup (Engine.made).
func madeListeners(e *Engine) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.made)
}

// TestClosedListenersAreDropped listens and closes a listener many times,
// TCP and Unix, as a long-running process that opens and closes listeners
// (a reload) does: the loops and the engine keep no place for the closed
// ones, but for a listener whose accepted connection is still open, which
// names it (Conn.Listener) until its OnClose has returned. Before, every
// Listen added a place to every loop's table and to the engine's list for
// good: 102 of each after 101 Listens and Closes and one more Listen.
func TestClosedListenersAreDropped(t *testing.T) {
	const rounds = 100
	for _, b := range testBackends {
		t.Run(string(b), func(t *testing.T) {
			opened := make(chan *Conn, 1)
			closedBy := make(chan *Listener, 1)
			h := &BaseHandlerFunc{
				open:   func(c *Conn) { opened <- c },
				closed: func(c *Conn, err error) { closedBy <- c.Listener() },
			}
			e, first := startListening(t, testConfig(b), h, "tcp", "127.0.0.1:0")
			client := mustDial(t, "tcp", first.Addr().String())
			c := <-opened
			if err := first.Close(); err != nil {
				t.Fatal(err)
			}
			for i := range rounds {
				network, address := "tcp", "127.0.0.1:0"
				if i%2 == 1 {
					network, address = "unix", fmt.Sprintf("@spindle-relisten-%d-%d", os.Getpid(), i)
				}
				ln, err := e.Listen(network, address, nil)
				if err != nil {
					t.Fatal(err)
				}
				if err := ln.Close(); err != nil {
					t.Fatal(err)
				}
				// Closed on every loop (uring: once the accept's cancel
				// completed) before the next, as a process that listens
				// again some time after a Close.
				waitFor(t, "the loops to close the listener's sockets", ln.socketsClosed)
			}
			last, err := e.Listen("tcp", "127.0.0.1:0", nil)
			if err != nil {
				t.Fatal(err)
			}
			defer last.Close()
			// The first listener's place (its connection is open) and the
			// last's.
			for _, l := range e.Loops() {
				if n := loopListeners(l); n > 2 {
					t.Errorf("loop %d has %d places for listeners after %d closed, one with a connection open, and one open: want 2", l.ID(), n, rounds+1)
				}
			}
			if n := madeListeners(e); n != 1 {
				t.Errorf("the engine keeps %d listeners, %d of them closed: want 1", n, n-1)
			}
			client.Close()
			select {
			case ln := <-closedBy:
				if ln != first {
					t.Errorf("in OnClose the connection names listener %v, want the one that accepted it (%v), closed since", ln, first.Addr())
				}
			case <-time.After(10 * time.Second):
				t.Fatal("no OnClose 10 s after the client closed")
			}
			l := c.Loop()
			after := make(chan *Listener)
			l.Post(func() { after <- c.Listener() })
			if got := <-after; got != nil {
				t.Errorf("after OnClose Listener is %v, want nil", got.Addr())
			}
			// The first's place is free: Listens and Closes take it.
			for range 10 {
				ln, err := e.Listen("tcp", "127.0.0.1:0", nil)
				if err != nil {
					t.Fatal(err)
				}
				ln.Close()
				waitFor(t, "the loops to close the listener's sockets", ln.socketsClosed)
			}
			for _, l := range e.Loops() {
				if n := loopListeners(l); n > 2 {
					t.Errorf("loop %d has %d places for listeners once the first's connection closed, one listener open: want 2", l.ID(), n)
				}
			}
		})
	}
}

// TestListenAgainAfterClose listens again on the address of a listener
// just closed, an abstract Unix name (bound until its socket is closed)
// and a TCP port: Listener.Close returns once the loops have closed their
// sockets, so the Listen succeeds. Before, Close only posted the
// removals, and the abstract name was still bound when it returned: the
// second Listen failed with EADDRINUSE. The TCP port is one the test
// holds (testnet.RefusedAddr): closed and not held, another process's
// listener on port 0 could be given it before the next Listen, which then
// failed with EADDRINUSE.
func TestListenAgainAfterClose(t *testing.T) {
	for _, b := range testBackends {
		t.Run(string(b), func(t *testing.T) {
			e, tcp := startListening(t, testConfig(b), &echoHandler{}, "tcp", testnet.RefusedAddr(t))
			for _, l := range e.Loops() {
				syncLoop(l) // running: Close posts to the loops
			}
			addrs := map[string]string{
				"unix": fmt.Sprintf("@spindle-listen-again-%d-%s", os.Getpid(), b),
				"tcp":  tcp.Addr().String(),
			}
			if err := tcp.Close(); err != nil {
				t.Fatal(err)
			}
			for _, network := range []string{"unix", "tcp"} {
				for i := range 20 {
					ln, err := e.Listen(network, addrs[network], nil)
					if err != nil {
						t.Fatalf("%s Listen %d on %s, the listener before closed: %v", network, i+1, addrs[network], err)
					}
					if err := ln.Close(); err != nil {
						t.Fatal(err)
					}
					if !ln.socketsClosed() {
						t.Errorf("%s: a loop's socket is open after Close returned", network)
					}
				}
			}
		})
	}
}

// TestCloseOnAnotherEnginesLoop closes a listener of one engine from a
// loop goroutine of another, whose loop is held meanwhile: Close, which
// cannot wait for loops on a loop goroutine, returns at once there too,
// and the socket closes once the other engine's loop gets to it. Before,
// it waited on the loop goroutine for the other engine's loops, holding
// its own loop as long: two engines whose handlers closed each other's
// listeners at once deadlocked.
func TestCloseOnAnotherEnginesLoop(t *testing.T) {
	for _, b := range testBackends {
		t.Run(string(b), func(t *testing.T) {
			cfg := testConfig(b)
			cfg.CPUs = []int{0}
			a, _ := startEngine(t, cfg, &echoHandler{})
			other, ln := startListening(t, cfg, &echoHandler{}, "tcp", "127.0.0.1:0")
			ol := other.Loops()[0]
			syncLoop(ol) // the listener is added
			held, hold := make(chan struct{}), make(chan struct{})
			ol.Post(func() {
				close(held)
				<-hold
			})
			<-held
			closed := make(chan error, 1)
			a.Loops()[0].Post(func() { closed <- ln.Close() })
			select {
			case err := <-closed:
				if err != nil {
					t.Error(err)
				}
			case <-time.After(2 * time.Second):
				t.Error("Close on another engine's loop goroutine waited for the held loop")
			}
			close(hold)
			waitFor(t, "the other engine's loop to close the socket", ln.socketsClosed)
		})
	}
}
