package h2

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/spindlenet/spindle/internal/hpack"
)

// pattern returns n bytes of a recognizable pattern.
func pattern(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*7 + i>>11)
	}
	return b
}

// testApp is the handler of TestGoClient: GET /hello, GET /big?n= (a body
// of n pattern bytes, sent as the windows allow), POST /sum (the body's
// length and SHA-256).
type testApp struct {
	big      []byte
	left     map[uint32][]byte // what a /big response has still to send
	sums     map[uint32]*sumState
	trailers *atomic.Int32               // trailer sections "x-check: 1" received
	writev   func([][]byte) (int, error) // if set, /big is sent with WriteDataTo
}

type sumState struct {
	n int
	h interface {
		io.Writer
		Sum([]byte) []byte
	}
}

func (a *testApp) OnRequest(s *Server, id uint32, r *Request, end bool) {
	path := string(r.Path)
	switch {
	case string(r.Method) == "POST" && path == "/sum":
		a.sums[id] = &sumState{h: sha256.New()}
		if end {
			a.finishSum(s, id)
		}
	case path == "/hello":
		// Through OnWritable as /big: a send window shut by other streams'
		// DATA takes none of it now, and WriteData's short count would be lost.
		s.WriteHeaders(id, 200, []hpack.Field{{Name: []byte("content-type"), Value: []byte("text/plain")}}, false)
		a.left[id] = []byte("hello, h2")
		a.OnWritable(s, id)
	case strings.HasPrefix(path, "/big?n="):
		n, _ := strconv.Atoi(path[len("/big?n="):])
		s.WriteHeaders(id, 200, []hpack.Field{{Name: []byte("content-length"), Value: []byte(strconv.Itoa(n))}}, false)
		a.left[id] = a.big[:n]
		a.OnWritable(s, id)
	default:
		s.WriteHeaders(id, 404, nil, true)
	}
}

func (a *testApp) OnData(s *Server, id uint32, p []byte, end bool) {
	if st := a.sums[id]; st != nil {
		st.n += len(p)
		st.h.Write(p)
	}
	s.Consumed(id, len(p))
	if end {
		a.finishSum(s, id)
	}
}

func (a *testApp) finishSum(s *Server, id uint32) {
	st := a.sums[id]
	delete(a.sums, id)
	body := fmt.Sprintf("%d %s", st.n, hex.EncodeToString(st.h.Sum(nil)))
	s.WriteHeaders(id, 200, nil, false)
	s.WriteData(id, []byte(body), true)
}

func (a *testApp) OnTrailers(s *Server, id uint32, fields []hpack.Field) {
	if len(fields) == 1 && string(fields[0].Name) == "x-check" && string(fields[0].Value) == "1" {
		a.trailers.Add(1)
	}
	a.finishSum(s, id)
}
func (a *testApp) OnReset(s *Server, id uint32, code ErrCode) {
	delete(a.left, id)
	delete(a.sums, id)
}
func (a *testApp) OnGoAway(s *Server, code ErrCode, debug []byte) {}

func (a *testApp) OnWritable(s *Server, id uint32) {
	p, ok := a.left[id]
	if !ok {
		return
	}
	var n int
	var err error
	if a.writev != nil {
		n, err = s.WriteDataTo(id, p, true, a.writev)
	} else {
		n, err = s.WriteData(id, p, true)
	}
	if err != nil || n == len(p) {
		delete(a.left, id)
		return
	}
	a.left[id] = p[n:]
}

// serve runs a Server for h on c until it ends: the loop an engine
// handler would run, on a goroutine. fail, if not nil, gets the
// connection error.
func serve(c net.Conn, h Handler, fail func(error)) {
	defer lingerClose(c)
	s := NewServer(h, nil)
	buf := make([]byte, 0, 1<<16)
	rd := make([]byte, 1<<15)
	for {
		if out := s.Pending(); len(out) > 0 {
			n, err := c.Write(out)
			s.Written(n)
			if err != nil {
				return
			}
		}
		if s.Done() {
			return
		}
		n, err := c.Read(rd)
		if err != nil {
			s.Close()
			return
		}
		buf = append(buf, rd[:n]...)
		k, ferr := s.Feed(buf)
		buf = buf[:copy(buf, buf[k:])]
		if ferr != nil {
			if fail != nil {
				fail(ferr)
			}
			c.Write(s.Pending())
			return
		}
	}
}

// lingerClose closes c as the servers on the engine do (CloseLinger): its
// write side first, then what the peer still sends read and dropped until
// its FIN, an error or 2 s, so that bytes the server did not read (a PING
// after the client's GOAWAY) do not turn the close into a reset. h2spec's
// GOAWAY case (3.8/1: "connection reset by peer") failed so in CI when the
// PING came after the server's Done.
func lingerClose(c net.Conn) {
	defer c.Close()
	tc, ok := c.(*net.TCPConn)
	if !ok || tc.CloseWrite() != nil {
		return
	}
	c.SetReadDeadline(time.Now().Add(2 * time.Second))
	io.Copy(io.Discard, c)
}

// listen serves connections on a loopback listener, each on a goroutine
// with the handler and error callback newConn returns, until stop, which
// waits for them to end (their clients must close them).
func listen(t *testing.T, newConn func(c net.Conn) (Handler, func(error))) (addr string, stop func()) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			h, fail := newConn(c)
			wg.Add(1)
			go func() {
				defer wg.Done()
				serve(c, h, fail)
			}()
		}
	}()
	return ln.Addr().String(), func() {
		ln.Close()
		wg.Wait()
	}
}

// TestGoClient: Go's net/http client speaks h2c with prior knowledge to a
// Server behind a plain TCP accept loop: GET, a POST with a 1 MiB body, one
// with trailers, many concurrent streams on one connection, and a response
// larger than the client's stream window (4 MiB in net/http), which needs
// WINDOW_UPDATEs (sent with WriteDataTo straight to the net.Conn).
func TestGoClient(t *testing.T) {
	big := pattern(6 << 20)
	var conns, trailers atomic.Int32
	addr, stop := listen(t, func(c net.Conn) (Handler, func(error)) {
		conns.Add(1)
		app := &testApp{big: big, left: map[uint32][]byte{}, sums: map[uint32]*sumState{}, trailers: &trailers, writev: writev(c)}
		return app, func(err error) { t.Errorf("server: %v", err) }
	})
	defer stop()
	var p http.Protocols
	p.SetUnencryptedHTTP2(true)
	tr := &http.Transport{Protocols: &p}
	defer tr.CloseIdleConnections()
	cl := &http.Client{Transport: tr}
	base := "http://" + addr

	get := func(path string) ([]byte, *http.Response) {
		t.Helper()
		resp, err := cl.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return b, resp
	}
	b, resp := get("/hello")
	if resp.ProtoMajor != 2 || resp.StatusCode != 200 || string(b) != "hello, h2" || resp.Header.Get("Content-Type") != "text/plain" {
		t.Fatalf("GET /hello: %s %d %q %v", resp.Proto, resp.StatusCode, b, resp.Header)
	}

	body := pattern(1 << 20)
	resp, err := cl.Post(base+"/sum", "application/octet-stream", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	b, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	sum := sha256.Sum256(body)
	if want := fmt.Sprintf("%d %x", len(body), sum); string(b) != want {
		t.Fatalf("POST /sum: %q, want %q", b, want)
	}

	// A body of unknown length with trailers: DATA, then HEADERS with
	// END_STREAM.
	req, _ := http.NewRequest("POST", base+"/sum", io.MultiReader(bytes.NewReader(body[:1000]), bytes.NewReader(body[1000:3000])))
	req.Trailer = http.Header{"X-Check": {"1"}}
	resp, err = cl.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	sum = sha256.Sum256(body[:3000])
	if want := fmt.Sprintf("%d %x", 3000, sum); string(b) != want || trailers.Load() != 1 {
		t.Fatalf("POST /sum with trailers: %q (trailers %d), want %q", b, trailers.Load(), want)
	}

	b, resp = get("/big?n=" + strconv.Itoa(len(big)))
	if resp.ContentLength != int64(len(big)) || !bytes.Equal(b, big) {
		t.Fatalf("GET /big: %d bytes (content-length %d), equal %v", len(b), resp.ContentLength, bytes.Equal(b, big))
	}

	// 90 concurrent streams: under our MAX_CONCURRENT_STREAMS (100), so
	// net/http keeps to the one connection (past it, it dials more).
	var cwg sync.WaitGroup
	errs := make(chan error, 90)
	for i := range 90 {
		cwg.Add(1)
		go func() {
			defer cwg.Done()
			path := "/hello"
			if i%10 == 0 {
				path = "/big?n=100000"
			}
			resp, err := cl.Get(base + path)
			if err != nil {
				errs <- err
				return
			}
			b, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil || resp.StatusCode != 200 || path == "/hello" && string(b) != "hello, h2" || path != "/hello" && !bytes.Equal(b, big[:100000]) {
				errs <- fmt.Errorf("%s: %d, %d bytes, %v", path, resp.StatusCode, len(b), err)
			}
		}()
	}
	cwg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if n := conns.Load(); n != 1 {
		t.Errorf("%d connections, want 1", n)
	}
	_, resp = get("/nothing")
	if resp.StatusCode != 404 {
		t.Errorf("GET /nothing: %d", resp.StatusCode)
	}
	tr.CloseIdleConnections()
}

// smallWindows is an HTTP/2 config of net/http with 64 KiB receive
// windows: it credits the stream and the connection every few frames.
var smallWindows = &http.HTTP2Config{MaxReceiveBufferPerConnection: 64 << 10, MaxReceiveBufferPerStream: 64 << 10}

// TestGoClientSmallWindows: Go's net/http client with 64 KiB receive
// windows downloads 32 MiB from a Server whole. Its WINDOW_UPDATEs, one
// for the stream and one for the connection every few DATA frames, return
// window our DATA used and are not charged to the control-frame budget
// (before, they cost two per DATA frame's one given back, and the budget of
// 1000 ended the download with ENHANCE_YOUR_CALM some 8 MB in).
func TestGoClientSmallWindows(t *testing.T) {
	big := pattern(32 << 20)
	addr, stop := listen(t, func(c net.Conn) (Handler, func(error)) {
		app := &testApp{big: big, left: map[uint32][]byte{}, sums: map[uint32]*sumState{}, trailers: new(atomic.Int32), writev: writev(c)}
		return app, func(err error) { t.Errorf("server: %v", err) }
	})
	defer stop()
	var p http.Protocols
	p.SetUnencryptedHTTP2(true)
	tr := &http.Transport{Protocols: &p, HTTP2: smallWindows}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr}).Get("http://" + addr + "/big?n=" + strconv.Itoa(len(big)))
	if err != nil {
		t.Fatal(err)
	}
	// Read as io.Copy into io.Discard does, 8 KiB a time: an update for
	// the stream and one for the connection a read.
	n, err := io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if err != nil || n != int64(len(big)) {
		t.Fatalf("GET /big: %d bytes of %d, %v", n, len(big), err)
	}
	tr.CloseIdleConnections()
}

// TestGoClientLongConn: Go's net/http client runs 20000 requests on one
// connection from 8 goroutines, small answers, 64 KiB downloads, large
// downloads it reads a little of and cancels (RST_STREAM with our DATA in
// flight, then in-flight DATA on a stream it reset), with its 64 KiB
// windows: no bound of the Server's (control frames, early resets,
// remembered resets) ends the connection, and it stays the only one.
// It hung while testApp answered /hello with a WriteData whose short count
// (the connection window spent by other streams' DATA) it dropped: the
// stream never ended. The Server was right.
func TestGoClientLongConn(t *testing.T) {
	big := pattern(1 << 20)
	var (
		mu       sync.Mutex
		requests []*atomic.Int32 // per connection
		ending   atomic.Bool
	)
	addr, stop := listen(t, func(c net.Conn) (Handler, func(error)) {
		n := new(atomic.Int32)
		mu.Lock()
		requests = append(requests, n)
		mu.Unlock()
		app := &testApp{big: big, left: map[uint32][]byte{}, sums: map[uint32]*sumState{}, trailers: new(atomic.Int32), writev: writev(c)}
		return countingApp{app, n}, func(err error) {
			// Once the client is done it closes its connections, and a
			// write of DATA the server still had for a cancelled stream
			// fails: the peer's doing, not the server's.
			if !ending.Load() {
				t.Errorf("server: %v", err)
			}
		}
	})
	defer stop()
	var p http.Protocols
	p.SetUnencryptedHTTP2(true)
	tr := &http.Transport{Protocols: &p, HTTP2: smallWindows}
	defer tr.CloseIdleConnections()
	cl := &http.Client{Transport: tr}
	base := "http://" + addr
	// One request first: concurrent first requests would each dial (the
	// transport has no connection to share yet).
	if resp, err := cl.Get(base + "/hello"); err != nil {
		t.Fatal(err)
	} else {
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	const workers, each = 8, 2500
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := range each {
				path, read := "/hello", -1
				switch (w + i) % 4 {
				case 1:
					path = "/big?n=65536"
				case 2:
					path, read = "/big?n="+strconv.Itoa(len(big)), 1+i%20000
				}
				resp, err := cl.Get(base + path)
				if err != nil {
					t.Errorf("GET %s: %v", path, err)
					return
				}
				if read < 0 {
					_, err = io.Copy(io.Discard, resp.Body)
				} else {
					_, err = io.ReadFull(resp.Body, make([]byte, read))
				}
				resp.Body.Close()
				if err != nil {
					t.Errorf("GET %s: %v", path, err)
					return
				}
			}
		})
	}
	wg.Wait()
	ending.Store(true)
	// The transport may dial a connection per worker when they all start
	// at once while its pool has not yet taken the first one back (seen
	// once under CI's load: 9 connections), and then uses the first one it
	// lists: one connection must still carry nearly every request.
	mu.Lock()
	defer mu.Unlock()
	most, total := int32(0), int32(0)
	for _, n := range requests {
		most, total = max(most, n.Load()), total+n.Load()
	}
	if len(requests) > 1+workers || most < total*95/100 {
		t.Errorf("%d connections, the busiest carried %d of %d requests; want at most %d connections and one with 95%%", len(requests), most, total, 1+workers)
	}
}

// countingApp counts the requests of one connection.
type countingApp struct {
	*testApp
	n *atomic.Int32
}

func (a countingApp) OnRequest(s *Server, id uint32, r *Request, end bool) {
	a.n.Add(1)
	a.testApp.OnRequest(s, id, r, end)
}

// writev is a net.Conn's Write of each slice, for WriteDataTo.
func writev(c net.Conn) func([][]byte) (int, error) {
	return func(vec [][]byte) (int, error) {
		n := 0
		for _, b := range vec {
			k, err := c.Write(b)
			n += k
			if err != nil {
				return n, err
			}
		}
		return n, nil
	}
}
