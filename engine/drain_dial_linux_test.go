package engine

import (
	"context"
	"errors"
	"io"
	"testing"
	"time"
)

type relayHandler struct {
	BaseHandler
	peer string
	errs chan error
}

func (h *relayHandler) OnData(c *Conn, b Buffer) bool {
	if client, ok := c.Context().(*Conn); ok { // the reply
		client.Write(b.Bytes())
		client.Close()
		c.Close()
		return false
	}
	up, err := c.Loop().Dial("tcp", h.peer, 5*time.Second)
	if err != nil {
		h.errs <- err
		c.Close()
		return false
	}
	up.SetContext(c)
	up.Write(b.Bytes()) // sent once connected
	return false
}

// TestDialWhileDraining: a connection open when Shutdown starts, whose
// handler needs a connection of its own to finish (a proxy forwarding a
// request that arrives during the drain), gets one: Dial works while
// Shutdown drains, as the drain is there to let open connections finish.
// Dial returned ErrClosed from the start of Shutdown, so the connection
// could only be given up (a proxy answered 503 to a request in flight).
func TestDialWhileDraining(t *testing.T) {
	peer := goEchoServer(t)
	for _, b := range testBackends {
		t.Run(string(b), func(t *testing.T) {
			h := &relayHandler{peer: peer, errs: make(chan error, 1)}
			e, addr, done := listenAndRun(t, testConfig(b), h)
			c := mustDial(t, "tcp", addr)
			waitFor(t, "the client to be accepted", func() bool { return e.Stats().Open == 1 })
			sdone := make(chan error, 1)
			go func() {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				sdone <- e.Shutdown(ctx)
			}()
			waitFor(t, "the drain to start", e.draining.Load)
			if _, err := c.Write([]byte("request")); err != nil {
				t.Fatal(err)
			}
			c.SetReadDeadline(time.Now().Add(5 * time.Second))
			got, err := io.ReadAll(c)
			select {
			case err := <-h.errs:
				t.Errorf("Dial during the drain: %v", err)
			default:
			}
			if err != nil || string(got) != "request" {
				t.Errorf("relayed during the drain: %q, %v; want \"request\"", got, err)
			}
			c.Close()
			if err := <-sdone; err != nil {
				t.Errorf("Shutdown: %v", err)
			}
			if err := <-done; err != nil {
				t.Errorf("Run: %v", err)
			}
		})
	}
}

// TestShutdownCutShortByRun: while Shutdown drains an open connection,
// Run's context ends (the same signal ending both, say), and the engine
// stops at once, closing the connection with ErrClosed. Shutdown must not
// report a complete drain (nil): it returned nil, as if the connection
// had finished of its own accord.
func TestShutdownCutShortByRun(t *testing.T) {
	for _, b := range testBackends {
		t.Run(string(b), func(t *testing.T) {
			closed := make(chan error, 1)
			h := &BaseHandlerFunc{closed: func(c *Conn, err error) { closed <- err }}
			e := newEngine(t, testConfig(b), h)
			ln, err := e.Listen("tcp", "127.0.0.1:0", nil)
			if err != nil {
				t.Fatal(err)
			}
			stop := runUntilStopped(t, e)
			mustDial(t, "tcp", ln.Addr().String()) // open until the end of the test
			waitFor(t, "the connection to open", func() bool { return e.Stats().Open == 1 })
			shut := make(chan error, 1)
			go func() {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				shut <- e.Shutdown(ctx)
			}()
			waitFor(t, "the drain to start", e.draining.Load)
			if err := stop(); err != nil {
				t.Fatalf("Run: %v", err)
			}
			if err := <-closed; !errors.Is(err, ErrClosed) {
				t.Fatalf("OnClose(%v), want ErrClosed", err)
			}
			if err := <-shut; err == nil {
				t.Error("Shutdown returned nil (a complete drain) for a connection the engine closed as Run's context ended")
			}
		})
	}
}
