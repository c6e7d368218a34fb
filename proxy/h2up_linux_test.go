package proxy

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/spindlenet/spindle/engine"
	"github.com/spindlenet/spindle/internal/h2"
	"github.com/spindlenet/spindle/internal/hpack"
)

// h2cUp is a net/http server speaking h2c with prior knowledge only (no
// HTTP/1.1: a request that reached it came over HTTP/2), counting the
// connections it accepted.
type h2cUp struct {
	addr          string
	srv           *httptest.Server
	conns, closed atomic.Int64
}

type connKey struct{}

// newH2CUp starts an h2c server for h until the test ends; edit, if not
// nil, changes its http.Server first. The handler finds its net.Conn in
// its request's context under connKey{}.
func newH2CUp(t *testing.T, h http.Handler, edit func(*http.Server)) *h2cUp {
	t.Helper()
	u := &h2cUp{}
	srv := httptest.NewUnstartedServer(h)
	srv.Config.Protocols = new(http.Protocols)
	srv.Config.Protocols.SetUnencryptedHTTP2(true)
	srv.Config.ConnState = func(c net.Conn, s http.ConnState) {
		switch s {
		case http.StateNew:
			u.conns.Add(1)
		case http.StateClosed:
			u.closed.Add(1)
		}
	}
	srv.Config.ConnContext = func(ctx context.Context, c net.Conn) context.Context {
		return context.WithValue(ctx, connKey{}, c)
	}
	if edit != nil {
		edit(srv.Config)
	}
	srv.Start()
	t.Cleanup(srv.Close)
	u.srv, u.addr = srv, srv.Listener.Addr().String()
	return u
}

// h2cPoolConfig is h2cConfig (HTTP/2 clients) with the pool h2c.
func h2cPoolConfig(b engine.Backend, servers ...string) *Config {
	cfg := h2cConfig(b, servers...)
	cfg.Pools[0].Protocol = ProtocolH2C
	return cfg
}

// grpcMsg frames p as a gRPC length-prefixed message (not compressed).
func grpcMsg(p []byte) []byte {
	b := make([]byte, 5, 5+len(p))
	binary.BigEndian.PutUint32(b[1:], uint32(len(p)))
	return append(b, p...)
}

// readMsg reads one gRPC length-prefixed message.
func readMsg(r io.Reader) ([]byte, error) {
	var h [5]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		return nil, err
	}
	p := make([]byte, binary.BigEndian.Uint32(h[1:]))
	_, err := io.ReadFull(r, p)
	return p, err
}

// grpcHandler is a gRPC-shaped service: /Echo/Unary answers its one
// message with "re:" and it; /Echo/Bidi answers each message as it comes
// (flushed), and ends with grpc-status 0 at the request's end; both check
// content-type application/grpc and te: trailers, and end with
// grpc-status and grpc-message trailers. A request that did not come over
// HTTP/2 gets 505.
func grpcHandler(w http.ResponseWriter, r *http.Request) {
	if r.ProtoMajor != 2 || r.Header.Get("Content-Type") != "application/grpc" {
		http.Error(w, "not gRPC over HTTP/2", 505)
		return
	}
	w.Header().Set("Content-Type", "application/grpc")
	w.Header().Set("X-Saw-XFF", r.Header.Get("X-Forwarded-For"))
	w.Header().Set("X-Saw-Via", r.Header.Get("Via"))
	w.Header().Set("X-Saw-TE", r.Header.Get("Te"))
	w.Header().Set("Trailer", "Grpc-Status, Grpc-Message")
	switch r.URL.Path {
	case "/Echo/Unary":
		m, err := readMsg(r.Body)
		if err != nil {
			w.Header().Set("Grpc-Status", "3")
			return
		}
		w.Write(grpcMsg(append([]byte("re:"), m...)))
	case "/Echo/Bidi":
		rc := http.NewResponseController(w)
		w.WriteHeader(200)
		rc.Flush()
		for {
			m, err := readMsg(r.Body)
			if err != nil {
				break
			}
			w.Write(grpcMsg(append([]byte("re:"), m...)))
			rc.Flush()
		}
	}
	w.Header().Set("Grpc-Status", "0")
	w.Header().Set("Grpc-Message", "fine")
}

// TestH2UpGRPC: a gRPC-shaped exchange through an h2c listener to an h2c
// pool: unary (one message each way, grpc-status and grpc-message
// trailers back), and bidi streaming where the client sends its next
// message only once the reply to the last came back, so nothing on the
// way waits for a whole body. The server saw HTTP/2 (it refuses anything
// else), te: trailers, X-Forwarded-For and Via: 2.0 spindle; the client
// got via; one upstream connection carried all of it.
func TestH2UpGRPC(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		up := newH2CUp(t, http.HandlerFunc(grpcHandler), nil)
		p := startProxy(t, h2cPoolConfig(b, up.addr))
		c, base := h2Client(t, p)
		req, _ := http.NewRequest("POST", base+"/Echo/Unary", bytes.NewReader(grpcMsg([]byte("hello"))))
		req.Header.Set("Content-Type", "application/grpc")
		req.Header.Set("TE", "trailers")
		resp, body := do(t, c, req)
		m, err := readMsg(bytes.NewReader(body))
		if err != nil || string(m) != "re:hello" {
			t.Fatalf("unary reply %q, %v", m, err)
		}
		if resp.StatusCode != 200 || resp.Trailer.Get("Grpc-Status") != "0" || resp.Trailer.Get("Grpc-Message") != "fine" {
			t.Fatalf("unary: %d, trailers %v", resp.StatusCode, resp.Trailer)
		}
		if resp.Header.Get("X-Saw-XFF") != "127.0.0.1" || resp.Header.Get("X-Saw-Via") != "2.0 spindle" || resp.Header.Get("X-Saw-TE") != "trailers" || resp.Header.Get("Via") != "2.0 spindle" {
			t.Errorf("fields: %v", resp.Header)
		}

		pr, pw := io.Pipe()
		req, _ = http.NewRequest("POST", base+"/Echo/Bidi", pr)
		req.Header.Set("Content-Type", "application/grpc")
		respc := make(chan *http.Response, 1)
		errc := make(chan error, 1)
		go func() {
			resp, err := c.Do(req)
			if err != nil {
				errc <- err
				return
			}
			respc <- resp
		}()
		var rb io.ReadCloser
		select {
		case resp = <-respc:
			rb = resp.Body
		case err := <-errc:
			t.Fatal(err)
		case <-time.After(10 * time.Second):
			t.Fatal("no response head for a bidi stream before any message")
		}
		defer rb.Close()
		for i := range 5 {
			msg := fmt.Sprintf("msg %d", i)
			done := make(chan struct{})
			go func() {
				defer close(done)
				pw.Write(grpcMsg([]byte(msg)))
			}()
			m, err := readMsg(rb)
			if err != nil || string(m) != "re:"+msg {
				t.Fatalf("bidi reply %d: %q, %v", i, m, err)
			}
			<-done
		}
		pw.Close()
		if rest, err := io.ReadAll(rb); err != nil || len(rest) != 0 {
			t.Fatalf("bidi end: %q, %v", rest, err)
		}
		if resp.Trailer.Get("Grpc-Status") != "0" {
			t.Fatalf("bidi trailers %v", resp.Trailer)
		}
		if n := up.conns.Load(); n != 1 {
			t.Errorf("%d upstream connections, want 1", n)
		}
		if st := serverTotals(p, up.addr); st.H2Streams != 2 || st.H2Connections != 1 || st.Active != 0 {
			t.Errorf("server totals: %+v", st)
		}
	})
}

// inflight counts a handler's requests in flight and the most at once.
type inflight struct {
	now, max atomic.Int64
}

func (f *inflight) enter() {
	n := f.now.Add(1)
	for {
		m := f.max.Load()
		if n <= m || f.max.CompareAndSwap(m, n) {
			return
		}
	}
}

func (f *inflight) leave() { f.now.Add(-1) }

// slowOK answers "ok" after d, counted in f.
func slowOK(f *inflight, d time.Duration) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		f.enter()
		defer f.leave()
		io.Copy(io.Discard, r.Body)
		time.Sleep(d)
		io.WriteString(w, "ok")
	}
}

// parallelGets sends n GETs at once over c and fails the test unless each
// is a 200 "ok" over HTTP/2.
func parallelGets(t *testing.T, c *http.Client, url string, n int) {
	t.Helper()
	var wg sync.WaitGroup
	errc := make(chan error, n)
	for range n {
		wg.Go(func() {
			resp, err := c.Get(url)
			if err != nil {
				errc <- err
				return
			}
			body, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil || resp.StatusCode != 200 || string(body) != "ok" || resp.ProtoMajor != 2 {
				errc <- fmt.Errorf("%d %q %v", resp.StatusCode, body, err)
			}
		})
	}
	wg.Wait()
	close(errc)
	for err := range errc {
		t.Error(err)
	}
}

// TestH2UpMultiplex: 40 streams at once from a client go over one
// upstream connection (counted at the server), several of them in
// flight there at once.
func TestH2UpMultiplex(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		var f inflight
		up := newH2CUp(t, slowOK(&f, 50*time.Millisecond), nil)
		cfg := h2cPoolConfig(b, up.addr)
		cfg.Pools[0].H2MaxConnections = 2
		p := startProxy(t, cfg)
		c, base := h2Client(t, p)
		parallelGets(t, c, base+"/", 40)
		if n := up.conns.Load(); n != 1 {
			t.Errorf("%d upstream connections for 40 streams, want 1", n)
		}
		if m := f.max.Load(); m < 2 {
			t.Errorf("at most %d request in flight at the server, want several", m)
		}
		if st := serverTotals(p, up.addr); st.H2Streams != 40 || st.H2Refused != 0 {
			t.Errorf("server totals: %+v", st)
		}
	})
}

// TestH2UpMaxStreams: a server's SETTINGS_MAX_CONCURRENT_STREAMS of 1 is
// respected: with h2_max_connections 2, 12 streams at once find at most
// 2 in flight at the server, over at most 2 connections, none refused;
// all are answered.
func TestH2UpMaxStreams(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		var f inflight
		up := newH2CUp(t, slowOK(&f, 20*time.Millisecond), func(s *http.Server) {
			s.HTTP2 = &http.HTTP2Config{MaxConcurrentStreams: 1}
		})
		cfg := h2cPoolConfig(b, up.addr)
		cfg.Pools[0].H2MaxConnections = 2
		p := startProxy(t, cfg)
		c, base := h2Client(t, p)
		parallelGets(t, c, base+"/", 12)
		if n, m := up.conns.Load(), f.max.Load(); n > 2 || m > 2 {
			t.Errorf("%d upstream connections, %d streams in flight at most, want 2 at most each", n, m)
		}
		if st := serverTotals(p, up.addr); st.H2Refused != 0 || st.H2Streams != 12 {
			t.Errorf("server totals: %+v", st)
		}
	})
}

// rawH2Up serves HTTP/2 on c with an internal/h2 Server answering each
// request 200 "ok" at its end. mode "refuse" resets the first stream of
// each connection with REFUSED_STREAM; "goaway" answers the first stream
// of the first connection (first says which) with GOAWAY(last 0,
// NO_ERROR) instead, leaving it unprocessed; "hold" sends the first
// connection's first stream a graceful GOAWAY naming it (it is
// processed) and answers it only 400 ms later; "reset" resets a stream
// for /rst/N with code N before the response head, and for /rst-head/N
// after the head and a body's first bytes, and answers /cl-short with a
// body shorter than its content-length. It allocates nothing per
// request once warm.
func rawH2Up(mode string, first *atomic.Bool) func(net.Conn) {
	return func(c net.Conn) {
		firstConn := mode != "" && mode != "refuse" && first.CompareAndSwap(true, false)
		a := &rawH2App{mode: mode, fresh: true, goFirst: mode == "goaway" && firstConn, hold: mode == "hold" && firstConn}
		s := h2.NewServer(a, nil)
		var tail []byte
		buf := make([]byte, 64<<10)
		for {
			if writePending(c, s) != nil {
				return
			}
			if a.goaway {
				a.goaway = false
				if _, err := c.Write(h2.AppendGoAway(nil, a.last, h2.NoError, nil)); err != nil {
					return
				}
				if a.held != 0 {
					c.SetReadDeadline(time.Now().Add(400 * time.Millisecond))
				}
			}
			if s.Done() {
				return
			}
			n, err := c.Read(buf)
			if ne, ok := err.(net.Error); ok && ne.Timeout() && a.held != 0 {
				c.SetReadDeadline(time.Time{})
				a.answer(s, a.held)
				a.held = 0
				continue
			}
			if err != nil {
				s.Close()
				return
			}
			if s.FeedTail(&tail, buf[:n]) != nil {
				c.Write(s.Pending())
				return
			}
		}
	}
}

type rawH2App struct {
	mode    string
	fresh   bool // no stream seen yet
	goFirst bool // GOAWAY for the first stream
	hold    bool // a GOAWAY naming the first stream, answered later
	goaway  bool // a GOAWAY is due
	last    uint32
	held    uint32 // the stream to answer once the read times out
}

var (
	rawOK      = []byte("ok")
	rawFields  = []hpack.Field{{Name: []byte("content-length"), Value: []byte("2")}}
	rawCLShort = []hpack.Field{{Name: []byte("content-length"), Value: []byte("5")}}
)

func (a *rawH2App) OnRequest(s *h2.Server, id uint32, r *h2.Request, end bool) {
	fresh := a.fresh
	a.fresh = false
	switch {
	case fresh && a.mode == "refuse":
		s.Reset(id, h2.RefusedStream)
		return
	case fresh && a.goFirst:
		a.goaway = true
		return
	case fresh && a.hold:
		a.goaway, a.last, a.held = true, id, id
		return
	case a.mode == "sensitive": // the names of the never-indexed fields, the body
		var names []byte
		for i, n := range []string{":method", ":scheme", ":authority", ":path"} { // Pseudo's order
			if r.NeverIndexed&(1<<i) != 0 {
				names = append(append(names, n...), ' ')
			}
		}
		for _, f := range r.Fields {
			if f.Sensitive {
				names = append(append(names, f.Name...), ' ')
			}
		}
		if s.WriteHeaders(id, 200, nil, false) == nil {
			s.WriteData(id, names, true)
		}
		return
	case a.mode == "sensitive-resp": // a 103 and a 200, :status and x-secret never-indexed for /ni
		ni, never := strings.HasPrefix(string(r.Path), "/ni"), h2.Pseudo(0)
		if ni {
			never = h2.PseudoStatus
		}
		fs := []hpack.Field{{Name: []byte("x-secret"), Value: []byte("s3cr3t"), Sensitive: ni}, rawFields[0]}
		s.WriteResponse(id, &h2.Response{Status: 103, Fields: fs[:1], NeverIndexed: never}, false)
		if s.WriteResponse(id, &h2.Response{Status: 200, Fields: fs, NeverIndexed: never}, false) == nil {
			s.WriteData(id, rawOK, true)
		}
		return
	case a.mode == "reset":
		path, head := string(r.Path), false
		if rest, ok := strings.CutPrefix(path, "/rst-head/"); ok {
			path, head = "/rst/"+rest, true
		}
		if path == "/cl-short" { // content-length 5, 2 bytes sent
			if s.WriteHeaders(id, 200, rawCLShort, false) == nil {
				s.WriteData(id, rawOK, true)
			}
			return
		}
		if n, err := strconv.Atoi(strings.TrimPrefix(path, "/rst/")); err == nil {
			if head && s.WriteHeaders(id, 200, nil, false) == nil {
				s.WriteData(id, rawOK, false)
			}
			s.Reset(id, h2.ErrCode(n))
			return
		}
	}
	if end {
		a.answer(s, id)
	}
}

func (a *rawH2App) answer(s *h2.Server, id uint32) {
	if s.WriteHeaders(id, 200, rawFields, false) == nil {
		s.WriteData(id, rawOK, true)
	}
}

func (a *rawH2App) OnData(s *h2.Server, id uint32, p []byte, end bool) {
	s.Consumed(id, len(p))
	if end {
		a.answer(s, id)
	}
}
func (a *rawH2App) OnTrailers(s *h2.Server, id uint32, fields []hpack.Field) { a.answer(s, id) }
func (a *rawH2App) OnReset(*h2.Server, uint32, h2.ErrCode)                   {}
func (a *rawH2App) OnWritable(*h2.Server, uint32)                            {}
func (a *rawH2App) OnGoAway(*h2.Server, h2.ErrCode, []byte)                  {}

// TestStatusNeverIndexedKept: a :status an h2c server sent as a
// never-indexed literal goes so to an HTTP/2 client (RFC 7541 6.2.3: an
// intermediary keeps the representation), an interim response's and the
// final one's, as do the regular fields it sent never-indexed; those it
// sent otherwise go otherwise. The :status went indexed (200) or without
// indexing (103).
func TestStatusNeverIndexedKept(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		up := newUpstream(t, rawH2Up("sensitive-resp", new(atomic.Bool)))
		p := startProxy(t, h2cPoolConfig(b, up.addr))
		for _, tc := range []struct{ path, want string }{
			{"/ni", ":status 103 never, x-secret never; :status 200 never, x-secret never; "},
			{"/plain", ":status 103, x-secret; :status 200, x-secret; "},
		} {
			r := rawH2Fields(t, p, []hpack.Field{{Name: []byte(":method"), Value: []byte("GET")}, {Name: []byte(":scheme"), Value: []byte("http")},
				{Name: []byte(":authority"), Value: []byte("x")}, {Name: []byte(":path"), Value: []byte(tc.path)}})
			dec := hpack.NewDecoder(4096, 64<<10)
			var got []byte
			for {
				f, err := r.next()
				if err != nil {
					t.Fatalf("%s: %v", tc.path, err)
				}
				if f.StreamID != 1 {
					continue
				}
				if f.Type == h2.FrameData && f.Flags&h2.FlagEndStream != 0 {
					break
				}
				if f.Type != h2.FrameHeaders {
					continue
				}
				if err := dec.Decode(f.Data, func(hf hpack.Field) error {
					if n := string(hf.Name); n == ":status" || n == "x-secret" {
						if n == ":status" {
							n += " " + string(hf.Value)
						}
						if hf.Sensitive {
							n += " never"
						}
						got = append(append(got, n...), ", "...)
					}
					return nil
				}); err != nil {
					t.Fatalf("%s: %v", tc.path, err)
				}
				got = append(got[:len(got)-2], "; "...)
			}
			if string(got) != tc.want {
				t.Errorf("%s: the client got %q, want %q", tc.path, got, tc.want)
			}
		}
	})
}

// TestH2UpRetry: a stream the server refused (REFUSED_STREAM) or left
// out of a graceful GOAWAY (above its last stream id: not processed) is
// sent again, and succeeds; the metrics count the refusal, the retry and
// the GOAWAY.
func TestH2UpRetry(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		for _, mode := range []string{"refuse", "goaway"} {
			var first atomic.Bool
			first.Store(true)
			up := newUpstream(t, rawH2Up(mode, &first))
			p := startProxy(t, h2cPoolConfig(b, up.addr))
			c, base := h2Client(t, p)
			resp, body := do(t, c, mustReq(t, "GET", base+"/x", nil))
			if resp.StatusCode != 200 || string(body) != "ok" {
				t.Fatalf("%s: %d %q", mode, resp.StatusCode, body)
			}
			st := serverTotals(p, up.addr)
			if st.H2Refused != 1 || st.H2Retried != 1 {
				t.Errorf("%s: refused %d, retried %d, want 1 and 1", mode, st.H2Refused, st.H2Retried)
			}
			if mode == "goaway" && (st.H2GoAways != 1 || up.accepted.Load() != 2) {
				t.Errorf("goaway: %d GOAWAYs, %d connections, want 1 and 2", st.H2GoAways, up.accepted.Load())
			}
		}
	})
}

func mustReq(t *testing.T, method, url string, body io.Reader) *http.Request {
	t.Helper()
	req, err := http.NewRequest(method, url, body)
	if err != nil {
		t.Fatal(err)
	}
	return req
}

// TestH2UpClientReset: a client's RST_STREAM reaches the server as the
// stream's cancel (its request context ends); the upstream connection
// stays and serves the next stream.
func TestH2UpClientReset(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		canceled := make(chan struct{}, 1)
		up := newH2CUp(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path != "/hang" {
				io.WriteString(w, "ok")
				return
			}
			w.WriteHeader(200)
			http.NewResponseController(w).Flush()
			select {
			case <-r.Context().Done():
				canceled <- struct{}{}
			case <-time.After(10 * time.Second):
			}
		}), nil)
		p := startProxy(t, h2cPoolConfig(b, up.addr))
		c, base := h2Client(t, p)
		ctx, cancel := context.WithCancel(context.Background())
		req, _ := http.NewRequestWithContext(ctx, "GET", base+"/hang", nil)
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		cancel()
		resp.Body.Close()
		select {
		case <-canceled:
		case <-time.After(5 * time.Second):
			t.Fatal("the server did not see the client's reset")
		}
		parallelGets(t, c, base+"/", 1)
		if n := up.conns.Load(); n != 1 {
			t.Errorf("%d upstream connections, want 1", n)
		}
		if lt := p.Totals().Listeners[0]; lt.H2ResetsClient != 1 {
			t.Errorf("%d client resets counted, want 1", lt.H2ResetsClient)
		}
	})
}

// startLoggedH2C starts a proxy with an h2c pool of server, an access log
// (its path returned) and passive health's http_errors 2.
func startLoggedH2C(t *testing.T, b engine.Backend, server string) (*Proxy, string) {
	path := filepath.Join(t.TempDir(), "access.log")
	cfg := h2cPoolConfig(b, server)
	cfg.Listeners[0].AccessLog = &AccessLogConfig{Path: path}
	cfg.Pools[0].Passive = &PassiveConfig{Fails: 5, Cooldown: Duration(time.Minute), HTTPErrors: 2}
	return startProxy(t, cfg), path
}

// TestH2UpServerReset: a server's RST_STREAM reaches an HTTP/2 client as
// a reset with the server's code, before the response head (a gRPC
// server's deadline: CANCEL) and after it (NO_ERROR, which would make a
// cut response look whole, as CANCEL); an HTTP/1.1 client gets 502
// before the head. The access log says SR (a response the proxy found in
// error after its head, PH); passive health does not count
// CANCEL or NO_ERROR (the server ended the stream on purpose: http_errors
// 2 and four of them leave it up), other codes count (two
// INTERNAL_ERROR eject it).
func TestH2UpServerReset(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		var first atomic.Bool
		up := newUpstream(t, rawH2Up("reset", &first))
		p, path := startLoggedH2C(t, b, up.addr)
		c, base := h2Client(t, p)
		get := func(target, want string) {
			t.Helper()
			resp, err := c.Get(base + target)
			if err == nil {
				var body []byte
				body, err = io.ReadAll(resp.Body)
				resp.Body.Close()
				if err == nil {
					t.Fatalf("%s: %s %q, want the server's reset (%s)", target, resp.Status, body, want)
				}
			}
			if !strings.Contains(err.Error(), want) {
				t.Fatalf("%s: %v, want the server's reset (%s)", target, err, want)
			}
		}
		get("/rst/8", "CANCEL")
		m := waitLine(t, path, "/rst/8's line", func(m map[string]any) bool { return m["target"] == "/rst/8" })
		checkFields(t, m, map[string]string{"term": "SR", "server": up.addr})
		get("/rst/0", "CANCEL")
		get("/rst-head/8", "CANCEL")
		get("/rst/8", "CANCEL")
		h1 := &http.Client{Transport: &http.Transport{}, Timeout: 20 * time.Second}
		t.Cleanup(h1.Transport.(*http.Transport).CloseIdleConnections)
		resp, err := h1.Get(base + "/rst/8")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 502 || resp.ProtoMajor != 1 {
			t.Fatalf("HTTP/1.1 client: %s %s, want 502", resp.Proto, resp.Status)
		}
		m = waitLine(t, path, "HTTP/1.1's line", func(m map[string]any) bool { return m["proto"] == "HTTP/1.1" })
		checkFields(t, m, map[string]string{"status": "502", "term": "SR", "source": "proxy"})
		if st := serverTotals(p, up.addr); !st.Up || st.ConsecutiveErrors != 0 {
			t.Fatalf("after CANCEL and NO_ERROR resets: up %v, %d errors in a row, want up and 0", st.Up, st.ConsecutiveErrors)
		}
		get("/cl-short", "PROTOCOL_ERROR") // (the proxy's stream error: not the server's reset)
		m = waitLine(t, path, "/cl-short's line", func(m map[string]any) bool { return m["target"] == "/cl-short" })
		checkFields(t, m, map[string]string{"status": "200", "term": "PH"})
		get("/rst/2", "INTERNAL_ERROR")
		get("/rst/2", "INTERNAL_ERROR")
		if st := serverTotals(p, up.addr); st.Up || st.EjectionsHTTP != 1 {
			t.Fatalf("after two INTERNAL_ERROR resets: up %v, %d ejections, want down and 1", st.Up, st.EjectionsHTTP)
		}
	})
}

// TestH2UpKilled: the server's connection dying after a response's head
// and part of its body resets the client's stream; dying before a head
// gets the stream 502; the next request goes on a new connection.
func TestH2UpKilled(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		up := newH2CUp(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			c := r.Context().Value(connKey{}).(net.Conn)
			switch r.URL.Path {
			case "/mid":
				w.WriteHeader(200)
				w.Write([]byte("partial"))
				http.NewResponseController(w).Flush()
				time.Sleep(50 * time.Millisecond)
				c.Close()
			case "/before":
				c.Close()
			default:
				io.WriteString(w, "ok")
			}
			time.Sleep(50 * time.Millisecond)
		}), nil)
		p := startProxy(t, h2cPoolConfig(b, up.addr))
		c, base := h2Client(t, p)
		resp, err := c.Get(base + "/mid")
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err == nil || !strings.HasPrefix("partial", string(body)) {
			t.Fatalf("killed mid-body: %q, %v; want a stream error", body, err)
		}
		resp, body = do(t, c, mustReq(t, "GET", base+"/before", nil))
		if resp.StatusCode != 502 {
			t.Fatalf("killed before the head: %d %q, want 502", resp.StatusCode, body)
		}
		parallelGets(t, c, base+"/", 1)
		if n := up.conns.Load(); n != 3 {
			t.Errorf("%d upstream connections, want 3", n)
		}
	})
}

// TestH2UpSlowClient: a client that does not read a 2 MiB response
// pins little: the server gets to write the client's window (64 KiB),
// the proxy's upstream stream window (64 KiB) and its own buffers, and
// then waits; once read, the response arrives whole.
func TestH2UpSlowClient(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		const size = 2 << 20
		var written atomic.Int64
		up := newH2CUp(t, writesCounted(size, &written), nil)
		p := startProxy(t, h2cPoolConfig(b, up.addr))
		var pr http.Protocols
		pr.SetUnencryptedHTTP2(true)
		tr := &http.Transport{Protocols: &pr, DisableCompression: true,
			HTTP2: &http.HTTP2Config{MaxReceiveBufferPerStream: 64 << 10, MaxReceiveBufferPerConnection: 64 << 10}}
		defer tr.CloseIdleConnections()
		c := &http.Client{Transport: tr, Timeout: 30 * time.Second}
		resp, err := c.Get("http://" + p.Addr("web").String() + "/big")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		time.Sleep(300 * time.Millisecond)
		w1 := written.Load()
		time.Sleep(300 * time.Millisecond)
		w2 := written.Load()
		t.Logf("the server wrote %d bytes, then %d, while the client read nothing", w1, w2)
		if w2 > 512<<10 || w2 != w1 {
			t.Errorf("the server wrote %d then %d bytes to a client that reads nothing, want under 512 KiB and stopped", w1, w2)
		}
		n, err := io.Copy(io.Discard, resp.Body)
		if err != nil || n != size {
			t.Fatalf("read %d, %v; want %d", n, err, size)
		}
	})
}

// TestH2UpAllocs: HTTP/2 requests forwarded to an h2c pool in steady
// state allocate nothing: the process's allocations (proxy, the raw
// upstream's internal/h2 Server, the clients) over 2000 requests, less
// those of the same round without requests.
func TestH2UpAllocs(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		var first atomic.Bool
		up := newUpstream(t, rawH2Up("", &first))
		p := startProxy(t, h2cPoolConfig(b, up.addr))
		sent := h2AllocsZero(t, p, 10)
		if st := serverTotals(p, up.addr); st.H2Streams != uint64(sent) || up.accepted.Load() > 4 {
			t.Errorf("%d streams over %d connections, want %d over a few", st.H2Streams, up.accepted.Load(), sent)
		}
	})
}

// TestH2UpFromH1: HTTP/1.1 clients to an h2c pool, over one kept-alive
// client connection: a chunked request body with a trailer goes as DATA
// and trailers (the server saw HTTP/2, the body and the trailer), the
// response without content-length comes back chunked with its trailers;
// one with content-length comes with Content-Length; an Upgrade request
// is answered 501, the exchanges before it counted on one connection.
func TestH2UpFromH1(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		up := newH2CUp(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.ProtoMajor != 2 {
				http.Error(w, "not HTTP/2", 505)
				return
			}
			switch r.URL.Path {
			case "/echo":
				w.Header().Set("Trailer", "X-Got-Trailer, X-Len")
				w.Header().Set("X-Saw-Via", r.Header.Get("Via"))
				w.Header().Set("X-Saw-Host", r.Host)
				n, _ := io.Copy(w, r.Body)
				w.Header().Set("X-Got-Trailer", r.Trailer.Get("X-Check"))
				w.Header().Set("X-Len", fmt.Sprint(n))
			case "/len":
				w.Header().Set("Content-Length", "5")
				io.WriteString(w, "hello")
			}
		}), nil)
		cfg := h2cPoolConfig(b, up.addr)
		p := startProxy(t, cfg)
		tr := &http.Transport{MaxConnsPerHost: 1, DisableCompression: true}
		defer tr.CloseIdleConnections()
		c := &http.Client{Transport: tr, Timeout: 20 * time.Second}
		base := "http://" + p.Addr("web").String()
		big := bytes.Repeat([]byte("0123456789abcdef"), 20000)
		req := mustReq(t, "POST", base+"/echo", io.MultiReader(bytes.NewReader(big[:1000]), bytes.NewReader(big[1000:])))
		req.Trailer = http.Header{"X-Check": {"yes"}}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || !bytes.Equal(body, big) || resp.ProtoMajor != 1 {
			t.Fatalf("echo: %d bytes, %v, %s", len(body), err, resp.Proto)
		}
		if fmt.Sprint(resp.TransferEncoding) != "[chunked]" || resp.Trailer.Get("X-Got-Trailer") != "yes" || resp.Trailer.Get("X-Len") != fmt.Sprint(len(big)) {
			t.Errorf("echo: transfer-encoding %v, trailers %v", resp.TransferEncoding, resp.Trailer)
		}
		if resp.Header.Get("X-Saw-Via") != "1.1 spindle" || resp.Header.Get("Via") != "2.0 spindle" || !strings.HasPrefix(resp.Header.Get("X-Saw-Host"), "127.0.0.1:") {
			t.Errorf("echo fields: %v", resp.Header)
		}
		for range 2 {
			resp, body := get(t, c, base+"/len")
			if resp.Status != "200 OK" || body != "hello" || resp.ContentLength != 5 {
				t.Fatalf("len: %q %q %d", resp.Status, body, resp.ContentLength)
			}
		}
		if lt := p.Totals().Listeners[0]; lt.Accepted != 1 {
			t.Errorf("%d client connections, want 1 (kept alive)", lt.Accepted)
		}
		req = mustReq(t, "GET", base+"/len", nil)
		req.Header.Set("Connection", "Upgrade")
		req.Header.Set("Upgrade", "websocket")
		resp, err = c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 501 {
			t.Errorf("upgrade to an h2c pool: %d, want 501", resp.StatusCode)
		}
		if n := up.conns.Load(); n != 1 {
			t.Errorf("%d upstream connections, want 1", n)
		}
	})
}

// TestH2UpHealthCheck: an h2c pool's HTTP health checks speak HTTP/2
// with prior knowledge (the servers answer nothing else): the server
// whose /healthz answers 200 stays up, the one answering 503 goes down
// and then takes no stream; the checks carried :authority (the server's
// address) and the user-agent.
func TestH2UpHealthCheck(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		var mu sync.Mutex
		var saw []string
		mk := func(status int) *h2cUp {
			return newH2CUp(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path == "/healthz" {
					mu.Lock()
					saw = append(saw, r.Proto+" "+r.Host+" "+r.UserAgent())
					mu.Unlock()
					w.WriteHeader(status)
					return
				}
				io.WriteString(w, "ok")
			}), nil)
		}
		good, bad := mk(200), mk(503)
		cfg := h2cPoolConfig(b, good.addr, bad.addr)
		cfg.Pools[0].Health = httpHealth()
		p := startProxy(t, cfg)
		waitFor(t, "the 503 server down", func() bool { return !serverTotals(p, bad.addr).Up })
		waitFor(t, "3 passed checks of the healthy server", func() bool { return serverTotals(p, good.addr).CheckPasses >= 3 })
		if st := serverTotals(p, good.addr); !st.Up {
			t.Fatalf("the healthy server: up %v after %d passes, %d failures", st.Up, st.CheckPasses, st.CheckFailures)
		}
		c, base := h2Client(t, p)
		parallelGets(t, c, base+"/", 10)
		if st := serverTotals(p, bad.addr); st.H2Streams != 0 {
			t.Errorf("the server down got %d streams", st.H2Streams)
		}
		mu.Lock()
		defer mu.Unlock()
		if want := "HTTP/2.0 " + good.addr + " spindle-health"; len(saw) == 0 || saw[0] != want && saw[0] != "HTTP/2.0 "+bad.addr+" spindle-health" {
			t.Errorf("checks seen as %q, want %q", saw, want)
		}
	})
}

// slowProto answers its name and the request's protocol, /slow only once
// release is closed.
func slowProto(name string, release chan struct{}) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow" {
			<-release
		}
		io.WriteString(w, name+" "+r.Proto)
	}
}

// TestH2UpReload: a reload that replaces an h2c pool's server lets the
// stream in flight on the server removed finish there, sends the next
// streams to the new server, and closes the removed server's connection
// once its stream ended; a reload that makes the pool http1 (the same
// server, which speaks both) sends the next requests as HTTP/1.1 and
// closes the HTTP/2 connection: none of the other protocol is reused.
func TestH2UpReload(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		release := make(chan struct{})
		u1 := newH2CUp(t, slowProto("u1", release), nil)
		u2 := newH2CUp(t, slowProto("u2", release), func(s *http.Server) { s.Protocols.SetHTTP1(true) })
		p := startProxy(t, h2cPoolConfig(b, u1.addr))
		c, base := h2Client(t, p)
		slow := getAsync(c, base+"/slow")
		waitFor(t, "the slow stream at the server", func() bool { return serverTotals(p, u1.addr).H2Streams == 1 })
		mustReload(t, p, h2cPoolConfig(b, u2.addr))
		if _, body := get(t, c, base+"/x"); body != "u2 HTTP/2.0" {
			t.Errorf("a stream after the reload answered %q, want u2 over HTTP/2.0", body)
		}
		if u1.closed.Load() != 0 {
			t.Error("the removed server's connection closed with a stream in flight")
		}
		close(release)
		if got := <-slow; got != "200 u1 HTTP/2.0" {
			t.Errorf("the stream in flight across the reload: %q, want 200 u1", got)
		}
		waitFor(t, "the removed server's connection closed", func() bool { return u1.closed.Load() == 1 })

		cfg := h2cConfig(b, u2.addr) // (its pool http1)
		mustReload(t, p, cfg)
		if _, body := get(t, c, base+"/x"); body != "u2 HTTP/1.1" {
			t.Errorf("a request after the pool became http1 answered %q, want u2 over HTTP/1.1", body)
		}
		waitFor(t, "the HTTP/2 connection closed", func() bool { return u2.closed.Load() == 1 })
		if n := u2.conns.Load(); n != 2 {
			t.Errorf("%d connections to the server, want 2 (one HTTP/2, one HTTP/1.1)", n)
		}
	})
}

// TestH2UpDrain: a drain lets a stream in flight to an h2c pool finish,
// and Run returns once it did.
func TestH2UpDrain(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		release := make(chan struct{})
		u := newH2CUp(t, slowProto("u", release), nil)
		p, stop := runProxy(t, h2cPoolConfig(b, u.addr))
		c, base := h2Client(t, p)
		slow := getAsync(c, base+"/slow")
		waitFor(t, "the slow stream at the server", func() bool { return serverTotals(p, u.addr).H2Streams == 1 })
		drainsInFlight(t, stop, release, slow, "200 u HTTP/2.0")
		waitFor(t, "the upstream connection closed", func() bool { return u.closed.Load() == 1 })
	})
}

// TestH2UpLogAndPassive: each stream to an h2c pool has its access log
// line (proto, status, bytes, server, reused, term), and passive health
// counts a 5xx and a connection dying before the response head as failed
// exchanges: http_errors 2 of them eject the server.
func TestH2UpLogAndPassive(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		up := newH2CUp(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			body, _ := io.ReadAll(r.Body)
			switch r.URL.Path {
			case "/bad":
				w.WriteHeader(503)
			case "/die":
				r.Context().Value(connKey{}).(net.Conn).Close()
				time.Sleep(50 * time.Millisecond)
			default:
				fmt.Fprintf(w, "got %d", len(body))
			}
		}), nil)
		p, path := startLoggedH2C(t, b, up.addr)
		c, base := h2Client(t, p)
		resp, err := c.Post(base+"/ok", "text/plain", strings.NewReader("abcd"))
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		m := waitLine(t, path, "/ok's line", func(m map[string]any) bool { return m["target"] == "/ok" })
		checkFields(t, m, map[string]string{"method": "POST", "proto": "HTTP/2.0", "status": "200", "req_bytes": "4", "resp_bytes": "5",
			"server": up.addr, "source": "upstream", "reused": "false", "term": "-"})
		if resp, _ := do(t, c, mustReq(t, "GET", base+"/bad", nil)); resp.StatusCode != 503 {
			t.Fatalf("/bad: %d", resp.StatusCode)
		}
		m = waitLine(t, path, "/bad's line", func(m map[string]any) bool { return m["target"] == "/bad" })
		checkFields(t, m, map[string]string{"status": "503", "reused": "true"})
		if st := serverTotals(p, up.addr); !st.Up || st.ConsecutiveErrors != 1 {
			t.Fatalf("after a 503: up %v, %d errors in a row", st.Up, st.ConsecutiveErrors)
		}
		if resp, _ := do(t, c, mustReq(t, "GET", base+"/die", nil)); resp.StatusCode != 502 {
			t.Fatalf("/die: %d", resp.StatusCode)
		}
		m = waitLine(t, path, "/die's line", func(m map[string]any) bool { return m["target"] == "/die" })
		checkFields(t, m, map[string]string{"status": "502", "term": "SD", "source": "proxy"})
		if st := serverTotals(p, up.addr); st.Up || st.EjectionsHTTP != 1 {
			t.Fatalf("after a 503 and a connection dying: up %v, %d ejections", st.Up, st.EjectionsHTTP)
		}
	})
}

// TestH2UpIdleTimeout: an upstream connection with no stream for the
// pool's idle_timeout is closed; the next stream dials another.
func TestH2UpIdleTimeout(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		up := newH2CUp(t, slowProto("u", nil), nil)
		cfg := h2cPoolConfig(b, up.addr)
		cfg.Pools[0].IdleTimeout = Duration(100 * time.Millisecond)
		p := startProxy(t, cfg)
		c, base := h2Client(t, p)
		start := time.Now()
		get(t, c, base+"/x")
		waitFor(t, "the idle upstream connection closed", func() bool { return up.closed.Load() == 1 })
		if d := time.Since(start); d < 100*time.Millisecond {
			t.Errorf("closed after %v, before idle_timeout", d)
		}
		if st := serverTotals(p, up.addr); st.H2Connections != 0 {
			t.Errorf("%d h2 connections open, want 0", st.H2Connections)
		}
		get(t, c, base+"/x")
		if n := up.conns.Load(); n != 2 {
			t.Errorf("%d connections, want 2", n)
		}
	})
}

// TestH2UpWaitTimeout: a stream that finds every connection full (the
// server's one stream at a time, h2_max_connections 1) waits, and gets
// 504 once response_timeout passes; the one in flight (its body coming
// in pieces, within the timeout each) is answered. The pieces come every
// 50 ms, response_timeout is 1 s: a loaded machine's handler (two CPU
// hogs beside another -race test binary) sent none for longer at times,
// and the stream in flight was cut ("CANCEL; received from peer"). The
// proxy can cut it only where response_timeout passed from a piece's
// write's start (its read by the proxy, from which the timeout counts,
// comes after; the engine runs a timer after the data that came by then)
// to the next one's end (before the first, from the request's sending
// to the first write's end): the handler measures that, and a cut (or a
// 504) fails the test where it stayed under the timeout, and is tried
// again (untilCalm) where it did not.
func TestH2UpWaitTimeout(t *testing.T) {
	const timeout = time.Second
	forBackends(t, func(t *testing.T, b engine.Backend) {
		untilCalm(t, func() (fault, paused string) {
			release, ended := make(chan struct{}), make(chan struct{})
			// most: the longest from the request's sending, or a write's
			// start, to the next write's end.
			var sent, most atomic.Int64
			up := newH2CUp(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				defer close(ended)
				last := time.Unix(0, sent.Load())
				write := func(s string) {
					io.WriteString(w, s)
					http.NewResponseController(w).Flush()
					if d := int64(time.Since(last)); d > most.Load() {
						most.Store(d)
					}
					last = time.Now()
				}
				for {
					select {
					case <-release:
						write("done")
						return
					case <-time.After(50 * time.Millisecond):
						write(".")
					}
				}
			}), func(s *http.Server) {
				s.HTTP2 = &http.HTTP2Config{MaxConcurrentStreams: 1}
			})
			cfg := h2cPoolConfig(b, up.addr)
			cfg.Pools[0].H2MaxConnections = 1
			cfg.Listeners[0].ResponseTimeout = Duration(timeout)
			p := startProxy(t, cfg)
			c, base := h2Client(t, p)
			sent.Store(time.Now().UnixNano())
			slow := getAsync(c, base+"/slow")
			waitFor(t, "the slow stream at the server", func() bool { return serverTotals(p, up.addr).H2Streams == 1 })
			start := time.Now()
			resp, _ := do(t, c, mustReq(t, "GET", base+"/x", nil))
			if d := time.Since(start); resp.StatusCode != 504 || d < 950*time.Millisecond {
				t.Errorf("the stream waiting: %d after %v, want 504 after response_timeout", resp.StatusCode, d)
			}
			close(release)
			if got := <-slow; !strings.HasPrefix(got, "200 .") || !strings.HasSuffix(got, ".done") {
				select {
				case <-ended: // (its last write measured)
				case <-time.After(10 * time.Second):
					t.Fatal("the slow stream's handler still running 10s after its release")
				}
				fault = fmt.Sprintf("the stream in flight, a piece every 50ms: %q", got)
				if d := time.Duration(most.Load()); d >= timeout {
					return fault, fmt.Sprintf("%v passed from the request's sending or a write's start to the next write's end", d.Round(time.Millisecond))
				}
				return fault + fmt.Sprintf(" (%v at most from the request's sending or a write's start to the next write's end)", time.Duration(most.Load()).Round(time.Millisecond)), ""
			}
			if st := serverTotals(p, up.addr); st.H2Streams != 1 || st.Active != 0 || up.conns.Load() != 1 {
				t.Errorf("server totals %+v, %d connections", st, up.conns.Load())
			}
			return "", ""
		})
	})
}

// TestH2UpUploadBackpressure: a server that does not read a stream's
// body holds the client back by flow control through the proxy: the
// client gets to send the windows' worth (the server's 64 KiB, the
// proxy's 64 KiB stream window to the client) and its own buffers, not
// the 8 MiB; once the server reads, all of it arrives.
func TestH2UpUploadBackpressure(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		const size = 8 << 20
		release := make(chan struct{})
		up := newH2CUp(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			<-release
			n, _ := io.Copy(io.Discard, r.Body)
			fmt.Fprint(w, n)
		}), func(s *http.Server) {
			s.HTTP2 = &http.HTTP2Config{MaxReceiveBufferPerStream: 64 << 10, MaxReceiveBufferPerConnection: 64 << 10}
		})
		p := startProxy(t, h2cPoolConfig(b, up.addr))
		c, base := h2Client(t, p)
		c.Timeout = 2 * time.Minute
		var sent atomic.Int64
		req, _ := http.NewRequest("POST", base+"/", &countingReader{r: bytes.NewReader(make([]byte, size)), n: &sent})
		done := doAsync(c, req)
		s1, s2 := settled(sent.Load)
		t.Logf("with the server not reading, the client sent %d, then %d bytes", s1, s2)
		if s2 != s1 || s2 > 1<<20 {
			t.Errorf("with the server not reading, the client sent %d then %d bytes of %d: want it held by flow control", s1, s2, size)
		}
		close(release)
		if got := <-done; got != fmt.Sprint("200 ", size) {
			t.Errorf("the server read %s bytes, want %d", got, size)
		}
	})
}

// TestH2UpLargeUpload: a 16 MiB upload to a Go h2c server through an
// h2c pool, which credits its windows as it reads (WINDOW_UPDATEs every
// few DATA frames), arrives whole, twice over the same connection, though
// it takes longer than response_timeout (which counts from the body's
// last bytes): 16 pauses of 150ms against a timeout of 1s. A try where
// the process was kept from running for half the timeout (stallWatch: a
// loaded machine, the proxy's loops, the client and the server sharing
// it) may have been cut by that and is tried again (it was under two CPU
// hogs and -race, with no such check).
func TestH2UpLargeUpload(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		const size, timeout = 16 << 20, time.Second
		untilCalm(t, func() (fault, paused string) {
			up := newH2CUp(t, bodyCounted, nil)
			cfg := h2cPoolConfig(b, up.addr)
			cfg.Listeners[0].ResponseTimeout = Duration(timeout)
			p := startProxy(t, cfg)
			c, base := h2Client(t, p)
			c.Timeout = 2 * time.Minute
			stalls := stallWatch()
			for range 2 {
				req := mustReq(t, "POST", base+"/", &slowReader{r: bytes.NewReader(make([]byte, size)), every: 1 << 20, pause: 150 * time.Millisecond})
				if got := <-doAsync(c, req); got != fmt.Sprint("200 ", size) {
					fault = fmt.Sprintf("the server read %q, want %d", got, size)
					break
				}
			}
			if n := up.conns.Load(); fault == "" && n != 1 {
				fault = fmt.Sprintf("%d upstream connections, want 1", n)
			}
			if most := stalls(); fault != "" && most >= timeout/2 {
				paused = fmt.Sprintf("the process was kept from running for %v", most)
			}
			return fault, paused
		})
	})
}

// TestH2UpBodyBeforeSettings: a request whose client sent its stream's
// whole window of body while the upstream connection waited for the
// server's SETTINGS: the stream starts from the connection's side (the
// SETTINGS), sends the body held and returns the client's window; the
// WINDOW_UPDATE must reach the client then, not wait for the client's
// next frame (it has none: its window is spent). It waited, and the
// upload stalled until the stream's timer flushed the client's connection
// (at response_timeout: TestH2UpLargeUpload's 504 1 run in 8 on epoll).
func TestH2UpBodyBeforeSettings(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		const size = 1 << 20
		up := newH2CUp(t, bodyCounted, func(s *http.Server) {
			count := s.ConnState
			s.ConnState = func(c net.Conn, st http.ConnState) {
				if st == http.StateNew {
					time.Sleep(300 * time.Millisecond) // (the accept loop: the SETTINGS wait)
				}
				count(c, st)
			}
		})
		cfg := h2cPoolConfig(b, up.addr)
		cfg.Listeners[0].ResponseTimeout = Duration(10 * time.Second)
		p := startProxy(t, cfg)
		c, base := h2Client(t, p)
		c.Timeout = time.Minute
		req := mustReq(t, "POST", base+"/", bytes.NewReader(make([]byte, size)))
		t0 := time.Now()
		if got := <-doAsync(c, req); got != fmt.Sprint("200 ", size) {
			t.Fatalf("the server read %q, want %d", got, size)
		}
		// 300ms for the SETTINGS, then 1 MiB on loopback: the stall
		// lasted until the stream's timer (response_timeout, 10s) flushed.
		if d := time.Since(t0); d > 5*time.Second {
			t.Errorf("the upload took %v: it stalled after the first window", d)
		}
	})
}

// bodyCounted reads the request's body and answers how many bytes it read.
var bodyCounted = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	n, _ := io.Copy(io.Discard, r.Body)
	fmt.Fprint(w, n)
})

// slowReader reads r, pausing for pause after every every bytes.
type slowReader struct {
	r     io.Reader
	every int
	pause time.Duration
	n     int
}

func (s *slowReader) Read(p []byte) (int, error) {
	if s.n >= s.every {
		s.n = 0
		time.Sleep(s.pause)
	}
	n, err := s.r.Read(p[:min(len(p), s.every-s.n)])
	s.n += n
	return n, err
}

// TestH2UpSlowH1Client: an HTTP/1.1 client that does not read a 32 MiB
// response from an h2c pool holds the server back: the proxy stops
// returning the stream's window once the client's queue is full, so the
// server gets to write the socket buffers' and the queue's worth, not the
// response; once read, it arrives whole and chunked.
func TestH2UpSlowH1Client(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		const size = 32 << 20
		var written atomic.Int64
		up := newH2CUp(t, writesCounted(size, &written), nil)
		p := startProxy(t, h2cPoolConfig(b, up.addr))
		c := dial(t, p)
		c.SetReadBuffer(64 << 10)
		if _, err := c.Write([]byte("GET /big HTTP/1.1\r\nHost: x\r\n\r\n")); err != nil {
			t.Fatal(err)
		}
		s1, s2 := settled(written.Load)
		t.Logf("the server wrote %d, then %d bytes to a client that reads nothing", s1, s2)
		if s2 != s1 || s2 > size/4 {
			t.Errorf("the server wrote %d then %d bytes of %d to a client that reads nothing: want it held", s1, s2, size)
		}
		c.SetReadDeadline(time.Now().Add(time.Minute))
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatal(err)
		}
		n, err := io.Copy(io.Discard, resp.Body)
		if err != nil || n != size || fmt.Sprint(resp.TransferEncoding) != "[chunked]" {
			t.Fatalf("read %d, %v, %v; want %d chunked", n, err, resp.TransferEncoding, size)
		}
	})
}

// TestH2UpGoAwayInFlight: a server's graceful GOAWAY with a stream in
// flight on the pool's only allowed connection (h2_max_connections 1)
// takes that connection out of the count: the next stream gets a new
// connection at once rather than waiting for the old one's last stream;
// both are answered.
func TestH2UpGoAwayInFlight(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		var first atomic.Bool
		first.Store(true)
		up := newUpstream(t, rawH2Up("hold", &first))
		cfg := h2cPoolConfig(b, up.addr)
		cfg.Pools[0].H2MaxConnections = 1
		p := startProxy(t, cfg)
		c, base := h2Client(t, p)
		held := getAsync(c, base+"/held")
		waitFor(t, "the GOAWAY", func() bool { return serverTotals(p, up.addr).H2GoAways == 1 })
		start := time.Now()
		resp, body := do(t, c, mustReq(t, "GET", base+"/next", nil))
		if d := time.Since(start); resp.StatusCode != 200 || string(body) != "ok" || d > 300*time.Millisecond {
			t.Errorf("the stream after the GOAWAY: %d %q after %v, want 200 at once", resp.StatusCode, body, d)
		}
		if got := <-held; got != "200 ok" {
			t.Errorf("the stream the GOAWAY named: %q", got)
		}
		if n := up.accepted.Load(); n != 2 {
			t.Errorf("%d connections, want 2", n)
		}
	})
}

// TestH2UpLeastConn: least-conn counts an h2c pool's streams in flight,
// not its connections: with a slow stream in flight on one server, the
// next streams (one at a time) all go to the other.
func TestH2UpLeastConn(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		release := make(chan struct{})
		u1, u2 := newH2CUp(t, slowProto("u1", release), nil), newH2CUp(t, slowProto("u2", release), nil)
		cfg := h2cPoolConfig(b, u1.addr, u2.addr)
		cfg.Pools[0].Balance = LeastConn
		p := startProxy(t, cfg)
		c, base := h2Client(t, p)
		slow := getAsync(c, base+"/slow")
		waitFor(t, "the slow stream at a server", func() bool {
			return serverTotals(p, u1.addr).H2Streams+serverTotals(p, u2.addr).H2Streams == 1
		})
		other := "u2"
		if serverTotals(p, u2.addr).H2Streams == 1 {
			other = "u1"
		}
		for range 4 {
			if _, body := get(t, c, base+"/x"); body != other+" HTTP/2.0" {
				t.Errorf("a stream beside the slow one answered %q, want %s", body, other)
			}
		}
		close(release)
		<-slow
	})
}

// writesCounted answers size bytes without content-length, in writes of
// 16 KiB, counting in written what the handler got to write.
func writesCounted(size int, written *atomic.Int64) http.HandlerFunc {
	chunk := bytes.Repeat([]byte("x"), 16<<10)
	return func(w http.ResponseWriter, r *http.Request) {
		for range size / len(chunk) {
			n, err := w.Write(chunk)
			written.Add(int64(n))
			if err != nil {
				return
			}
		}
	}
}
