package hello

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/spindlenet/spindle/engine"
	"github.com/spindlenet/spindle/internal/h2"
	"github.com/spindlenet/spindle/internal/hpack"
)

// h2cClient is Go's HTTP client speaking HTTP/2 without TLS, with prior
// knowledge, on one connection (Transport.NewClientConn): RoundTrip waits
// at the server's MAX_CONCURRENT_STREAMS (StrictMaxConcurrentRequests)
// rather than failing. Through a Transport's pool a second request could
// dial again with the first connection healthy: the pool gets a new HTTP/2
// connection only after the request that dialed it has it, on the dialing
// goroutine (net/http's dialConnFor: tryDeliver, then putOrCloseIdleConn),
// so a request made while that goroutine waits for a CPU dials its own
// (seen twice in TestH2 under load, the second time with the frame log: the
// first connection had carried one GET, the server's frames complete). The
// returned frameLog has what the server sent on it, for failures.
func h2cClient(t *testing.T, addr string) (*http.Client, *http.ClientConn, *frameLog) {
	var p http.Protocols
	p.SetUnencryptedHTTP2(true)
	var fl *frameLog
	d := &net.Dialer{}
	tr := &http.Transport{
		Protocols: &p,
		HTTP2:     &http.HTTP2Config{StrictMaxConcurrentRequests: true},
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			c, err := d.DialContext(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			fl = &frameLog{Conn: c}
			return fl, nil
		},
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cc, err := tr.NewClientConn(ctx, "http", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	return &http.Client{Transport: cc, Timeout: 20 * time.Second}, cc, fl
}

// frameLog keeps the first MiB a connection reads, and how its reads
// ended, to list the HTTP/2 frames a server sent.
type frameLog struct {
	net.Conn
	mu      sync.Mutex
	in      []byte
	readErr error
}

func (c *frameLog) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.mu.Lock()
	if len(c.in) < 1<<20 {
		c.in = append(c.in, p[:n]...)
	}
	if err != nil && c.readErr == nil {
		c.readErr = err
	}
	c.mu.Unlock()
	return n, err
}

// summary lists the last 40 frames read (h2.ParseFrame: type, flags,
// stream, length, and a GOAWAY's or RST_STREAM's code) and the reads'
// error.
func (c *frameLog) summary() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var fs []string
	for b := c.in; len(b) > 0; {
		f, n, err := h2.ParseFrame(b, h2.MaxMaxFrameSize)
		if n == 0 {
			fs = append(fs, fmt.Sprintf("(%d bytes left: %v)", len(b), err))
			break
		}
		line := fmt.Sprintf("%v flags %#x stream %d length %d", f.Type, f.Flags, f.StreamID, f.Length)
		switch {
		case err != nil:
			line += fmt.Sprintf(" (%v)", err)
		case f.Type == h2.FrameGoAway:
			line += fmt.Sprintf(" (last stream %d, %v, debug %q)", f.LastStream, f.Code, f.Data)
		case f.Type == h2.FrameRSTStream:
			line += fmt.Sprintf(" (%v)", f.Code)
		}
		fs = append(fs, line)
		b = b[n:]
	}
	if len(fs) > 40 {
		fs = fs[len(fs)-40:]
	}
	return fmt.Sprintf("reads ended with %v; last frames from the server:\n%s", c.readErr, strings.Join(fs, "\n"))
}

// do sends a request and checks the answer: status, body, protocol.
func do(t *testing.T, cl *http.Client, method, url string, body io.Reader, proto string, status int, want string) {
	t.Helper()
	req, err := http.NewRequest(method, url, body)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := cl.Do(req)
	if err != nil {
		t.Fatalf("%s: %v", method, err)
	}
	got, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != status || string(got) != want || resp.Proto != proto {
		t.Fatalf("%s: %s %d %q %v; want %s %d %q", method, resp.Proto, resp.StatusCode, got, err, proto, status, want)
	}
}

// TestH2 drives the handler with Go's client over h2c, and with its
// HTTP/1.1 client on the same listener: GET, HEAD (a content-length of 12
// and no body, as HTTP/1.1's), a POST of MaxBody, 100 requests at once on
// the one connection, and CONNECT refused as on HTTP/1.1 (501).
func TestH2(t *testing.T) {
	for _, backend := range engine.Backends {
		t.Run(string(backend), func(t *testing.T) {
			addr, _ := startServer(t, backend)
			url := "http://" + addr + "/"
			cl, cc, fl := h2cClient(t, addr)
			do(t, cl, "GET", url, nil, "HTTP/2.0", 200, "hello, world")
			req, _ := http.NewRequest("HEAD", url, nil)
			resp, err := cl.Do(req)
			if err != nil || resp.StatusCode != 200 || resp.ContentLength != 12 || resp.Proto != "HTTP/2.0" {
				t.Fatalf("HEAD: %v %v", resp, err)
			}
			resp.Body.Close()
			do(t, cl, "POST", url, strings.NewReader(strings.Repeat("a", MaxBody)), "HTTP/2.0", 200, "hello, world")
			// Over MaxBody, with and without a content-length: 413.
			do(t, cl, "POST", url, strings.NewReader(strings.Repeat("a", MaxBody+1)), "HTTP/2.0", 413, "")
			do(t, cl, "POST", url, io.MultiReader(strings.NewReader(strings.Repeat("a", MaxBody)), strings.NewReader("a")), "HTTP/2.0", 413, "")

			var wg sync.WaitGroup
			errc := make(chan error, 100)
			for i := 0; i < 100; i++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					resp, err := cl.Get(fmt.Sprintf("%s%d", url, i))
					if err != nil {
						errc <- err
						return
					}
					b, err := io.ReadAll(resp.Body)
					resp.Body.Close()
					if err != nil || resp.StatusCode != 200 || string(b) != "hello, world" {
						errc <- fmt.Errorf("%d %q %v", resp.StatusCode, b, err)
					}
				}()
			}
			wg.Wait()
			close(errc)
			for err := range errc {
				t.Fatalf("concurrent requests: %v; the connection's %s", err, fl.summary())
			}
			// The server kept to its limit on the one connection: no
			// GOAWAY, no close, no stream error that spoils it.
			if err := cc.Err(); err != nil || cc.Available() == 0 {
				t.Errorf("the connection is not usable after the concurrent requests (%v, %d streams available); its %s", err, cc.Available(), fl.summary())
			}

			// HTTP/1.1 on the same listener, meanwhile.
			tr1 := &http.Transport{}
			defer tr1.CloseIdleConnections()
			cl1 := &http.Client{Transport: tr1, Timeout: 5 * time.Second}
			do(t, cl1, "GET", url, nil, "HTTP/1.1", 200, "hello, world")
			do(t, cl, "GET", url, nil, "HTTP/2.0", 200, "hello, world")

			// CONNECT: 501 as on HTTP/1.1, the stream reset.
			k := dialH2(t, addr, nil)
			k.send(h2.AppendHeaders(nil, 1, []byte{0x02, 0x07, 'C', 'O', 'N', 'N', 'E', 'C', 'T', 0x01, 0x03, 'a', ':', '1'}, false, h2.MinMaxFrameSize))
			if status, _ := k.response(1); status != 501 {
				t.Fatalf("CONNECT: %d, want 501", status)
			}
		})
	}
}

// TestH2Preface: the preface a byte per read, and the request after it,
// is HTTP/2 (each frame's tail is kept until it is complete); first bytes
// that are not the preface are HTTP/1.1, answered as h1 answers them.
func TestH2Preface(t *testing.T) {
	for _, backend := range engine.Backends {
		t.Run(string(backend), func(t *testing.T) {
			addr, _ := startServer(t, backend)
			c := dialServer(t, addr, 10*time.Second)
			in := append([]byte(h2.ClientPreface), h2.AppendSettings(nil, nil)...)
			in = h2.AppendHeaders(in, 1, getBlock, true, h2.MinMaxFrameSize)
			for i := range in {
				if _, err := c.Write(in[i : i+1]); err != nil {
					t.Fatal(err)
				}
				time.Sleep(time.Millisecond) // a read each, mostly
			}
			k := &h2client{t: t, c: c, r: bufio.NewReader(c)}
			if status, body := k.response(1); status != 200 || body != "hello, world" {
				t.Fatalf("split preface: %d %q", status, body)
			}

			for _, tc := range []struct {
				in     string
				status int
			}{
				{"PRI * HTTP/2.0\r\n\r\nXM\r\n\r\n", 505}, // h1: another major version
				{"PRX * HTTP/2.0\r\n\r\nSM\r\n\r\n", 505},
				{"PRI\r\n\r\n", 400},
				{"\x00\x00\x12\x04\x00\x00\x00\x00\x00\r\n\r\n", 400}, // a SETTINGS frame without the preface
			} {
				c := dialServer(t, addr, 5*time.Second)
				for i := range len(tc.in) {
					io.WriteString(c, tc.in[i:i+1])
				}
				resp, err := http.ReadResponse(bufio.NewReader(c), nil)
				if err != nil || resp.StatusCode != tc.status || !resp.Close {
					t.Fatalf("%q: %v %v; want %d and close", tc.in, resp, err, tc.status)
				}
			}
		})
	}
}

// TestH2Shutdown: the engine's Shutdown has the Handler (an
// engine.Drainer) send GOAWAY naming the open stream, which is answered;
// then the connection is closed and the drain is complete.
func TestH2Shutdown(t *testing.T) {
	for _, backend := range engine.Backends {
		t.Run(string(backend), func(t *testing.T) {
			h := &Handler{}
			addr, e := startHandler(t, backend, h)
			k := dialH2(t, addr, nil)
			k.send(h2.AppendHeaders(nil, 1, postBlock, false, h2.MinMaxFrameSize))
			k.send(h2.AppendData(nil, 1, []byte("abc"), false))
			// The stream is open on the server once a PING is answered.
			k.send(h2.AppendPing(nil, [8]byte{}, false))
			k.until(h2.FramePing)
			done := make(chan error, 1)
			go func() {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				done <- e.Shutdown(ctx)
			}()
			f := k.until(h2.FrameGoAway)
			if f.LastStream != 1 || f.Code != h2.NoError {
				t.Fatalf("GOAWAY last %d code %v, want 1 NO_ERROR", f.LastStream, f.Code)
			}
			k.send(h2.AppendData(nil, 1, nil, true))
			if status, body := k.response(1); status != 200 || body != "hello, world" {
				t.Fatalf("after GOAWAY: %d %q", status, body)
			}
			k.eof()
			if err := shutdownResult(t, done, 10*time.Second); err != nil {
				t.Fatalf("Shutdown: %v, want a complete drain", err)
			}
		})
	}
}

// TestH2ConnError: a connection error (a HEADERS on an even stream id)
// gets the Server's GOAWAY, then the end of the connection.
func TestH2ConnError(t *testing.T) {
	addr, _ := startServer(t, engine.Backends[0])
	k := dialH2(t, addr, nil)
	k.send(h2.AppendHeaders(nil, 2, getBlock, true, h2.MinMaxFrameSize))
	if f := k.until(h2.FrameGoAway); f.Code != h2.ProtocolError {
		t.Fatalf("GOAWAY code %v, want PROTOCOL_ERROR", f.Code)
	}
	k.eof()
}

// TestH2StreamWindow: a stream window of 5 bytes holds the body back
// after "hello"; the rest goes when the client opens the window (the h2
// Handler's OnWritable).
func TestH2StreamWindow(t *testing.T) {
	addr, _ := startServer(t, engine.Backends[0])
	k := dialH2(t, addr, []h2.Setting{{ID: h2.SettingInitialWindowSize, Val: 5}})
	k.send(h2.AppendHeaders(nil, 1, getBlock, true, h2.MinMaxFrameSize))
	k.until(h2.FrameHeaders)
	if f := k.until(h2.FrameData); string(f.Data) != "hello" || f.Flags.Has(h2.FlagEndStream) {
		t.Fatalf("first DATA %q %v, want \"hello\" and more", f.Data, f.Flags)
	}
	k.send(h2.AppendWindowUpdate(nil, 1, 100))
	if f := k.until(h2.FrameData); string(f.Data) != ", world" || !f.Flags.Has(h2.FlagEndStream) {
		t.Fatalf("second DATA %q %v, want \", world\" and the end", f.Data, f.Flags)
	}
}

// TestH2HighWater: a client that sends requests and reads nothing for a
// while fills the connection's queue to the engine's high-water mark,
// which pauses reading; once it reads, reading goes on and every request
// is answered.
//
// The queue holds what the kernel does not take, so both ends' socket
// buffers are small: the client's receive buffer, and the server's send
// buffer (smallSendBuffer), which Linux otherwise sizes at the
// connection's start from the MSS the client announced (65,483 bytes on
// loopback), to 3,939,840 bytes here (tcp_wmem's maximum is 4 MiB): it
// took all 740 KB of the 20,000 answers, and reading paused only when the
// queue took a second 16 KiB buffer before the kernel had the first: the
// answers to one read of some 450 requests, or those queued while a send
// was in flight (found in CI, on 2 loaded CPUs: "reading never paused").
// The requests go a hundred at a time, each write once the server has
// read the one before (writeInStep), so that the mark is reached because
// the kernel's buffers are full, whatever the client's and the loop's
// speeds.
func TestH2HighWater(t *testing.T) {
	for _, backend := range engine.Backends {
		t.Run(string(backend), func(t *testing.T) {
			addr, e := startConfig(t, &engine.Config{Backend: backend, WriteHighWater: 32 << 10}, &smallSendBuffer{t: t})
			d := net.Dialer{Control: func(_, _ string, rc syscall.RawConn) error {
				var err error
				if cerr := rc.Control(func(fd uintptr) {
					err = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096)
				}); cerr != nil {
					return cerr
				}
				return err
			}}
			c, err := d.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			c.SetDeadline(time.Now().Add(30 * time.Second))
			k := &h2client{t: t, c: c, r: bufio.NewReader(c)}
			start := append(append([]byte(h2.ClientPreface), h2.AppendSettings(nil, nil)...), h2.AppendWindowUpdate(nil, 0, 1<<30)...)
			k.send(start)
			const n = 20000
			stop, werr := make(chan struct{}), make(chan error, 1)
			defer func() {
				close(stop)
				c.Close()
				if err := <-werr; err != nil && !errors.Is(err, net.ErrClosed) {
					t.Error("writing the requests:", err)
				}
			}()
			go func() { werr <- writeInStep(c, e, stop, uint64(len(start)), n) }()
			for deadline := time.Now().Add(10 * time.Second); e.Stats().PausedReads == 0; time.Sleep(5 * time.Millisecond) {
				if time.Now().After(deadline) {
					s := e.Stats()
					t.Fatalf("reading never paused at the high-water mark: %d bytes of requests read, %d of answers taken by the kernel", s.BytesRead, s.BytesWritten)
				}
			}
			for got := 0; got < n; {
				if f := k.frame(); f.Type == h2.FrameData && f.Flags.Has(h2.FlagEndStream) {
					got++
				} else if f.Type == h2.FrameGoAway || f.Type == h2.FrameRSTStream {
					t.Fatalf("after %d responses: %v %v", got, f.Type, f.Code)
				}
			}
		})
	}
}

// smallSendBuffer is the Handler with each connection's SO_SNDBUF set to
// 4096: 8 KiB of memory, and no autotuning.
type smallSendBuffer struct {
	Handler
	t *testing.T
}

// OnOpen sets c's SO_SNDBUF, and opens c as Handler does. Loop goroutine.
func (h *smallSendBuffer) OnOpen(c *engine.Conn) {
	if err := syscall.SetsockoptInt(c.Fd(), syscall.SOL_SOCKET, syscall.SO_SNDBUF, 4096); err != nil {
		h.t.Error("SO_SNDBUF:", err)
	}
	h.Handler.OnOpen(c)
}

// writeInStep sends n GET requests on streams 1, 3, 5..., a hundred a
// write (their answers, 37 bytes each, fill less than one 16 KiB buffer
// of the queue), each write once e has read the one before (e's BytesRead
// reaches read plus the requests sent), until reading pauses; then the
// rest as fast as c takes them. It returns the first write error, or nil
// when it is done or stopped. e serves c alone.
func writeInStep(c net.Conn, e *engine.Engine, stop <-chan struct{}, read uint64, n int) error {
	var b []byte
	for i := 0; i < n; {
		b = b[:0]
		first := i
		for end := min(i+100, n); i < end; i++ {
			b = h2.AppendHeaders(b, uint32(2*i+1), getBlock, true, h2.MinMaxFrameSize)
		}
		if _, err := c.Write(b); err != nil {
			return fmt.Errorf("requests %d to %d: %w", first, i-1, err)
		}
		read += uint64(len(b))
		for s := e.Stats(); s.PausedReads == 0 && s.BytesRead < read; s = e.Stats() {
			select {
			case <-stop:
				return nil
			default:
				time.Sleep(100 * time.Microsecond)
			}
		}
	}
	return nil
}

// TestH2Allocs: a request on an open HTTP/2 connection allocates nothing
// (client and engine included: the client's reads and writes are
// allocation-free).
func TestH2Allocs(t *testing.T) {
	addr, _ := startServer(t, engine.Backends[0])
	k := dialH2(t, addr, nil)
	k.send(h2.AppendWindowUpdate(nil, 0, 1<<30))
	req := h2.AppendHeaders(nil, 1, getBlock, true, h2.MinMaxFrameSize)
	id := uint32(1)
	one := func() {
		req[5], req[6], req[7], req[8] = byte(id>>24), byte(id>>16), byte(id>>8), byte(id)
		k.send(req)
		for {
			f := k.frame()
			if f.Type == h2.FrameData && f.StreamID == id && f.Flags.Has(h2.FlagEndStream) {
				break
			}
		}
		id += 2
	}
	for range 200 { // warm up: buffers reach their size
		one()
	}
	if a := testing.AllocsPerRun(1000, one); a != 0 {
		t.Errorf("%v allocations per request, want 0", a)
	}
}

// TestH2Load runs h2load: 2000 requests over 4 connections, 10 streams
// at once on each, every one answered 2xx.
func TestH2Load(t *testing.T) {
	bin, err := exec.LookPath("h2load")
	if err != nil {
		t.Skip("h2load is not on PATH (.ci/run installs nghttp2-client)")
	}
	for _, backend := range engine.Backends {
		t.Run(string(backend), func(t *testing.T) {
			addr, _ := startServer(t, backend)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			out, err := exec.CommandContext(ctx, bin, "-n", "2000", "-c", "4", "-m", "10", "http://"+addr+"/").CombinedOutput()
			if err != nil {
				t.Fatalf("h2load: %v\n%s", err, out)
			}
			if !regexp.MustCompile(`(?m)^requests: 2000 total, 2000 started, 2000 done, 2000 succeeded, 0 failed`).Match(out) ||
				!regexp.MustCompile(`(?m)^status codes: 2000 2xx, 0 3xx, 0 4xx, 0 5xx`).Match(out) {
				t.Fatalf("h2load: not 2000 2xx:\n%s", out)
			}
		})
	}
}

// Request header blocks from HPACK's static table (RFC 7541 Appendix A),
// the same for every stream: :method GET or POST, :scheme http, :path /,
// :authority "a" (a literal without indexing).
var (
	getBlock  = []byte{0x82, 0x86, 0x84, 0x01, 0x01, 'a'}
	postBlock = []byte{0x83, 0x86, 0x84, 0x01, 0x01, 'a'}
)

// h2client is a raw HTTP/2 client on c: frames out as given, frames in
// one at a time, without allocating once its buffer has grown.
type h2client struct {
	t   *testing.T
	c   net.Conn
	r   *bufio.Reader
	buf []byte
	dec *hpack.Decoder // for response
}

// dialH2 connects to addr and sends the preface and SETTINGS.
func dialH2(t *testing.T, addr string, settings []h2.Setting) *h2client {
	c := dialServer(t, addr, 10*time.Second)
	k := &h2client{t: t, c: c, r: bufio.NewReader(c)}
	k.send(append([]byte(h2.ClientPreface), h2.AppendSettings(nil, settings)...))
	return k
}

func (k *h2client) send(b []byte) {
	k.t.Helper()
	if _, err := k.c.Write(b); err != nil {
		k.t.Fatal(err)
	}
}

// frame reads the next frame; its Data is valid until the next call.
func (k *h2client) frame() h2.Frame {
	k.t.Helper()
	k.buf = k.buf[:cap(k.buf)]
	if len(k.buf) < h2.FrameHeaderLen {
		k.buf = make([]byte, 1<<10)
	}
	if _, err := io.ReadFull(k.r, k.buf[:h2.FrameHeaderLen]); err != nil {
		k.t.Fatal("reading a frame:", err)
	}
	fh, _ := h2.ParseFrameHeader(k.buf)
	n := h2.FrameHeaderLen + int(fh.Length)
	if n > len(k.buf) {
		k.buf = append(k.buf, make([]byte, n-len(k.buf))...)
	}
	if _, err := io.ReadFull(k.r, k.buf[h2.FrameHeaderLen:n]); err != nil {
		k.t.Fatal("reading a frame:", err)
	}
	f, _, err := h2.ParseFrame(k.buf[:n], h2.MaxMaxFrameSize)
	if err != nil {
		k.t.Fatal("parsing a frame:", err)
	}
	return f
}

// until reads frames up to one of type ft.
func (k *h2client) until(ft h2.FrameType) h2.Frame {
	k.t.Helper()
	for {
		if f := k.frame(); f.Type == ft {
			return f
		}
	}
}

// response reads stream id's response: its :status and body. The
// header blocks of every stream are decoded, to keep the table in step.
func (k *h2client) response(id uint32) (status int, body string) {
	k.t.Helper()
	for {
		f := k.frame()
		switch f.Type {
		case h2.FrameHeaders:
			st := k.status(f)
			if f.StreamID != id || st < 200 {
				continue
			}
			status = st
			if f.Flags.Has(h2.FlagEndStream) {
				return status, body
			}
		case h2.FrameData:
			if f.StreamID != id {
				continue
			}
			body += string(f.Data)
			if f.Flags.Has(h2.FlagEndStream) {
				return status, body
			}
		case h2.FrameRSTStream:
			if f.StreamID == id && status == 0 {
				k.t.Fatalf("stream %d reset: %v", id, f.Code)
			}
		}
	}
}

// status decodes the block of HEADERS f (whole, as this server sends it)
// and returns its :status, 0 for trailers.
func (k *h2client) status(f h2.Frame) int {
	k.t.Helper()
	if k.dec == nil {
		k.dec = hpack.NewDecoder(4096, 64<<10)
	}
	st := 0
	err := k.dec.Decode(f.Data, func(fl hpack.Field) error {
		if string(fl.Name) == ":status" {
			st, _ = strconv.Atoi(string(fl.Value))
		}
		return nil
	})
	if err != nil || !f.Flags.Has(h2.FlagEndHeaders) {
		k.t.Fatalf("a header block this client cannot decode: %v", err)
	}
	return st
}

// eof reads frames to the end of the stream, which must come.
func (k *h2client) eof() {
	k.t.Helper()
	for {
		b := make([]byte, 1<<10)
		if _, err := k.r.Read(b); err == io.EOF {
			return
		} else if err != nil {
			k.t.Fatalf("want the end of the connection: %v", err)
		}
	}
}

// tailProbe is the Handler, recording the most memory an HTTP/2
// connection's tail held after any OnData.
type tailProbe struct {
	Handler
	most atomic.Int64
}

func (p *tailProbe) OnData(c *engine.Conn, b engine.Buffer) bool {
	keep := p.Handler.OnData(c, b)
	if st, _ := c.Context().(*conn); st != nil && st.h2 != nil && int64(cap(st.h2.tail)) > p.most.Load() {
		p.most.Store(int64(cap(st.h2.tail)))
	}
	return keep
}

// TestH2TailBounded sends frames of the largest size in pieces that end
// inside them: the connection keeps at most one frame and its header.
func TestH2TailBounded(t *testing.T) {
	p := &tailProbe{}
	addr, _ := startHandler(t, "", p)
	k := dialH2(t, addr, nil)
	k.send(h2.AppendHeaders(nil, 1, postBlock, false, h2.MinMaxFrameSize))
	var in []byte
	for i := 0; i < 32; i++ {
		in = h2.AppendData(in, 1, make([]byte, h2.MinMaxFrameSize), i == 31)
	}
	for len(in) > 0 {
		n := min(len(in), 10007)
		k.send(in[:n])
		in = in[n:]
		time.Sleep(time.Millisecond)
	}
	if status, body := k.response(1); status != 200 || body != "hello, world" {
		t.Fatalf("%d %q", status, body)
	}
	if most := p.most.Load(); most > maxTail || most == 0 {
		t.Errorf("a connection's tail held %d bytes, want 1 to %d", most, maxTail)
	}
}

// TestH2RequestEnds: a request that expects 100-continue gets a 100
// before its body, as on HTTP/1.1; a request ended by trailers is
// answered at them.
func TestH2RequestEnds(t *testing.T) {
	addr, _ := startServer(t, engine.Backends[0])
	k := dialH2(t, addr, nil)
	// expect (static index 35): 100-continue, a literal without indexing.
	expect := append(append([]byte{}, postBlock...), 0x0f, 35-15, 12)
	expect = append(expect, "100-continue"...)
	k.send(h2.AppendHeaders(nil, 1, expect, false, h2.MinMaxFrameSize))
	f := k.until(h2.FrameHeaders)
	if st := k.status(f); f.StreamID != 1 || st != 100 || f.Flags.Has(h2.FlagEndStream) {
		t.Fatalf("stream %d: %d %v; want stream 1's 100 Continue", f.StreamID, st, f.Flags)
	}
	k.send(h2.AppendData(nil, 1, []byte("body"), true))
	if status, body := k.response(1); status != 200 || body != "hello, world" {
		t.Fatalf("after 100 Continue: %d %q", status, body)
	}

	k.send(h2.AppendHeaders(nil, 3, postBlock, false, h2.MinMaxFrameSize))
	k.send(h2.AppendData(nil, 3, []byte("body"), false))
	k.send(h2.AppendHeaders(nil, 3, []byte{0x00, 0x01, 'x', 0x01, 'y'}, true, h2.MinMaxFrameSize))
	if status, body := k.response(3); status != 200 || body != "hello, world" {
		t.Fatalf("a request with trailers: %d %q", status, body)
	}
}
