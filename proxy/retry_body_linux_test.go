package proxy

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/spindlenet/spindle/engine"
	"golang.org/x/sys/unix"
)

// early503 is a raw server that answers 503 (Content-Length: 0, kept
// alive) to each request head at once, before reading its body, and then
// reads and drops what comes; n counts the heads.
func early503(t *testing.T, n *atomic.Int64) string {
	return newUpstream(t, func(c net.Conn) {
		br := bufio.NewReader(c)
		for {
			r, err := http.ReadRequest(br)
			if err != nil {
				return
			}
			n.Add(1)
			io.WriteString(c, "HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\n\r\n")
			io.Copy(io.Discard, r.Body)
		}
	}).addr
}

// TestRetryBodySplit: a 60 KiB PUT body half of which arrived before
// the 503 (answered before the server read the body) and half after is
// sent whole to the other server (byte-identical: the sums match), and a
// GET pipelined in the same write as the body's end is answered after
// it, once.
func TestRetryBodySplit(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		var badN, goodN atomic.Int64
		bad := early503(t, &badN)
		good := newHTTPUpstream(t, func(w http.ResponseWriter, r *http.Request) {
			goodN.Add(1)
			body, _ := io.ReadAll(r.Body)
			fmt.Fprintf(w, "ok %s %s %s", r.Method, r.URL.Path, sum(body))
		}).addr
		p := startProxy(t, retryConfig(b, &RetryConfig{On: []string{"503"}}, bad, good))
		c := dial(t, p)
		c.SetNoDelay(true)
		br := bufio.NewReader(c)
		// Round-robin sends each PUT to the 503 server first and each GET
		// to the other (a retry takes no turn).
		for i := range 4 {
			body := randomBytes(uint64(10+i), 60<<10)
			badBefore, goodBefore := badN.Load(), goodN.Load()
			c.SetDeadline(time.Now().Add(10 * time.Second))
			fmt.Fprintf(c, "PUT /a HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n", len(body))
			c.Write(body[:20<<10])
			// The head at the good server is the retry (checked next), which
			// the proxy sends only once it has the 503: the rest of the body
			// comes after the 503.
			waitFor(t, fmt.Sprintf("PUT %d's head at the good server (the 503 acted on) before the rest of its body", i), func() bool { return goodN.Load() > goodBefore })
			if badN.Load() == badBefore {
				t.Fatalf("PUT %d went to the good server first: its body was not split", i)
			}
			c.Write(append(body[20<<10:len(body):len(body)], "GET /b HTTP/1.1\r\nHost: x\r\n\r\n"...))
			resp, got := readResponseFrom(t, c, br, "PUT")
			if want := "ok PUT /a " + sum(body); resp.StatusCode != 200 || got != want {
				t.Fatalf("PUT %d: %d %q, want 200 %q", i, resp.StatusCode, got, want)
			}
			resp, got = readResponseFrom(t, c, br, "GET")
			if want := "ok GET /b " + sum(nil); resp.StatusCode != 200 || got != want {
				t.Fatalf("pipelined GET %d: %d %q, want 200 %q", i, resp.StatusCode, got, want)
			}
		}
		if got := scrape(t, p)[`spindle_proxy_pool_retry_buffered_bytes{pool="app"}`]; got != 0 {
			t.Errorf("retry_buffered_bytes %v after the requests, want 0", got)
		}
	})
}

// TestRetryH2Queued: an HTTP/2 client's PUT whose 503 came before the
// rest of its body, retried where the only other server is at its
// max_conns, waits in the pool's queue with the rest of its body kept
// (the proxy does not write it to the upstream it let go of), and is
// sent whole once the slot is free. The body comes in three parts:
// before the 503, while the retry waits, after it is sent.
func TestRetryH2Queued(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		for _, h2 := range []bool{true, false} {
			retryQueued(t, b, h2)
		}
	})
}

// retryQueued is TestRetryH2Queued's for an HTTP/2 client (h2) or an
// HTTP/1.1 one.
func retryQueued(t *testing.T, b engine.Backend, h2 bool) {
	var badN, putN atomic.Int64
	bad := early503(t, &badN)
	slow := make(chan struct{})
	var slowIn atomic.Int64
	good := newHTTPUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/slow":
			slowIn.Add(1)
			<-slow
		case "/a":
			putN.Add(1)
		}
		body, _ := io.ReadAll(r.Body)
		fmt.Fprintf(w, "ok %s %s %s", r.Method, r.URL.Path, sum(body))
	}).addr
	cfg := retryConfig(b, &RetryConfig{On: []string{"503"}}, bad, good)
	cfg.Listeners[0].H2C = true
	cfg.Pools[0].Balance = LeastConn
	cfg.Pools[0].MaxConns = 1
	cfg.Pools[0].QueueTimeout = Duration(time.Minute) // (the wait ends at close(slow))
	p := startProxy(t, cfg)
	h1c, base := client(t, p)
	slowDone := make(chan string, 1)
	go func() {
		resp, err := h1c.Get(base + "/slow")
		if err != nil {
			slowDone <- err.Error()
			return
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		slowDone <- fmt.Sprint(resp.StatusCode, " ", string(body))
	}()
	waitFor(t, "/slow at the good server", func() bool { return slowIn.Load() > 0 })
	queued := func() bool { return scrape(t, p)[`spindle_proxy_pool_queue_length{pool="app"}`] == 1 }
	body := randomBytes(7, 60<<10)
	before := badN.Load()
	// write sends body bytes; arrived reports the proxy has those sent
	// (while the retry waits); answer ends the body and reads the
	// response.
	var write func(p []byte)
	var arrived func() bool
	var answer func() (int, string)
	if h2 {
		h2c, _ := h2Client(t, p)
		pr, pw := io.Pipe()
		defer pw.CloseWithError(errors.New("test over"))
		req, _ := http.NewRequest("PUT", base+"/a", pr)
		req.ContentLength = int64(len(body))
		replies := goReq(h2c, req)
		write = func(p []byte) { pw.Write(p) }
		// (Kept for a retry again, as they arrive: in the stream's body
		// while it waits, not written to the upstream let go of.)
		arrived = func() bool {
			return scrape(t, p)[`spindle_proxy_pool_retry_buffered_bytes{pool="app"}`] == 40<<10
		}
		answer = func() (int, string) {
			pw.Close()
			r := <-replies
			if r.err != nil {
				t.Fatal(r.err)
			}
			return r.status, r.body
		}
	} else {
		c := dial(t, p)
		br := bufio.NewReader(c)
		c.SetDeadline(time.Now().Add(10 * time.Second))
		fmt.Fprintf(c, "PUT /a HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n", len(body))
		write = func(p []byte) { c.Write(p) }
		// (Acknowledged by the proxy's socket: received, whether the
		// waiting session has read them yet or not.)
		arrived = func() bool { return unacked(t, c) == 0 }
		answer = func() (int, string) {
			resp, got := readResponseFrom(t, c, br, "PUT")
			return resp.StatusCode, got
		}
	}
	write(body[:20<<10])
	waitFor(t, "the PUT's retry (after its 503) in the queue", func() bool { return badN.Load() > before && queued() })
	write(body[20<<10 : 40<<10])
	waitFor(t, "the body's second part at the proxy while the retry waits", arrived)
	if !queued() {
		t.Fatal("the PUT's retry left the queue before the slot was free")
	}
	close(slow)
	waitFor(t, "the PUT's retry at the good server (the slot free) before the body's last part", func() bool { return putN.Load() > 0 })
	write(body[40<<10:])
	status, got := answer()
	if want := "ok PUT /a " + sum(body); status != 200 || got != want {
		t.Errorf("PUT: %d %q, want 200 %q", status, got, want)
	}
	if s := <-slowDone; s != "200 ok GET /slow "+sum(nil) {
		t.Errorf("/slow: %s", s)
	}
}

// unacked is what c's socket holds that its peer has not acknowledged
// (SIOCOUTQ).
func unacked(t *testing.T, c net.Conn) int {
	t.Helper()
	rc, err := c.(*net.TCPConn).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var n int
	if cerr := rc.Control(func(fd uintptr) { n, err = unix.IoctlGetInt(int(fd), unix.SIOCOUTQ) }); cerr != nil {
		t.Fatal(cerr)
	}
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// retryHeld sums pool's retries in flight and body bytes held over the
// loops, and the received buffers held for retries on those loops, over
// all the pools (read racily, as /metrics does).
func retryHeld(p *Proxy, pool string) (inFlight, buffered, bufs int64) {
	p.mu.RLock()
	defer p.mu.RUnlock()
	for _, pl := range p.pools {
		if pl.name != pool {
			continue
		}
		for k := range pl.shared.retry {
			rl := &pl.shared.retry[k]
			inFlight += rl.inFlight.load()
			buffered += rl.buffered.load()
			bufs += rl.held.bufs.load()
		}
	}
	return
}

// TestRetryClientGone: a client that goes away while its request's retry
// is in flight (an HTTP/1.1 client closing, an HTTP/2 client resetting
// its stream) gives back its count in the budget and the body held for
// it, as does a reload meanwhile. An HTTP/1.1 client's FIN after its
// whole request is a half close (clientEOF: the response is awaited, the
// client not read), so its retries go on to their last try's timeout
// (4 × 150ms) before the count goes: the test waits for that after each
// close, or three such clients still counted on the loop would fill the
// budget's floor (RetryBudgetFloor) and the HTTP/2 request's retry would
// be refused (504 at its first try's timeout, not its cancel).
func TestRetryClientGone(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		release := make(chan struct{})
		defer close(release)
		silent := func(c net.Conn) {
			br := bufio.NewReader(c)
			r, err := http.ReadRequest(br)
			if err != nil {
				return
			}
			io.Copy(io.Discard, r.Body)
			<-release
		}
		a, z := newUpstream(t, silent).addr, newUpstream(t, silent).addr
		cfg := retryConfig(b, &RetryConfig{On: []string{RetryResponseTimeout}, PerTryTimeout: Duration(150 * time.Millisecond), Attempts: 3}, a, z)
		cfg.Listeners[0].H2C = true
		p := startProxy(t, cfg)
		body := randomBytes(3, 10<<10)
		for i := range 3 {
			c := dial(t, p)
			fmt.Fprintf(c, "PUT / HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n", len(body))
			c.Write(body)
			waitFor(t, fmt.Sprintf("client %d's retry counted", i), func() bool {
				n, _, _ := retryHeld(p, "app")
				return n > 0
			})
			c.Close()
			waitFor(t, fmt.Sprintf("client %d's retries given back", i), func() bool {
				n, buffered, bufs := retryHeld(p, "app")
				return n == 0 && buffered == 0 && bufs == 0
			})
		}
		h2c, base := h2Client(t, p)
		ctx, cancel := context.WithCancel(context.Background())
		go func() {
			for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
				if n, _, _ := retryHeld(p, "app"); n > 0 {
					break
				}
			}
			cancel()
		}()
		req, _ := http.NewRequestWithContext(ctx, "PUT", base+"/", bytes.NewReader(body))
		if resp, err := h2c.Do(req); err == nil {
			resp.Body.Close()
			t.Fatalf("HTTP/2 PUT: %d, want its cancel", resp.StatusCode)
		}
		waitFor(t, "the retries' counts given back", func() bool {
			n, buffered, bufs := retryHeld(p, "app")
			return n == 0 && buffered == 0 && bufs == 0
		})
	})
}

// TestRetryHash: a retry of a request to a hash pool leaves the server
// its key took, its connection kept (a 503 that ended with its head goes
// back to the idle pool) or not: of keys over both servers, in both
// orders, none gets the 503.
func TestRetryHash(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		ru := retryPair(t)
		for _, servers := range [][]string{{ru.bad, ru.good}, {ru.good, ru.bad}} {
			cfg := retryConfig(b, &RetryConfig{On: []string{"503"}}, servers...)
			cfg.Pools[0].Balance = Hash
			cfg.Pools[0].Hash = &HashConfig{Key: "header:X-User"}
			p := startProxy(t, cfg)
			c := dial(t, p)
			br := bufio.NewReader(c)
			before := ru.badN.Load()
			for k := range 40 {
				c.SetDeadline(time.Now().Add(10 * time.Second))
				fmt.Fprintf(c, "GET / HTTP/1.1\r\nHost: x\r\nX-User: u%d\r\n\r\n", k)
				if resp, got := readResponseFrom(t, c, br, "GET"); resp.StatusCode != 200 {
					t.Errorf("servers %v, key u%d: %d %q, want 200", servers, k, resp.StatusCode, got)
				}
			}
			if ru.badN.Load() == before {
				t.Errorf("servers %v: no key went to the 503 server", servers)
			}
		}
	})
}
