package hello

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"runtime/debug"
	"sync/atomic"
	"testing"
	"time"

	"github.com/spindlenet/spindle/engine"
)

// TestDrainH1: the engine's graceful Shutdown has the Handler close an idle
// keep-alive connection and one that sent nothing at once, and answer a
// request whose body is still coming with "Connection: close" and then
// close: the drain completes long before Shutdown's deadline.
func TestDrainH1(t *testing.T) {
	for _, backend := range engine.Backends {
		t.Run(string(backend), func(t *testing.T) {
			h := &countDrains{Handler: &Handler{}}
			addr, e := startHandler(t, backend, h)
			idle := dialServer(t, addr, 20*time.Second)
			ir := bufio.NewReader(idle)
			io.WriteString(idle, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
			resp, err := http.ReadResponse(ir, nil)
			if err != nil {
				t.Fatal(err)
			}
			io.Copy(io.Discard, resp.Body)
			silent := dialServer(t, addr, 20*time.Second)
			busy := dialServer(t, addr, 20*time.Second)
			br := bufio.NewReader(busy)
			// Expect: 100-continue makes the server say when it has the head
			// and waits for the body.
			io.WriteString(busy, "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 6\r\nExpect: 100-continue\r\n\r\n")
			if line, err := br.ReadString('\n'); err != nil || line != "HTTP/1.1 100 Continue\r\n" {
				t.Fatalf("busy connection: %q, %v; want 100 Continue", line, err)
			}
			br.ReadString('\n') // the interim response's empty line
			// The silent connection accepted too, whichever loop's listener
			// it reached: one still in a listener's queue when Shutdown
			// closes the listeners is reset by the kernel (CI, loaded, on
			// epoll-busypoll), which is not the drain under test.
			for deadline := time.Now().Add(10 * time.Second); e.Stats().Accepted < 3; {
				if time.Now().After(deadline) {
					t.Fatalf("%d connections accepted, want 3", e.Stats().Accepted)
				}
				time.Sleep(time.Millisecond)
			}

			done := make(chan error, 1)
			go func() {
				ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
				defer cancel()
				done <- e.Shutdown(ctx)
			}()
			for name, r := range map[string]io.Reader{"idle": ir, "silent": silent} {
				if b, err := io.ReadAll(r); err != nil || len(b) != 0 {
					t.Fatalf("%s connection: read %q, %v; want EOF", name, b, err)
				}
			}
			// Each loop drains its own connections when its posted drain
			// runs: the busy connection may be on the other loop than the
			// two that closed, not told yet (CI, loaded, epoll-busypoll:
			// it answered the body without "Connection: close").
			for deadline := time.Now().Add(10 * time.Second); h.drained.Load() < 3; {
				if time.Now().After(deadline) {
					t.Fatalf("OnDrain called %d times, want 3", h.drained.Load())
				}
				time.Sleep(time.Millisecond)
			}
			io.WriteString(busy, "abcdef")
			resp, err = http.ReadResponse(br, nil)
			if err != nil {
				t.Fatal(err)
			}
			if !resp.Close || resp.StatusCode != 200 {
				t.Fatalf("busy connection: %d, close %v; want 200 and Connection: close", resp.StatusCode, resp.Close)
			}
			io.Copy(io.Discard, resp.Body)
			if b, err := io.ReadAll(br); err != nil || len(b) != 0 {
				t.Fatalf("busy connection after its response: %q, %v; want EOF", b, err)
			}
			if err := shutdownResult(t, done, 15*time.Second); err != nil {
				t.Fatalf("Shutdown: %v, want a complete drain", err)
			}
		})
	}
}

// shutdownResult returns what Shutdown, whose ctx ends after deadline,
// sent on done. A Shutdown still waiting 25 s after that (a loop waiting
// for the kernel to end a request: its log line comes 5 s after the
// deadline) panics, so that the test's log, the engine's lines in it, and
// every goroutine's stack are printed: the cleanup would wait for the
// engine too, until the binary's timeout.
func shutdownResult(t *testing.T, done <-chan error, deadline time.Duration) error {
	t.Helper()
	select {
	case err := <-done:
		return err
	case <-time.After(deadline + 25*time.Second):
		debug.SetTraceback("all")
		panic("Shutdown did not return 25s after its deadline; the engine's log above says what its loops wait for")
	}
}

// countDrains is the Handler counting its OnDrain calls.
type countDrains struct {
	*Handler
	drained atomic.Int32
}

func (h *countDrains) OnDrain(c *engine.Conn) {
	h.Handler.OnDrain(c)
	h.drained.Add(1)
}
