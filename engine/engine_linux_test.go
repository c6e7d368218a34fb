package engine

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/spindlenet/spindle/internal/testnet"
	"github.com/spindlenet/spindle/uring"
)

// testBackends is every backend; each test runs over all of them. In the
// passes scripts/test.sh makes with a setting only some backends read, it
// is those backends, the others' runs repeating the default pass's: with
// Config.BatchWait (testBatchWait) uring and uring-napi, as uring-sqpoll
// and the epoll backends never read it (uringBackend.setup; TestBatchWait
// checks in the default pass that they ignore it), and without the
// receive limit (testNoRecvLimit) the uring backends, as the epoll ones
// have no multishot receives.
var testBackends = func() []Backend {
	switch {
	case testBatchWait > 0:
		return []Backend{BackendURing, BackendURingNAPI}
	case testNoRecvLimit:
		return []Backend{BackendURing, BackendURingSQPoll, BackendURingNAPI}
	}
	return Backends
}()

// echoHandler echoes what it receives, copying (Write) or forwarding the
// received buffer itself (WriteBuffer).
type echoHandler struct {
	BaseHandler
	zeroCopy bool
	peak     atomic.Int64 // largest write queue seen
	opens    atomic.Int64
	closes   atomic.Int64
	errs     atomic.Int64 // OnClose with an error
	eofMsg   []byte       // written after the peer's FIN, before Close
	onOpen   func(c *Conn)
	onData   func(c *Conn, b Buffer)
}

func (h *echoHandler) OnOpen(c *Conn) {
	h.opens.Add(1)
	if h.onOpen != nil {
		h.onOpen(c)
	}
}

func (h *echoHandler) OnData(c *Conn, b Buffer) bool {
	if h.onData != nil {
		h.onData(c, b)
	}
	keep := false
	if h.zeroCopy {
		c.WriteBuffer(b)
		keep = true
	} else {
		c.Write(b.Bytes())
	}
	if q := int64(c.Buffered()); q > h.peak.Load() {
		h.peak.Store(q)
	}
	return keep
}

func (h *echoHandler) OnEOF(c *Conn) {
	if h.eofMsg != nil {
		c.Write(h.eofMsg)
	}
	c.Close()
}

func (h *echoHandler) OnClose(c *Conn, err error) {
	h.closes.Add(1)
	if err != nil {
		h.errs.Add(1)
	}
}

// startEngine runs an engine with h listening on loopback and shuts it down
// at the end of the test.
func startEngine(t testing.TB, cfg *Config, h Handler) (*Engine, string) {
	t.Helper()
	e, ln := startListening(t, cfg, h, "tcp", "127.0.0.1:0")
	return e, ln.Addr().String()
}

// startListening is startEngine listening on network and address: it
// returns the listener.
func startListening(t testing.TB, cfg *Config, h Handler, network, address string) (*Engine, *Listener) {
	t.Helper()
	e := newEngine(t, cfg, h)
	if cfg != nil && cfg.Backend != "" && e.Backend() != cfg.Backend {
		t.Fatalf("asked for backend %s, engine runs %s", cfg.Backend, e.Backend())
	}
	ln, err := e.Listen(network, address, nil)
	if err != nil {
		t.Fatal(err)
	}
	runEngine(t, e)
	return e, ln
}

// mustDial dials address on network, failing the test on an error; the
// connection is closed when the test ends.
func mustDial(t testing.TB, network, address string) net.Conn {
	t.Helper()
	c, err := net.Dial(network, address)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// newEngine is New, failing the test on its error. At the end of the test
// (its engines stopped by then) it fails the test if a ring's Close left
// receive buffers mapped that the test did not account for in
// ringLeftMappings: TestMain would count them as a leak, without saying
// which test left them.
func newEngine(t testing.TB, cfg *Config, h Handler) *Engine {
	t.Helper()
	e, err := New(cfg, h)
	if err != nil {
		t.Fatal(err)
	}
	recvLeft, accounted := uring.LeftMappedBytes(), ringLeftMappings.Load()
	t.Cleanup(func() {
		if n := uring.LeftMappedBytes() - recvLeft; n > 0 && ringLeftMappings.Load() == accounted {
			t.Errorf("a ring's Close left %d bytes of receive buffers mapped (it could not confirm that the ring's requests had ended), which the test did not account for", n)
		}
	})
	return e
}

// runEngine runs e until the end of the test, then shuts it down and checks
// that no connection is left.
func runEngine(t testing.TB, e *Engine) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- e.Run(ctx) }()
	t.Cleanup(func() {
		sctx, scancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer scancel()
		if err := e.Shutdown(sctx); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
		if s := e.Stats(); s.Open != 0 {
			t.Errorf("%d connections open after Shutdown", s.Open)
		}
		for _, l := range e.Loops() { // exited: read from here
			if len(l.queues) != 0 || len(queueErrors(l)) != 0 {
				t.Errorf("loop %d: %d connections listed for the sweep after Shutdown: %q", l.ID(), len(l.queues), queueErrors(l))
			}
		}
	})
}

func testConfig(b Backend) *Config {
	return &Config{Backend: b, BatchWait: testBatchWait, Logf: testLogf}
}

// testLogf drops the engine's lines but those of a stop that stalls
// (Loop.sayStall, Engine.awaitExit), which it writes to stderr: a test
// hung in Shutdown or Run says what the loops wait for before go test's
// timeout prints the stacks.
func testLogf(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	if strings.Contains(msg, "has been stopping for") || strings.Contains(msg, "have not exited") {
		fmt.Fprintln(os.Stderr, msg)
	}
}

// zcLog keeps the engine's first line saying the kernel refused it locked
// memory (memlockNote's words: a loop's ring refused, the loop running
// epoll, or SEND_ZC's probe ring or the send slab's registration, the
// loops sending without SEND_ZC), so that a test that checks SEND_ZC
// sends can tell such a refusal from a failure: without CAP_IPC_LOCK the
// kernel charges them to RLIMIT_MEMLOCK, against a count kept per user,
// which the other test processes' rings take from where the tests run
// unprivileged (go test runs packages in parallel).
type zcLog struct {
	mu   sync.Mutex
	line string
}

// logf is a Config.Logf: testLogf, keeping the line.
func (z *zcLog) logf(format string, args ...any) {
	if msg := fmt.Sprintf(format, args...); strings.Contains(msg, "RLIMIT_MEMLOCK is") {
		z.mu.Lock()
		if z.line == "" {
			z.line = msg
		}
		z.mu.Unlock()
	}
	testLogf(format, args...)
}

// skipShortOfLockedMemory skips t where the engine said the kernel
// refused it locked memory.
func (z *zcLog) skipShortOfLockedMemory(t testing.TB) {
	t.Helper()
	z.mu.Lock()
	line := z.line
	z.mu.Unlock()
	if line != "" {
		t.Skipf("no SEND_ZC: the kernel refused locked memory: %q", line)
	}
}

// testBatchWait runs the suite's engines with Config.BatchWait when
// SPINDLE_TEST_BATCH_WAIT holds a duration; scripts/test.sh runs the
// package a second time with 100µs, so that every path (half-close, reset,
// slow readers, shutdown) also runs with minimum waits.
var testBatchWait = func() time.Duration {
	d, _ := time.ParseDuration(os.Getenv("SPINDLE_TEST_BATCH_WAIT"))
	return d
}()

// skipWithBatchWait skips t in the pass scripts/test.sh makes with
// SPINDLE_TEST_BATCH_WAIT, for a test none of whose engines reads
// Config.BatchWait (engines says which they are): its run there would
// repeat the default pass's.
func skipWithBatchWait(t *testing.T, engines string) {
	t.Helper()
	if testBatchWait > 0 {
		t.Skipf("no engine here reads Config.BatchWait (%s): the default pass runs it", engines)
	}
}

// With SPINDLE_TEST_NO_RECV_LIMIT set, the uring backends run as on
// kernels older than 6.17, without the multishot receive byte limit:
// unlimited multishot receives, and single-shot ones under SQPOLL.
// scripts/test.sh runs the tests those paths change that way too.
var testNoRecvLimit = os.Getenv("SPINDLE_TEST_NO_RECV_LIMIT") != ""

func init() {
	if testNoRecvLimit {
		recvLimitUsable = func() bool { return false }
	}
}

// testData is random bytes; connection seed sends testData[seed*4099:]
// (distinct offsets for the 1,000 connections of a test, so data crossing
// connections shows). Slicing one block instead of generating a stream per
// connection keeps the clients cheap under -race, and so does the block's
// being off the Go heap (offHeap).
var testData = sync.OnceValue(func() []byte {
	b, err := offHeap(12 << 20)
	if err != nil {
		panic(err)
	}
	rand.NewChaCha8([32]byte{42}).Read(b)
	return b
})

// offHeap returns n zeroed bytes mapped outside the Go heap, for a test
// client's data and read buffers. The race detector checks only Go heap
// and data memory, so the ranges that socket reads and writes mark as
// accessed (syscall.Read and Write do, under -race) cost nothing there:
// on the heap, marking the gigabyte each way of TestEchoIntegrity's
// clients took most of its CPU time. The engine's own memory is checked
// as before. The caller unmaps it (unix.Munmap) when it is done, or
// keeps it for the test binary's life.
func offHeap(n int) ([]byte, error) {
	return unix.Mmap(-1, 0, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
}

func pattern(seed uint64, size int) []byte {
	off := int(seed%1024) * 4099
	return testData()[off : off+size]
}

// echoOnce sends size bytes of seed's pattern in writes of at most wsize,
// half-closes, and checks that exactly the same bytes come back before EOF.
func echoOnce(addr string, seed uint64, size, wsize int, tail []byte) error {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		return err
	}
	defer c.Close()
	return echoOver(c.(*net.TCPConn), seed, size, wsize, tail)
}

// echoOver is echoOnce over c, connected: a *net.TCPConn, or a *tls.Conn
// whose CloseWrite sends close_notify.
func echoOver(c interface {
	net.Conn
	CloseWrite() error
}, seed uint64, size, wsize int, tail []byte) error {
	data := pattern(seed, size)
	werr := make(chan error, 1)
	go func() {
		for p := data; len(p) > 0; {
			n := min(len(p), wsize)
			if _, err := c.Write(p[:n]); err != nil {
				werr <- err
				return
			}
			p = p[n:]
		}
		werr <- c.CloseWrite()
	}()
	got, err := offHeap(32 << 10)
	if err != nil {
		return err
	}
	defer unix.Munmap(got)
	left := size
	for left > 0 {
		n, err := c.Read(got[:min(len(got), left)])
		if n > 0 {
			if at := size - left; !bytes.Equal(got[:n], data[at:at+n]) {
				return fmt.Errorf("echo differs at byte %d of %d", at, size)
			}
			left -= n
		}
		if err == io.EOF && left == 0 {
			// With the last bytes: a *tls.Conn that has read the
			// close_notify after them says so at once.
			break
		}
		if err != nil {
			return fmt.Errorf("after %d of %d bytes: %w", size-left, size, err)
		}
	}
	rest, err := io.ReadAll(c) // nil, nil after an EOF
	if err != nil {
		return fmt.Errorf("reading to EOF: %w", err)
	}
	if !bytes.Equal(rest, tail) {
		return fmt.Errorf("after the echo got %q, want %q", rest, tail)
	}
	return <-werr
}

func TestEchoIntegrity(t *testing.T) {
	for _, b := range testBackends {
		t.Run(string(b), func(t *testing.T) {
			tests := []struct {
				name         string
				conns, size  int
				wsize        int
				zeroCopyEcho bool
			}{
				{"1B", 20, 1, 1, false},
				{"small-writes", 20, 64 << 10, 100, false},
				{"64KiB", 50, 64 << 10, 64 << 10, true},
				{"1MiB-writes", 8, 4 << 20, 1 << 20, false},
				{"many-1MB", 1000, 1 << 20, 64 << 10, true},
				{"send-zc", 4, 1 << 20, 64 << 10, false},
			}
			for _, tc := range tests {
				t.Run(tc.name, func(t *testing.T) {
					h := &echoHandler{zeroCopy: tc.zeroCopyEcho}
					cfg := testConfig(b)
					var zc zcLog
					if tc.name == "send-zc" {
						cfg.SendZCThreshold, cfg.Logf = 4096, zc.logf
					}
					e, addr := startEngine(t, cfg, h)
					sem := make(chan struct{}, 500) // stay below the listen backlog
					for _, err := range concurrently(tc.conns, func(i int) error {
						sem <- struct{}{}
						defer func() { <-sem }()
						if err := echoOnce(addr, uint64(i), tc.size, tc.wsize, nil); err != nil {
							return fmt.Errorf("conn %d: %w", i, err)
						}
						return nil
					}) {
						t.Error(err)
					}
					waitFor(t, "connections to close", func() bool { return h.closes.Load() == int64(tc.conns) })
					s := e.Stats()
					if want := uint64(tc.conns * tc.size); s.BytesRead != want || s.BytesWritten != want {
						t.Errorf("stats: read %d, wrote %d bytes, want %d", s.BytesRead, s.BytesWritten, want)
					}
					if h.errs.Load() != 0 {
						t.Errorf("%d connections closed with an error", h.errs.Load())
					}
					if cfg.SendZCThreshold > 0 && b.isURing() && s.ZCSends == 0 {
						zc.skipShortOfLockedMemory(t)
						t.Errorf("no SEND_ZC with SendZCThreshold %d", cfg.SendZCThreshold)
					}
				})
			}
		})
	}
}

// concurrently runs f(0) … f(n-1) on n goroutines and returns, once all
// have returned, the errors they returned.
func concurrently(n int, f func(i int) error) []error {
	var wg sync.WaitGroup
	errc := make(chan error, n)
	for i := range n {
		wg.Go(func() {
			if err := f(i); err != nil {
				errc <- err
			}
		})
	}
	wg.Wait()
	close(errc)
	var errs []error
	for err := range errc {
		errs = append(errs, err)
	}
	return errs
}

func waitFor(t testing.TB, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func TestHalfClose(t *testing.T) {
	for _, b := range testBackends {
		t.Run(string(b), func(t *testing.T) {
			// The server keeps writing after the client's FIN.
			h := &echoHandler{eofMsg: []byte("bye")}
			_, addr := startEngine(t, testConfig(b), h)
			if err := echoOnce(addr, 7, 100<<10, 4096, []byte("bye")); err != nil {
				t.Fatal(err)
			}
			// And the server half-closes first: the client can still send.
			h2 := &BaseHandlerFunc{data: func(c *Conn, b Buffer) bool {
				c.Write(b.Bytes())
				return false
			}, open: func(c *Conn) {
				c.Write([]byte("hello"))
				c.CloseWrite()
			}}
			_, addr2 := startEngine(t, testConfig(b), h2)
			c, err := net.Dial("tcp", addr2)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			got, err := io.ReadAll(c) // to the server's FIN
			if err != nil || string(got) != "hello" {
				t.Fatalf("read %q, %v; want hello then EOF", got, err)
			}
			if _, err := c.Write([]byte("x")); err != nil {
				t.Fatal(err)
			}
			c.(*net.TCPConn).CloseWrite()
			waitFor(t, "OnClose", func() bool { return h2.closes.Load() == 1 })
			if h2.reads.Load() != 1 {
				t.Errorf("server got %d reads after its CloseWrite, want 1", h2.reads.Load())
			}
		})
	}
}

// BaseHandlerFunc is a Handler made of functions, for tests.
type BaseHandlerFunc struct {
	BaseHandler
	open   func(c *Conn)
	data   func(c *Conn, b Buffer) bool
	closed func(c *Conn, err error)
	reads  atomic.Int64
	closes atomic.Int64
}

func (h *BaseHandlerFunc) OnOpen(c *Conn) {
	if h.open != nil {
		h.open(c)
	}
}

func (h *BaseHandlerFunc) OnData(c *Conn, b Buffer) bool {
	h.reads.Add(1)
	if h.data != nil {
		return h.data(c, b)
	}
	return false
}

func (h *BaseHandlerFunc) OnClose(c *Conn, err error) {
	h.closes.Add(1)
	if h.closed != nil {
		h.closed(c, err)
	}
}

// resetMidStream sends c's server more than the socket buffers hold
// without reading, so that the server is mid-stream, then resets c.
func resetMidStream(c net.Conn) {
	c.SetWriteDeadline(time.Now().Add(200 * time.Millisecond))
	c.Write(make([]byte, 8<<20))
	c.(*net.TCPConn).SetLinger(0)
	c.Close()
}

func TestPeerReset(t *testing.T) {
	for _, b := range testBackends {
		t.Run(string(b), func(t *testing.T) {
			h := &echoHandler{}
			_, addr := startEngine(t, testConfig(b), h)
			const conns = 20
			for i := 0; i < conns; i++ {
				c, err := net.Dial("tcp", addr)
				if err != nil {
					t.Fatal(err)
				}
				resetMidStream(c)
			}
			waitFor(t, "OnClose for reset connections", func() bool { return h.closes.Load() == conns })
			if h.errs.Load() != conns {
				t.Errorf("%d of %d reset connections closed with an error", h.errs.Load(), conns)
			}
		})
	}
}

func TestIdleConns(t *testing.T) {
	for _, b := range testBackends {
		t.Run(string(b), func(t *testing.T) {
			n := 10000
			if testing.Short() {
				n = 500
			}
			h := &echoHandler{}
			e, addr := startEngine(t, testConfig(b), h)
			runtime.GC()
			rss0, heap0 := rssBytes(), liveHeap()
			// The clients live in a child process: client and server fds
			// together would pass RLIMIT_NOFILE.
			cmd := exec.Command(os.Args[0], "-test.run=^TestHelperDialer$")
			cmd.Env = append(os.Environ(), "SPINDLE_DIAL_ADDR="+addr, "SPINDLE_DIAL_N="+strconv.Itoa(n))
			stdin, _ := cmd.StdinPipe()
			out, _ := cmd.StdoutPipe()
			cmd.Stderr = os.Stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			defer cmd.Wait()
			defer stdin.Close()
			line, err := bufio.NewReader(out).ReadString('\n')
			if err != nil || line != "ready\n" {
				t.Fatalf("dialer: %q %v", line, err)
			}
			waitFor(t, "all accepted", func() bool { return e.Stats().Open == int64(n) })
			runtime.GC()
			// RSS growth undercounts when an earlier subtest's freed heap
			// is reused, so the live Go heap per connection counts too.
			perRSS := (rssBytes() - rss0) / int64(n)
			perHeap := (liveHeap() - heap0) / int64(n)
			per := max(perRSS, perHeap)
			t.Logf("%d idle connections: %d bytes of process RSS, %d of live Go heap each (user space; the kernel's socket memory is not process memory)", n, perRSS, perHeap)
			// The race detector's shadow memory multiplies the heap, so
			// the budget holds for normal builds; -race only reports it.
			if n == 10000 && !raceEnabled && per > idleConnBudget {
				t.Errorf("%d bytes of process memory per idle connection, budget %d", per, idleConnBudget)
			}
			stdin.Close()
			if err := cmd.Wait(); err != nil {
				t.Fatalf("dialer: %v", err)
			}
			// Open drops as each connection closes; its OnClose comes
			// later in the loop's iteration (Loop.runCloses), so the
			// count of OnClose calls is waited for too.
			waitFor(t, "all closed", func() bool { return e.Stats().Open == 0 && h.closes.Load() == int64(n) })
			if h.closes.Load() != int64(n) || h.errs.Load() != 0 {
				t.Errorf("closes %d (errors %d), want %d clean", h.closes.Load(), h.errs.Load(), n)
			}
		})
	}
}

// idleConnBudget is the process memory an idle connection may cost (issue:
// at most 2 KiB, measured at 10,000 connections).
const idleConnBudget = 2 << 10

// liveHeap is the Go heap in use by reachable objects (after a GC).
func liveHeap() int64 {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapAlloc)
}

func rssBytes() int64 {
	b, _ := os.ReadFile("/proc/self/statm")
	var size, res int64
	fmt.Sscan(string(b), &size, &res)
	return res * int64(os.Getpagesize())
}

// TestHelperDialer is the client process of TestIdleConns: it dials
// SPINDLE_DIAL_N connections, checks a few of them echo, says "ready" and
// closes them all when its stdin closes.
func TestHelperDialer(t *testing.T) {
	addr := os.Getenv("SPINDLE_DIAL_ADDR")
	if addr == "" {
		t.Skip("helper process for TestIdleConns")
	}
	n, _ := strconv.Atoi(os.Getenv("SPINDLE_DIAL_N"))
	conns := make([]net.Conn, 0, n)
	for i := 0; i < n; i++ {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			fmt.Fprintf(os.Stderr, "dial %d: %v\n", i, err)
			os.Exit(1)
		}
		conns = append(conns, c)
	}
	for _, i := range []int{0, n / 2, n - 1} {
		conns[i].Write([]byte("ping"))
		buf := make([]byte, 4)
		conns[i].SetReadDeadline(time.Now().Add(10 * time.Second))
		if _, err := io.ReadFull(conns[i], buf); err != nil || string(buf) != "ping" {
			fmt.Fprintf(os.Stderr, "conn %d: %q %v\n", i, buf, err)
			os.Exit(1)
		}
	}
	fmt.Println("ready")
	io.Copy(io.Discard, os.Stdin)
	for _, c := range conns {
		c.Close()
	}
}

func TestSlowReaderMemoryCap(t *testing.T) {
	if testBatchWait > 0 && !uring.HasRecvLimit() {
		// Measured with 100µs: 572 KiB of chunks over a 64 KiB mark.
		t.Skip("Config.BatchWait without the multishot recv byte limit (6.17): a batched wait can receive more than the cap before reading pauses (documented on Config.BatchWait); the cap is checked without it")
	}
	for _, b := range testBackends {
		t.Run(string(b), func(t *testing.T) {
			cfg := testConfig(b)
			cfg.WriteHighWater = 64 << 10
			cfg.ReadBufferSize = 4 << 10
			h := &echoHandler{}
			e, addr := startEngine(t, cfg, h)
			c, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			// Write without reading until the kernel and the engine stop
			// taking more: a write that times out having sent nothing,
			// after some bytes went, once the engine has paused reading.
			// (One 500 ms deadline for it all sent nothing when the test
			// goroutine was not run for that long, under load with
			// -race; stopping at the first write that timed out part way
			// stopped while the client's receive buffer still took the
			// echoes, the server's queue below the mark; stopping at the
			// first that sent nothing, before the pause, stopped when the
			// server's loop had not run for 200 ms, 4 MB sent, in CI
			// beside other work.) 64 MiB or 40 tries end it if reading
			// never pauses, which fails below.
			sent, chunk := 0, make([]byte, 1<<20)
			for tries := 0; sent < 64<<20 && tries < 40; tries++ {
				c.SetWriteDeadline(time.Now().Add(200 * time.Millisecond))
				n, err := c.Write(chunk)
				if sent += n; err != nil && n == 0 && sent > 0 && e.Stats().PausedReads > 0 {
					break
				}
			}
			time.Sleep(50 * time.Millisecond)
			limit := int64(cfg.WriteHighWater + capSlack(b, cfg))
			if p := h.peak.Load(); p > limit {
				t.Errorf("write queue reached %d bytes; cap %d", p, limit)
			}
			if e.Stats().PausedReads == 0 {
				t.Errorf("reading was never paused (sent %d bytes)", sent)
			}
			// The memory behind the queue: chunks in use (measured on the
			// loop), and the slab never grew past its first region, which
			// holds 512 such chunks.
			for _, l := range e.Loops() {
				res := make(chan [2]int)
				l.Post(func() {
					s := &l.chunks
					res <- [2]int{len(s.regions), len(s.regions)*s.perRegion - len(s.free)}
				})
				got := <-res
				if used := got[1] * cfg.ReadBufferSize; used > int(limit) {
					t.Errorf("loop %d: %d bytes of write-queue chunks in use; cap %d (%d receive buffers copied off the ring)", l.ID(), used, limit, e.Stats().RingCopies)
				}
				if got[0] != 1 {
					t.Errorf("loop %d: the slab grew to %d regions of %d bytes", l.ID(), got[0], regionSize)
				}
			}
			// All the connection holds, write queue and data received
			// after its reading paused, wherever the buffers are. Where
			// receives are limited to the room below the mark (uring,
			// 6.17) that is capped too; elsewhere a multishot receive can
			// fill a few dozen buffers more before its cancel (as
			// Config.WriteHighWater says), and this only reports it.
			held, limited := connMemory(e)
			if limited && held > limit {
				t.Errorf("the connection holds %d bytes of buffers; cap %d", held, limit)
			}
			t.Logf("the connection holds %d bytes of buffers (receives limited: %v)", held, limited)
			// Reading everything back drains the queue and resumes reads.
			c.SetDeadline(time.Now().Add(10 * time.Second))
			if _, err := io.ReadFull(c, make([]byte, sent)); err != nil {
				t.Fatalf("reading back %d bytes: %v", sent, err)
			}
		})
	}
}

// connMemory returns the buffer memory the engine's connections hold in
// their write queues and as data received while paused (the largest), and
// whether their loops limit receives to the room below the mark.
func connMemory(e *Engine) (int64, bool) {
	var most int64
	limited := true
	for _, l := range e.Loops() {
		type result struct {
			mem     int64
			limited bool
		}
		res := make(chan result)
		l.Post(func() {
			var r result
			for _, c := range l.conns {
				if c != nil {
					r.mem = max(r.mem, int64(c.qmem+len(c.held)*l.chunks.size))
				}
			}
			ub, ok := l.be.(*uringBackend)
			r.limited = ok && ub.recvLimit
			res <- r
		})
		r := <-res
		most, limited = max(most, r.mem), limited && r.limited
	}
	return most, limited
}

// capSlack is what one receive can add above the high-water mark.
func capSlack(b Backend, cfg *Config) int {
	return cfg.ReadBufferSize
}

func TestSteering(t *testing.T) {
	if runtime.NumCPU() < 2 {
		t.Skip("steering needs 2 CPUs")
	}
	for _, b := range testBackends {
		t.Run(string(b), func(t *testing.T) {
			type seen struct{ loopCPU, incoming int }
			got := make(chan seen, 16)
			h := &BaseHandlerFunc{data: func(c *Conn, buf Buffer) bool {
				in, err := unix.GetsockoptInt(c.Fd(), unix.SOL_SOCKET, unix.SO_INCOMING_CPU)
				if err != nil {
					in = -1
				}
				got <- seen{c.Loop().CPU(), in}
				c.Write(buf.Bytes())
				return false
			}}
			cfg := testConfig(b)
			cfg.CPUs = []int{0, 1}
			_, addr := startEngine(t, cfg, h)
			for _, cpu := range []int{0, 1, 1, 0, 0, 1, 0, 1} {
				if err := dialFromCPU(cpu, addr); err != nil {
					t.Fatal(err)
				}
				s := <-got
				if s.loopCPU != cpu || s.incoming != cpu {
					t.Errorf("client on CPU %d: served by the loop on CPU %d, SO_INCOMING_CPU %d", cpu, s.loopCPU, s.incoming)
				}
			}
		})
	}
}

// roundTrip writes msg on c and reads its echo back into msg.
func roundTrip(c net.Conn, msg []byte) error {
	if _, err := c.Write(msg); err != nil {
		return err
	}
	_, err := io.ReadFull(c, msg)
	return err
}

// TestZeroAllocsPerMessage counts every allocation of the process (server
// loops and the in-process clients, whose net.Conn reads and writes do not
// allocate) while 50 connections echo 64-byte messages concurrently, so the
// loops handle batches of completions, copy and zero-copy echo, and it
// allows none beyond a few from the runtime itself (under one per 100
// messages; an allocation per message or per loop iteration is far more). It runs under -race too
// (CI runs only that): the engine's hot path has nothing the race runtime
// allocates for.
func TestZeroAllocsPerMessage(t *testing.T) {
	for _, b := range testBackends {
		for _, zc := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/zerocopy=%v", b, zc), func(t *testing.T) {
				h := &echoHandler{zeroCopy: zc}
				_, addr := startEngine(t, testConfig(b), h)
				const conns, per = 50, 100
				var wg sync.WaitGroup
				start := make([]chan struct{}, conns)
				errc := make(chan error, conns)
				for i := range start {
					c, err := net.Dial("tcp", addr)
					if err != nil {
						t.Fatal(err)
					}
					defer c.Close()
					start[i] = make(chan struct{})
					go func() {
						msg := make([]byte, 64)
						for range start[i] {
							for j := 0; j < per; j++ {
								if err := roundTrip(c, msg); err != nil {
									errc <- err
									break
								}
							}
							wg.Done()
						}
					}()
				}
				defer func() {
					for _, s := range start {
						close(s)
					}
				}()
				round := func() {
					wg.Add(conns)
					for _, s := range start {
						s <- struct{}{}
					}
					wg.Wait()
				}
				allocs := mallocsOf(round)
				select {
				case err := <-errc:
					t.Fatal(err)
				default:
				}
				t.Logf("%d allocations for %d echoed messages", allocs, conns*per)
				// Measured: 0 in most runs, a few dozen in some (the runtime's
				// sudog caches refilling as the 50 client goroutines block).
				// One allocation per message, per iteration or per wake-up
				// would be hundreds to thousands.
				if allocs*100 > conns*per {
					t.Errorf("%d allocations for %d echoed messages (%.3f each), want 0 (under 0.01 allowed for the runtime)", allocs, conns*per, float64(allocs)/(conns*per))
				}
			})
		}
	}
}

// mallocsOf runs round three times to warm up (slices reach their steady
// size) and returns the allocations of the process during a fourth.
func mallocsOf(round func()) uint64 {
	for range 3 {
		round()
	}
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	round()
	runtime.ReadMemStats(&m1)
	return m1.Mallocs - m0.Mallocs
}

func TestTimersAndPost(t *testing.T) {
	for _, b := range testBackends {
		t.Run(string(b), func(t *testing.T) {
			e, _ := startEngine(t, testConfig(b), &echoHandler{})
			l := e.Loops()[0]
			var order []int
			done := make(chan struct{})
			l.Post(func() {
				l.AfterFunc(30*time.Millisecond, func() { order = append(order, 3); close(done) })
				l.AfterFunc(10*time.Millisecond, func() { order = append(order, 1) })
				t2 := l.AfterFunc(15*time.Millisecond, func() { order = append(order, 99) })
				l.AfterFunc(20*time.Millisecond, func() { order = append(order, 2) })
				if !t2.Stop() {
					t.Error("Stop of a pending timer returned false")
				}
				if t2.Stop() {
					t.Error("second Stop returned true")
				}
			})
			<-done
			if fmt.Sprint(order) != "[1 2 3]" {
				t.Errorf("timers ran in order %v, want [1 2 3]", order)
			}
			// Many goroutines post; every function runs once, on the loop.
			const g, per = 8, 500
			var ran int // touched only on the loop goroutine
			var wg sync.WaitGroup
			for i := 0; i < g; i++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for j := 0; j < per; j++ {
						l.Post(func() { ran++ })
					}
				}()
			}
			wg.Wait()
			res := make(chan int)
			l.Post(func() { res <- ran })
			if n := <-res; n != g*per {
				t.Errorf("%d posted functions ran, want %d", n, g*per)
			}
			if w := l.Stats().Wakeups; w == 0 || w > g*per {
				t.Errorf("%d wake-ups for %d posts", w, g*per)
			}
			tid := make(chan int)
			l.Post(func() { tid <- unix.Gettid() })
			if got := <-tid; got != l.ThreadID() {
				t.Errorf("ThreadID %d, the loop runs on thread %d", l.ThreadID(), got)
			}
			if l.Stats().WaitNanos == 0 {
				t.Error("WaitNanos is 0 after waiting")
			}
		})
	}
}

// goEchoServer runs a Go echo server (goroutine per connection, half-close
// passed on) until the end of the test and returns its address.
func goEchoServer(t *testing.T) string {
	gl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	t.Cleanup(func() {
		gl.Close()
		wg.Wait()
	})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := gl.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer c.Close()
				// Hide ReadFrom: splice would keep pooled pipes open.
				io.Copy(struct{ io.Writer }{c}, struct{ io.Reader }{c})
				c.(*net.TCPConn).CloseWrite()
			}()
		}
	}()
	return gl.Addr().String()
}

// listenAndRun starts an engine listening on loopback whose shutdown the
// test does itself; done yields what Run returned.
func listenAndRun(t *testing.T, cfg *Config, h Handler) (e *Engine, addr string, done <-chan error) {
	t.Helper()
	e = newEngine(t, cfg, h)
	ln, err := e.Listen("tcp", "127.0.0.1:0", nil)
	if err != nil {
		t.Fatal(err)
	}
	d := make(chan error, 1)
	go func() { d <- e.Run(context.Background()) }()
	return e, ln.Addr().String(), d
}

func TestDial(t *testing.T) {
	peer := goEchoServer(t)
	closedAddr := testnet.RefusedAddr(t) // for the refused case
	for _, b := range testBackends {
		t.Run(string(b), func(t *testing.T) {
			type result struct {
				data string
				err  error
			}
			res := make(chan result, 2)
			h := &BaseHandlerFunc{
				open: func(c *Conn) { c.Write([]byte("hello")) },
				data: func(c *Conn, buf Buffer) bool {
					res <- result{data: string(buf.Bytes())}
					c.Close()
					return false
				},
				closed: func(c *Conn, err error) {
					if err != nil {
						res <- result{err: err}
					}
				},
			}
			e, _ := startEngine(t, testConfig(b), h)
			l := e.Loops()[len(e.Loops())-1]
			l.Post(func() {
				if _, err := l.Dial("tcp", peer, time.Second); err != nil {
					res <- result{err: err}
				}
			})
			if r := <-res; r.err != nil || r.data != "hello" {
				t.Fatalf("dial and echo: %+v", r)
			}
			l.Post(func() {
				if _, err := l.Dial("tcp", closedAddr, time.Second); err != nil {
					res <- result{err: err}
				}
			})
			r := <-res
			if !errors.Is(r.err, unix.ECONNREFUSED) {
				t.Fatalf("dial to a closed port: %+v, want ECONNREFUSED", r)
			}
			waitFor(t, "dialed conns to close", func() bool { return e.Stats().Open == 0 })
		})
	}
}

func TestUnixListener(t *testing.T) {
	for _, b := range testBackends {
		t.Run(string(b), func(t *testing.T) {
			e, err := New(testConfig(b), &echoHandler{})
			if err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(t.TempDir(), "s")
			if _, err := e.Listen("unix", path, nil); err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error)
			go func() { done <- e.Run(ctx) }()
			defer func() { cancel(); <-done }()
			for i := 0; i < 20; i++ {
				c, err := net.Dial("unix", path)
				if err != nil {
					t.Fatal(err)
				}
				defer c.Close()
				c.Write([]byte("over unix"))
				buf := make([]byte, 9)
				if _, err := io.ReadFull(c, buf); err != nil || string(buf) != "over unix" {
					t.Fatalf("%q %v", buf, err)
				}
			}
			if n := e.Stats().Accepted; n != 20 {
				t.Errorf("%d accepted, want 20", n)
			}
		})
	}
}

func TestSteeringProgram(t *testing.T) {
	tests := []struct {
		cpus []int
		len  int
	}{
		{[]int{0}, 5},
		{[]int{0, 1}, 7},
		{[]int{2, 5, 7}, 9},
	}
	for _, tc := range tests {
		p, err := steeringProgram(tc.cpus)
		if err != nil {
			t.Fatalf("%v: %v", tc.cpus, err)
		}
		if len(p) != tc.len {
			t.Errorf("%v: %d instructions, want %d", tc.cpus, len(p), tc.len)
		}
		for i, cpu := range tc.cpus {
			if p[1+2*i].K != uint32(cpu) || p[2+2*i].K != uint32(i) {
				t.Errorf("%v: CPU %d does not map to socket %d", tc.cpus, cpu, i)
			}
		}
	}
}

func TestConfigDefaults(t *testing.T) {
	tests := []struct {
		in      *Config
		wantErr bool
		check   func(Config) bool
	}{
		{nil, false, func(c Config) bool { return c.Backend == BackendURing && c.ReadBuffers == defaultReadBuffers }},
		{&Config{ReadBuffers: 100}, false, func(c Config) bool { return c.ReadBuffers == 128 }},
		{&Config{Backend: "kqueue"}, true, nil},
		{&Config{ReadBufferSize: 100}, true, nil},
		{&Config{WriteHighWater: -1}, true, nil},
		// Negative values are refused by New: ReadBuffers -1 was a
		// 1-buffer ring, BusyPoll -1µs no busy polling on uring-napi and
		// a Run failing in epoll-busypoll's ioctl (2^32-1 µs).
		{&Config{ReadBuffers: -1}, true, nil},
		{&Config{BusyPoll: -time.Microsecond}, true, nil},
	}
	for i, tc := range tests {
		c, err := tc.in.withDefaults()
		if (err != nil) != tc.wantErr {
			t.Errorf("%d: err %v, wantErr %v", i, err, tc.wantErr)
			continue
		}
		if tc.check != nil && !tc.check(c) {
			t.Errorf("%d: %+v", i, c)
		}
	}
	if _, err := New(&Config{CPUs: []int{4096}}, &echoHandler{}); err == nil {
		t.Error("New with a CPU outside the affinity mask succeeded")
	}
	_ = os.Getpid
}

func TestPostTo(t *testing.T) {
	if runtime.NumCPU() < 2 {
		t.Skip("needs 2 CPUs for two loops")
	}
	for _, b := range testBackends {
		t.Run(string(b), func(t *testing.T) {
			cfg := testConfig(b)
			cfg.CPUs = []int{0, 1}
			e, _ := startEngine(t, cfg, &echoHandler{})
			src, dst := e.Loops()[0], e.Loops()[1]
			// Both loops running, nothing pending on dst.
			sync := make(chan struct{})
			dst.Post(func() { sync <- struct{}{} })
			<-sync
			const n = 1000
			var ran, wrongCPU int // touched on dst's goroutine only
			done := make(chan struct{})
			src.Post(func() {
				for i := 0; i < n; i++ {
					src.PostTo(dst, func() {
						ran++
						var set unix.CPUSet
						unix.SchedGetaffinity(0, &set)
						if set.Count() != 1 || !set.IsSet(dst.CPU()) {
							wrongCPU++
						}
						if ran == n {
							close(done)
						}
					})
				}
			})
			select {
			case <-done:
			case <-time.After(10 * time.Second):
				t.Fatal("posted functions did not all run")
			}
			res := make(chan int)
			dst.Post(func() { res <- wrongCPU })
			if w := <-res; w != 0 {
				t.Errorf("%d functions ran off the destination loop's CPU", w)
			}
			got := src.Stats().MsgRings
			if b.isURing() && got == 0 {
				t.Errorf("no MSG_RING wake-ups between uring loops")
			}
			if !b.isURing() && got != 0 {
				t.Errorf("%d MSG_RING wake-ups on %s", got, b)
			}
		})
	}
}

func TestShutdown(t *testing.T) {
	for _, b := range testBackends {
		t.Run(string(b), func(t *testing.T) {
			for _, tc := range []struct {
				name     string
				graceful bool // the client closes before Shutdown's ctx is done
			}{{"drain", true}, {"ctx-done", false}} {
				t.Run(tc.name, func(t *testing.T) {
					var closeErr atomic.Value
					h := &BaseHandlerFunc{
						data: func(c *Conn, buf Buffer) bool { c.Write(buf.Bytes()); return false },
						closed: func(c *Conn, err error) {
							if err == nil {
								err = errors.New("nil")
							}
							closeErr.Store(struct{ error }{err})
						},
					}
					e, addr, done := listenAndRun(t, testConfig(b), h)
					c, err := net.Dial("tcp", addr)
					if err != nil {
						t.Fatal(err)
					}
					defer c.Close()
					c.Write([]byte("x"))
					io.ReadFull(c, make([]byte, 1))
					// Done when the test says so (ctx-done) or never: a timer
					// could end the drain while the checks below still run.
					ctx, cancel := context.WithCancel(context.Background())
					defer cancel()
					sdone := make(chan error, 1)
					go func() { sdone <- e.Shutdown(ctx) }()
					// The listener closes at once; the open connection still works.
					waitFor(t, "the listener to close", func() bool {
						c2, err := net.DialTimeout("tcp", addr, time.Second)
						if err == nil {
							c2.Close()
						}
						return err != nil
					})
					c.Write([]byte("y"))
					if _, err := io.ReadFull(c, make([]byte, 1)); err != nil {
						t.Fatalf("open connection during the drain: %v", err)
					}
					if tc.graceful {
						c.Close()
					} else {
						cancel()
					}
					err = <-sdone
					if tc.graceful && err != nil || !tc.graceful && !errors.Is(err, context.Canceled) {
						t.Fatalf("Shutdown: %v", err)
					}
					if err := <-done; err != nil {
						t.Fatalf("Run: %v", err)
					}
					v, _ := closeErr.Load().(struct{ error })
					got := v.error
					if tc.graceful && (got == nil || got.Error() != "nil") {
						t.Errorf("drained connection closed with %v, want nil", got)
					}
					if !tc.graceful && !errors.Is(got, ErrClosed) {
						t.Errorf("connection open when Shutdown's ctx was done closed with %v, want ErrClosed", got)
					}
				})
			}
		})
	}
}

// TestShutdownWithoutRun releases what New and Listen made (TestMain checks
// the fds) and makes Run fail.
func TestShutdownWithoutRun(t *testing.T) {
	e, err := New(testConfig(BackendEpoll), &echoHandler{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.Listen("tcp", "127.0.0.1:0", nil); err != nil {
		t.Fatal(err)
	}
	if err := e.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := e.Run(context.Background()); err == nil {
		t.Fatal("Run after Shutdown succeeded")
	}
}

func TestListenNetworks(t *testing.T) {
	tests := []struct{ network, addr, dial string }{
		{"tcp4", "127.0.0.1:0", "tcp4"},
		{"tcp6", "[::1]:0", "tcp6"},
		{"tcp", ":0", "tcp"}, // dual-stack wildcard
	}
	for _, b := range testBackends {
		for _, tc := range tests {
			t.Run(string(b)+"/"+tc.network, func(t *testing.T) {
				e := newEngine(t, testConfig(b), &echoHandler{})
				ln, err := e.Listen(tc.network, tc.addr, nil)
				if err != nil {
					if tc.network == "tcp6" && strings.Contains(err.Error(), "address not available") {
						t.Skip("no IPv6 loopback here")
					}
					t.Fatal(err)
				}
				runEngine(t, e)
				port := ln.Addr().(*net.TCPAddr).Port
				target := net.JoinHostPort("localhost", strconv.Itoa(port))
				if tc.network == "tcp6" {
					target = net.JoinHostPort("::1", strconv.Itoa(port))
				} else if tc.network == "tcp4" {
					target = net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
				}
				targets := []string{target}
				if tc.addr == ":0" {
					// The wildcard serves both families.
					targets = []string{net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), net.JoinHostPort("::1", strconv.Itoa(port))}
				}
				for _, target := range targets {
					c, err := net.Dial(tc.dial, target)
					if err != nil {
						t.Fatal(err)
					}
					defer c.Close()
					c.Write([]byte("hi"))
					buf := make([]byte, 2)
					if _, err := io.ReadFull(c, buf); err != nil || string(buf) != "hi" {
						t.Fatalf("%s: %q %v", target, buf, err)
					}
				}
			})
		}
	}
}

// TestDialTimeout dials a listener whose accept queue is full, so the SYN
// is dropped and only the timeout ends the dial.
func TestDialTimeout(t *testing.T) {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	if err := unix.Bind(fd, &unix.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatal(err)
	}
	if err := unix.Listen(fd, 0); err != nil {
		t.Fatal(err)
	}
	sa, _ := unix.Getsockname(fd)
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(sa.(*unix.SockaddrInet4).Port))
	// Fill the accept queue (backlog 0 holds one connection).
	for i := 0; i < 3; i++ {
		if c, err := net.DialTimeout("tcp", addr, 300*time.Millisecond); err == nil {
			defer c.Close()
		}
	}
	for _, b := range testBackends {
		t.Run(string(b), func(t *testing.T) {
			res := make(chan error, 1)
			opened := make(chan struct{}, 1)
			h := &BaseHandlerFunc{
				open:   func(c *Conn) { opened <- struct{}{} },
				closed: func(c *Conn, err error) { res <- err },
			}
			e, _ := startEngine(t, testConfig(b), h)
			l := e.Loops()[0]
			start := time.Now()
			l.Post(func() {
				if _, err := l.Dial("tcp", addr, 200*time.Millisecond); err != nil {
					res <- err
				}
			})
			err := <-res
			if !errors.Is(err, os.ErrDeadlineExceeded) {
				t.Fatalf("dial to a full accept queue ended with %v, want a timeout", err)
			}
			if d := time.Since(start); d < 200*time.Millisecond {
				t.Errorf("timed out after %v, before the 200ms timeout", d)
			}
			select {
			case <-opened:
				t.Error("OnOpen called for a dial that timed out")
			default:
			}
		})
	}
}

// TestAbortWithSendsInFlight ends connections while the server has sends in
// the kernel (a big reply the client has only partly read) and reading
// armed (high high-water mark): by the peer's reset, which a receive or a
// send may report first, and by a Shutdown past its deadline, which cancels
// the sends. A SEND that has made progress then completes with its partial
// count, not an error, and the write queue must still be there when that
// count arrives (a bug once, seen under uring-sqpoll: the abort dropped the
// queue and Conn.sent indexed an empty one). Afterwards every slab chunk
// must be back on the free list.
func TestAbortWithSendsInFlight(t *testing.T) {
	const reply = 8 << 20
	config := func(b Backend) *Config {
		cfg := testConfig(b)
		cfg.WriteHighWater = 4 * reply // reading stays armed
		// 1 MiB chunks: a SEND in flight has usually sent part of its
		// chunk when the connection ends.
		cfg.ReadBufferSize = 1 << 20
		cfg.ReadBuffers = 16
		return cfg
	}
	bigReply := func(c *Conn) {
		buf := make([]byte, 64<<10)
		for i := 0; i < reply/len(buf); i++ {
			c.Write(buf)
		}
	}
	// dial opens n connections and reads the start of each reply, so
	// sends are under way and blocked on the full socket buffers.
	dial := func(t *testing.T, addr string, n int) []net.Conn {
		var cs []net.Conn
		for i := 0; i < n; i++ {
			c, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { c.Close() })
			c.SetReadDeadline(time.Now().Add(10 * time.Second))
			if _, err := io.ReadFull(c, make([]byte, 256<<10)); err != nil {
				t.Fatal(err)
			}
			cs = append(cs, c)
		}
		return cs
	}
	for _, b := range testBackends {
		t.Run(string(b)+"/reset", func(t *testing.T) {
			h := &BaseHandlerFunc{open: bigReply}
			e, addr := startEngine(t, config(b), h)
			const conns = 30
			for _, c := range dial(t, addr, conns) {
				c.(*net.TCPConn).SetLinger(0)
				c.Close()
			}
			waitFor(t, "OnClose for reset connections", func() bool { return h.closes.Load() == conns })
			if s := e.Stats(); s.BytesWritten > conns*reply {
				t.Errorf("%d bytes counted as sent, more than the %d queued", s.BytesWritten, conns*reply)
			}
			checkChunksFree(t, e)
		})
		// Repeated: the cancel that ends a connection's sends may run as
		// one of a chain of linked SENDs completes and before the kernel
		// issues the next, which it then does not find (a loop that never
		// stopped in CI, once in a few hundred shutdowns).
		t.Run(string(b)+"/shutdown", func(t *testing.T) {
			for range 20 {
				h := &BaseHandlerFunc{open: bigReply}
				e, addr, done := listenAndRun(t, config(b), h)
				const conns = 5
				dial(t, addr, conns)
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
				shut := make(chan error, 1)
				go func() { shut <- e.Shutdown(ctx) }()
				select {
				case err := <-shut:
					if !errors.Is(err, context.DeadlineExceeded) {
						t.Errorf("Shutdown with unread replies: %v, want the deadline", err)
					}
				case <-time.After(20 * time.Second):
					t.Fatal("Shutdown did not return 20s after its deadline: a send left in flight, the loop not stopping")
				}
				cancel()
				if err := <-done; err != nil {
					t.Fatal(err)
				}
				if n := h.closes.Load(); n != conns {
					t.Errorf("%d OnClose calls, want %d", n, conns)
				}
			}
		})
	}
}

// checkChunksFree checks, on each loop, that every write-queue chunk is back
// on the slab's free list (none leaked, none freed twice).
func checkChunksFree(t *testing.T, e *Engine) {
	t.Helper()
	for _, l := range e.Loops() {
		res := make(chan string)
		l.Post(func() {
			s := &l.chunks
			total := len(s.regions) * s.perRegion
			seen := make(map[int32]bool, len(s.free))
			for _, id := range s.free {
				if seen[id] {
					res <- fmt.Sprintf("chunk %d is on the free list twice", id)
					return
				}
				seen[id] = true
			}
			if len(s.free) != total {
				res <- fmt.Sprintf("%d of %d chunks free with no connection open", len(s.free), total)
				return
			}
			res <- ""
		})
		if msg := <-res; msg != "" {
			t.Errorf("loop %d: %s", l.ID(), msg)
		}
	}
}

// TestSlowReadersDoNotStarveOthers pauses 16 connections whose peers send
// without reading (write queues above the high-water mark) on one loop with
// a 64-buffer receive ring, then checks that a new connection on that loop
// still echoes 64 KiB. Under io_uring a paused connection's multishot
// receive fills ring buffers until its cancel lands, and those stay held
// until the connection resumes: here they hold most of the ring (51-63 of
// 64 measured, logged), and the other connections live on what is left
// (their receives end with ENOBUFS and are re-armed when a buffer comes
// back). The test fails if they stall.
func TestSlowReadersDoNotStarveOthers(t *testing.T) {
	for _, b := range testBackends {
		for _, zc := range []bool{false, true} {
			name := string(b)
			if zc {
				name += "/zero-copy"
			}
			t.Run(name, func(t *testing.T) { testSlowReaders(t, b, zc) })
		}
	}
}

// testSlowReaders puts 16 connections whose peers never read beside a
// normal one, echoing by copy (Write) or by forwarding the received buffer
// (WriteBuffer, as a proxy does), and checks that the slow ones hold at
// most half of the loop's receive ring and that the normal one is served. Before MaxQueuedReadBuffers, the forwarding case held all 64
// buffers and the normal connection never received.
func testSlowReaders(t *testing.T, b Backend, zeroCopy bool) {
	cfg := testConfig(b)
	cfg.CPUs = []int{0}
	cfg.ReadBuffers = 64
	cfg.ReadBufferSize = 4 << 10
	cfg.WriteHighWater = 16 << 10
	cfg.MaxQueuedReadBuffers = 2
	e, addr := startEngine(t, cfg, &echoHandler{zeroCopy: zeroCopy})
	const slow = 16
	var wg sync.WaitGroup
	for i := 0; i < slow; i++ {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.SetWriteDeadline(time.Now().Add(300 * time.Millisecond))
			c.Write(make([]byte, 16<<20)) // until the kernel stops taking more
		}()
	}
	wg.Wait()
	type holding struct{ ring, held, queued int }
	got := make(chan holding)
	l := e.Loops()[0]
	l.Post(func() {
		var h holding
		for _, c := range l.conns {
			if c == nil {
				continue
			}
			h.queued += int(c.ringSegs)
			for _, x := range c.held {
				h.held++
				if x.id >= 0 {
					h.ring++
				}
			}
		}
		h.ring += h.queued
		got <- h
	})
	h := <-got
	st := l.Stats()
	t.Logf("slow connections hold %d receive buffers of %d (%d in write queues); %d held buffers in all; ENOBUFS %d, copied off the ring %d",
		h.ring, cfg.ReadBuffers, h.queued, h.held, st.NoBufs, st.RingCopies)
	if l.ringLimit > 0 && h.ring > cfg.ReadBuffers/2 {
		t.Errorf("%d slow connections hold %d of the %d receive-ring buffers, above half", slow, h.ring, cfg.ReadBuffers)
	}
	done := make(chan error, 1)
	go func() { done <- echoOnce(addr, 1, 64<<10, 4096, nil) }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("a connection beside %d slow readers: %v", slow, err)
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("a connection beside %d slow readers got no echo in 30 s", slow)
	}
}

// TestConnListener: an accepted connection names the listener that took it,
// among several on every loop, and a dialed one names none.
func TestConnListener(t *testing.T) {
	for _, b := range testBackends {
		t.Run(string(b), func(t *testing.T) {
			got := make(chan *Listener, 8)
			var dialed atomic.Bool
			h := &BaseHandlerFunc{open: func(c *Conn) {
				if c.Listener() == nil {
					dialed.Store(true)
					c.Close()
					return
				}
				got <- c.Listener()
				c.Close()
			}}
			e := newEngine(t, testConfig(b), h)
			var lns []*Listener
			for range 3 {
				ln, err := e.Listen("tcp", "127.0.0.1:0", nil)
				if err != nil {
					t.Fatal(err)
				}
				lns = append(lns, ln)
			}
			runEngine(t, e)
			for _, ln := range []*Listener{lns[2], lns[0], lns[1], lns[2]} {
				c := mustDial(t, "tcp", ln.Addr().String())
				if l := <-got; l != ln {
					t.Errorf("a connection to %v says listener %v accepted it", ln.Addr(), l.Addr())
				}
				c.Close()
			}
			l := e.Loops()[0]
			l.Post(func() {
				if _, err := l.Dial("tcp", lns[0].Addr().String(), time.Second); err != nil {
					t.Error(err)
				}
			})
			<-got // the dial's peer, accepted by lns[0]
			waitFor(t, "the dialed connection's OnOpen", dialed.Load)
		})
	}
}
