package bench

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestLoadThreadsNotOnMainThread: no client thread runs on the process's
// main thread. A client thread changes its affinity (and network
// namespace) and is never unlocked; on the main thread the runtime parks
// the thread for good instead of ending it, and the process's id (so
// /proc/self, sched_getaffinity of the pid) then shows the client's CPU
// pin and namespace for the whole process.
func TestLoadThreadsNotOnMainThread(t *testing.T) {
	addr := startTestServer(t, "go-net")
	var before unix.CPUSet
	if err := unix.SchedGetaffinity(os.Getpid(), &before); err != nil {
		t.Fatal(err)
	}
	pin := -1
	for cpu := range 1024 {
		if before.IsSet(cpu) {
			pin = cpu
		}
	}
	var onMain atomic.Int64
	testClientThread = func() {
		if unix.Gettid() == os.Getpid() {
			onMain.Add(1)
		}
	}
	defer func() { testClientThread = nil }()
	for i := range 300 {
		_, err := RunLoad(context.Background(), LoadConfig{
			Addr: addr, Conns: 2, Threads: 2, CPUs: []int{pin},
			Warmup: time.Microsecond, Duration: time.Millisecond,
		})
		if err != nil {
			t.Fatal(err)
		}
		var after unix.CPUSet
		if err := unix.SchedGetaffinity(os.Getpid(), &after); err != nil {
			t.Fatal(err)
		}
		if after != before {
			t.Fatalf("run %d: the main thread's affinity is %d CPUs, was %d: a client thread's pin to CPU %d stayed on it", i, after.Count(), before.Count(), pin)
		}
		if n := onMain.Load(); n > 0 {
			t.Fatalf("run %d: %d client threads ran on the main thread", i, n)
		}
	}
}

// TestOpenLoopSendLagCountsPartialWrites: a request's send lag runs to the
// write that put its last byte into the socket. A server that stops
// reading fills the socket buffers, and the requests due meanwhile wait in
// the client's own buffer; their lag was recorded when the client first
// tried to write them (µs), as if the client had kept its schedule, and
// not when they went out, after the stall.
func TestOpenLoopSendLagCountsPartialWrites(t *testing.T) {
	const (
		stall   = 300 * time.Millisecond
		payload = 64 << 10
	)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	served := make(chan struct{})
	go func() {
		defer close(served)
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		time.Sleep(stall)      // the stall: nothing read
		io.Copy(io.Discard, c) // read again, never answer
	}()
	res, err := RunLoad(context.Background(), LoadConfig{
		Addr: ln.Addr().String(), Conns: 1, Rate: 1000, Payload: payload,
		Warmup: time.Microsecond, Duration: 2 * stall, Drain: 100 * time.Millisecond,
	})
	ln.Close()
	if err != nil {
		t.Fatal(err)
	}
	<-served
	// One for each request of the window: those still unsent when the run
	// ended too (TestOpenLoopSendLagCountsNeverSent).
	if res.SendLag.Count() != res.Hist.Count() {
		t.Fatalf("send lag has %d samples for %d latencies (%d requests sent)", res.SendLag.Count(), res.Hist.Count(), res.Sent)
	}
	// The socket buffers hold a few MB, a few dozen requests: most of the
	// stall's 300 requests waited in the client until the server read
	// again, the earliest of them most of the stall.
	if m := res.SendLag.Max(); m < stall/2 {
		t.Errorf("send lag max = %v through a %v stall with the socket full: requests not yet written counted as sent", m, stall)
	}
	t.Logf("send lag %s; %d of %d requests sent", res.SendLag, res.Sent, res.Scheduled)
}

// TestOpenLoopSendLagCountsNeverSent: a request of the window that never
// went out (every connection at MaxOutstanding to the end) counts in the
// send lag at the time it had waited, as it does in the latencies: the
// send lag has one sample for every latency. Against a server that never
// answers, one request in flight per connection, the warm-up's request
// holds the only connection and none of the window's is sent; the send
// lag had no sample at all while the latencies had all of them, so its
// percentiles left out the requests furthest behind their schedule.
func TestOpenLoopSendLagCountsNeverSent(t *testing.T) {
	const drain = 50 * time.Millisecond
	res, err := RunLoad(context.Background(), LoadConfig{
		Addr: silentServer(t).String(), Conns: 1, Rate: 1000, MaxOutstanding: 1,
		Warmup: 20 * time.Millisecond, Duration: 100 * time.Millisecond, Drain: drain,
	})
	if err != nil {
		t.Fatal(err)
	}
	if res.Sent != 0 || res.Scheduled == 0 || res.Unanswered != res.Scheduled || res.Hist.Count() != int64(res.Scheduled) {
		t.Fatalf("scheduled %d, sent %d, unanswered %d, latencies %d: want none of the window's requests sent, all of them unanswered latencies", res.Scheduled, res.Sent, res.Unanswered, res.Hist.Count())
	}
	if res.SendLag.Count() != res.Hist.Count() {
		t.Errorf("send lag has %d samples for %d latencies (requests of the window, %d of them never sent)", res.SendLag.Count(), res.Hist.Count(), res.Scheduled-res.Sent)
	}
	// Each waited past the window's end to the drain's at least.
	if p := res.SendLag.Quantile(0); p < drain {
		t.Errorf("send lag minimum %v, want at least the %v drain", p, drain)
	}
}

// TestLoadConnectHonoursContext: a run whose connections cannot complete
// (a server whose accept queue is full, so the kernel drops their SYNs)
// ends when its context does. Connects were blocking: each waited out the
// SYN retries, about two minutes, one connection after another, and
// neither a deadline nor Ctrl-C could stop them.
func TestLoadConnectHonoursContext(t *testing.T) {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	if err := unix.Bind(fd, &unix.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatal(err)
	}
	if err := unix.Listen(fd, 0); err != nil { // one connection queued, never accepted
		t.Fatal(err)
	}
	sa, err := unix.Getsockname(fd)
	if err != nil {
		t.Fatal(err)
	}
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(sa.(*unix.SockaddrInet4).Port))
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := RunLoad(ctx, LoadConfig{Addr: addr, Conns: 4, Warmup: time.Millisecond, Duration: time.Millisecond})
		done <- err
	}()
	select {
	case err := <-done:
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("RunLoad: %v, want the context's deadline", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("RunLoad still connecting 20 s after its context's 300 ms deadline")
	}
}

// TestLoadGarbledReplyLength: a reply whose length prefix is not the
// request's fails verification at once. The client waited for the length
// it announced (up to MaxPayload), so a server that garbled it was
// reported as one that did not answer: the run ended after the drain with
// the request unanswered and no error.
func TestLoadGarbledReplyLength(t *testing.T) {
	addr := answerOnce(t, FrameHeader+DefaultPayload, false, func(req []byte) []byte {
		req[3]++ // one byte more than was sent, which never comes
		return req
	})
	res, err := RunLoad(context.Background(), LoadConfig{Addr: addr, Conns: 1,
		Warmup: time.Millisecond, Duration: 100 * time.Millisecond, Drain: 200 * time.Millisecond})
	if !errors.Is(err, ErrMismatch) {
		t.Fatalf("a reply announcing %d payload bytes to a %d-byte request: err = %v (result %+v), want a mismatch", DefaultPayload+1, DefaultPayload, err, res)
	}
}

// answerOnce starts a server on loopback that accepts one connection,
// reads a request of reqLen bytes and writes answer(request); then, with
// hangUp, it closes the connection, else reads and drops what follows
// until the client closes it. It returns the server's address.
func answerOnce(t *testing.T, reqLen int, hangUp bool, answer func(req []byte) []byte) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan struct{})
	t.Cleanup(func() {
		ln.Close()
		<-served
	})
	go func() {
		defer close(served)
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		req := make([]byte, reqLen)
		if _, err := io.ReadFull(c, req); err != nil {
			return
		}
		if _, err := c.Write(answer(req)); err != nil || hangUp {
			return
		}
		io.Copy(io.Discard, c)
	}()
	return ln.Addr().String()
}

// TestLoadSendBufferCompaction: the bytes the client moves to reuse its
// send buffer are at most the bytes it wrote, however large the backlog a
// slow server lets build up. It moved the whole backlog down after every
// partial write: a backlog of B bytes leaving w at a time cost B²/2w.
func TestLoadSendBufferCompaction(t *testing.T) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fds[1])
	// A small socket buffer: each write takes a few KiB of the backlog.
	if err := unix.SetsockoptInt(fds[0], unix.SOL_SOCKET, unix.SO_SNDBUF, 16<<10); err != nil {
		t.Fatal(err)
	}
	ep, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		t.Fatal(err)
	}
	c := &loadConn{fd: fds[0]}
	lt := &loadThread{cfg: LoadConfig{Payload: 1000}, framing: rpcFraming{payload: 1000}, ep: ep, timer: -1, conns: []*loadConn{c}}
	defer lt.close()
	if err := unix.EpollCtl(ep, unix.EPOLL_CTL_ADD, c.fd, &unix.EpollEvent{Events: unix.EPOLLIN}); err != nil {
		t.Fatal(err)
	}
	// A backlog of 2 MiB, then one request more per round while the
	// peer reads what each round's write let through.
	for range 2 << 10 {
		lt.send(c, 0)
	}
	buf := make([]byte, 64<<10)
	var read uint64
	for rounds := 0; c.queued() > 0; rounds++ {
		if rounds == 1<<20 {
			t.Fatalf("%d bytes still queued after %d rounds", c.queued(), rounds)
		}
		if rounds < 4<<10 {
			lt.send(c, 0)
		}
		if err := lt.flush(c); err != nil {
			t.Fatal(err)
		}
		for {
			n, err := unix.Read(fds[1], buf)
			if err == unix.EAGAIN {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			read += uint64(n)
		}
	}
	if read != c.written {
		t.Fatalf("peer read %d bytes, client wrote %d", read, c.written)
	}
	if c.moved > c.written {
		t.Errorf("moved %d bytes within the send buffer to write %d (%.1f×): compaction is not linear", c.moved, c.written, float64(c.moved)/float64(c.written))
	}
	t.Logf("wrote %d bytes, moved %d", c.written, c.moved)
}

// TestOpenLoopQueueBounded: against a server that accepts and never
// reads, with the largest payload, the client's send buffer stays bounded
// (maxQueuedBytes of requests not yet written, and the written prefix it
// has not yet reclaimed, at most that again), and the requests it held back
// count as not sent. It queued every request due, MaxOutstanding of them per
// connection: up to a GiB per connection at 1 MiB each.
func TestOpenLoopQueueBounded(t *testing.T) {
	addr := silentServer(t)
	cfg, err := LoadConfig{Addr: addr.String(), Conns: 1, Rate: 500, Payload: MaxPayload,
		Warmup: time.Microsecond, Duration: 200 * time.Millisecond, Drain: 50 * time.Millisecond}.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	var stop atomic.Bool
	lt := &loadThread{cfg: cfg, framing: newLoadFraming(cfg), base: time.Now(), hist: NewHistogram(), lag: NewHistogram(), stop: &stop, ep: -1, timer: -1}
	defer lt.close()
	if err := lt.setup(0, 1, addr); err != nil {
		t.Fatal(err)
	}
	if err := lt.run(lt.now() + int64(time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	c := lt.conns[0]
	frame := FrameHeader + MaxPayload
	// Below maxQueuedBytes unwritten before a request is added, and the
	// written prefix reclaimed once it is as long as the rest: the buffer
	// holds under 2×maxQueuedBytes + frame, and append at most doubles it.
	if limit := 2 * (2*maxQueuedBytes + frame); cap(c.wbuf) > limit {
		t.Errorf("send buffer grew to %d MiB against a server that does not read (limit %d MiB)", cap(c.wbuf)>>20, limit>>20)
	}
	if lt.sent >= lt.scheduled || lt.unanswered != lt.scheduled {
		t.Errorf("scheduled %d, sent %d, unanswered %d: want fewer sent than scheduled, all unanswered", lt.scheduled, lt.sent, lt.unanswered)
	}
	t.Logf("scheduled %d, sent %d; send buffer %d KiB", lt.scheduled, lt.sent, cap(c.wbuf)>>10)
}

// silentServer listens on a loopback port and accepts connections, which
// it holds open, never reading or answering, until t ends; it returns its
// address.
func silentServer(t *testing.T) *net.TCPAddr {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var conns []net.Conn
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			conns = append(conns, c)
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		<-done // conns is complete
		for _, c := range conns {
			c.Close()
		}
	})
	return ln.Addr().(*net.TCPAddr)
}

// TestLoadReceiveBufferCompaction: a large reply that arrives in many
// reads is moved within the client's receive buffer at most once (its
// unread tail, when the replies before it are done), not after every read.
// The client moved the whole partial reply down onto itself after each
// read: a reply of F bytes arriving r at a time cost F²/2r.
func TestLoadReceiveBufferCompaction(t *testing.T) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fds[1])
	c := &loadConn{fd: fds[0], rbuf: make([]byte, 0, 64<<10)}
	lt := &loadThread{cfg: LoadConfig{Payload: MaxPayload}, framing: rpcFraming{payload: MaxPayload}, ep: -1, timer: -1, conns: []*loadConn{c}}
	defer lt.close()
	var replies []byte
	for seq := range uint64(2) {
		c.push(pending{seq: seq})
		replies = AppendRequest(replies, c.id, seq, MaxPayload)
	}
	const chunk = 16 << 10
	for off := 0; off < len(replies); off += chunk {
		if _, err := unix.Write(fds[1], replies[off:min(off+chunk, len(replies))]); err != nil {
			t.Fatal(err)
		}
		if err := lt.receive(c, false); err != nil {
			t.Fatal(err)
		}
	}
	if c.inflight() != 0 {
		t.Fatalf("%d replies not verified", c.inflight())
	}
	if c.rmoved > uint64(len(replies)) {
		t.Errorf("moved %d bytes within the receive buffer for %d bytes of replies (%.1f×): compaction is not linear", c.rmoved, len(replies), float64(c.rmoved)/float64(len(replies)))
	}
	t.Logf("received %d bytes, moved %d", len(replies), c.rmoved)
}

// TestLoadHTTPArms: the HTTP load generator against each arm whose
// HTTP/1.1 side the tests drive, closed loop pipelined and open loop:
// every request of the window is answered and verified.
func TestLoadHTTPArms(t *testing.T) {
	for _, arm := range httpArms {
		t.Run(arm, func(t *testing.T) {
			addr := startTestServer(t, arm)
			for _, rate := range []float64{0, 2000} {
				res := servedLoad(t, LoadConfig{
					Addr: addr, Protocol: ProtocolHTTP, Conns: 4, InFlight: 2, Rate: rate, Payload: 300,
					Warmup: 20 * time.Millisecond, Duration: 100 * time.Millisecond,
				}, unserved)
				if res.Sent != res.Answered || res.Hist.Count() != int64(res.Answered) {
					t.Fatalf("rate %v: replies %d, sent %d, answered %d, unanswered %d, histogram %d", rate, res.Replies, res.Sent, res.Answered, res.Unanswered, res.Hist.Count())
				}
			}
		})
	}
}

// TestLoadHTTPBadServer: a server whose responses are wrong (status, body
// length, body bytes), that the client cannot frame, that closes the
// connection or says it will, fails the run at once, as a wrong RPC echo
// does: not a wait through the drain for bytes that never come.
func TestLoadHTTPBadServer(t *testing.T) {
	const payload = 16
	body := string(appendPayload(nil, 0, 0, payload)) // connection 0's request 0
	tests := []struct {
		name, resp string
		hangUp     bool // close the connection after resp
		err        string
	}{
		{"status 503", "HTTP/1.1 503 Service Unavailable\r\nContent-Length: 16\r\n\r\n" + body, false, "status"},
		{"short body", "HTTP/1.1 200 OK\r\nContent-Length: 8\r\n\r\n" + body[:8], false, "8-byte body"},
		{"body cut off", "HTTP/1.1 200 OK\r\nContent-Length: 16\r\n\r\n" + body[:8], true, "server closed the connection"},
		{"wrong body", "HTTP/1.1 200 OK\r\nContent-Length: 16\r\n\r\n" + strings.Repeat("a", payload), false, "not request 0's"},
		{"chunked", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n10\r\n" + body + "\r\n0\r\n\r\n", false, "Transfer-Encoding"},
		{"Connection: close", "HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 16\r\n\r\n" + body, true, "closes the connection"},
		{"RPC echo", string(AppendRequest(nil, 0, 0, payload)), false, "head too large"},
	}
	const host = "bench.test"
	reqLen := len(newHTTPFraming(host, payload).appendRequest(nil, 0, 0))
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			addr := answerOnce(t, reqLen, tc.hangUp, func([]byte) []byte {
				resp := []byte(tc.resp)
				if tc.err == "head too large" {
					// RPC echoes, more than an HTTP head may take.
					for len(resp) <= maxHTTPHeader {
						resp = append(resp, tc.resp...)
					}
				}
				return resp
			})
			const drain = 10 * time.Second
			start := time.Now()
			// A window long enough that a starved client (CI's -race run
			// beside other tests) still sends its request in it: the bad
			// answer ends the run at once.
			res, err := RunLoad(context.Background(), LoadConfig{Addr: addr, Protocol: ProtocolHTTP, Host: host, Conns: 1, Payload: payload,
				Warmup: time.Millisecond, Duration: 3 * time.Second, Drain: drain})
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Fatalf("err = %v (result %+v), want an error saying %q", err, res, tc.err)
			}
			if d := time.Since(start); d > drain/2 {
				t.Errorf("the run took %v: the client waited for the drain", d)
			}
			t.Log(err)
		})
	}
}

// TestLoadHotPathAllocs: a client connection's per-request path (read,
// frame and verify a reply, record its latency, queue and write the next
// request; in open loop, the request queued with its intended time and
// its send lag recorded once written) does not allocate once its buffers
// have grown, in either protocol. The peer answers with Echo. In open
// loop the list of requests awaiting their lag was resliced past its
// written prefix, so each request's entry went into a new array: one
// allocation per request, and a GC in the harness every few hundred
// thousand, whose stop-the-world stalls the client thread (a stall
// open-loop latency charges to the server) and whose workers may run on
// the server's CPU.
func TestLoadHotPathAllocs(t *testing.T) {
	for _, tc := range []struct {
		name, proto string
		rate        float64
	}{
		{"rpc", ProtocolRPC, 0},
		{"http", ProtocolHTTP, 0},
		{"rpc open loop", ProtocolRPC, 1000},
		{"http open loop", ProtocolHTTP, 1000},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer unix.Close(fds[1])
			cfg, err := LoadConfig{Addr: "127.0.0.1:1", Protocol: tc.proto, Rate: tc.rate, Duration: time.Hour}.withDefaults()
			if err != nil {
				t.Fatal(err)
			}
			c := &loadConn{fd: fds[0], rbuf: make([]byte, 0, 64<<10)}
			lt := &loadThread{cfg: cfg, framing: newLoadFraming(cfg), base: time.Now(), hist: NewHistogram(), lag: NewHistogram(),
				ep: -1, timer: -1, conns: []*loadConn{c}, winEnd: int64(time.Hour)}
			defer lt.close()
			var e Echo
			in := make([]byte, 64<<10)
			out := make([]byte, 0, 64<<10)
			closed := tc.rate == 0
			if closed {
				lt.send(c, lt.now())
			}
			step := func() {
				// The peer answers what the client wrote; the client
				// verifies it and, in closed loop, queues its next
				// request; in open loop the request is queued first.
				if !closed {
					lt.send(c, lt.now())
				}
				if err := lt.flush(c); err != nil {
					t.Fatal(err)
				}
				n, err := unix.Read(fds[1], in)
				if err != nil {
					t.Fatal(err)
				}
				done, reply, err := e.Process(in[:n], out[:0])
				if err != nil || done != n {
					t.Fatalf("Echo took %d of %d bytes: %v", done, n, err)
				}
				if _, err := unix.Write(fds[1], reply); err != nil {
					t.Fatal(err)
				}
				if err := lt.receive(c, closed); err != nil {
					t.Fatal(err)
				}
			}
			for range 100 { // grow the buffers
				step()
			}
			if n := testing.AllocsPerRun(1000, step); n != 0 {
				t.Errorf("%v allocations per request", n)
			}
			if lt.answered < 1100 || e.HTTP() != (tc.proto == ProtocolHTTP) {
				t.Fatalf("%d replies verified, server saw HTTP %v", lt.answered, e.HTTP())
			}
			if !closed && lt.lag.Count() < 1100 {
				t.Fatalf("%d send lags recorded", lt.lag.Count())
			}
		})
	}
}

// TestLoadRecordsReplyTimes: a run counts every reply by the millisecond
// it came in, from the load's start on, so that CPU read at other times
// than the window's edges is divided by the replies between its reads:
// the window's milliseconds hold exactly the window's replies, and the
// whole record at least as many (the warm-up's and the drain's too).
func TestLoadRecordsReplyTimes(t *testing.T) {
	addr := startTestServer(t, "go-net")
	for _, rate := range []float64{0, 2000} {
		const warmup, window = 20 * time.Millisecond, 100 * time.Millisecond
		res := servedLoad(t, LoadConfig{Addr: addr, Conns: 2, Rate: rate, Warmup: warmup, Duration: window}, unserved)
		from := res.times.origin.Add(warmup)
		if got := res.times.between(from, from.Add(res.Window)); got != float64(res.Replies) {
			t.Errorf("rate %v: %v replies recorded in the window, %d counted", rate, got, res.Replies)
		}
		var all uint64
		for _, n := range res.times.perMS {
			all += n
		}
		if all < res.Replies {
			t.Errorf("rate %v: %d replies recorded in the run, %d in its window", rate, all, res.Replies)
		}
	}
}
