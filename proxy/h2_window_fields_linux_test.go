package proxy

import (
	"bytes"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/spindlenet/spindle/engine"
	"github.com/spindlenet/spindle/internal/h2"
	"github.com/spindlenet/spindle/internal/hpack"
)

// rawH2Get opens a raw HTTP/2 connection to p with the given initial
// window and sends a GET for path on stream 1, with the fields extra.
func rawH2Get(t *testing.T, p *Proxy, window uint32, path string, extra ...hpack.Field) *rawH2 {
	t.Helper()
	c := dial(t, p)
	enc := hpack.NewEncoder()
	block := enc.StartBlock(nil)
	for _, f := range [][2]string{{":method", "GET"}, {":scheme", "http"}, {":authority", "x"}, {":path", path}} {
		block = enc.AppendField(block, hpack.Field{Name: []byte(f[0]), Value: []byte(f[1])})
	}
	for _, f := range extra {
		block = enc.AppendField(block, f)
	}
	out := append([]byte(h2.ClientPreface), h2.AppendSettings(nil, []h2.Setting{{ID: h2.SettingInitialWindowSize, Val: window}})...)
	out = h2.AppendHeaders(out, 1, block, true, h2.MinMaxFrameSize)
	if _, err := c.Write(out); err != nil {
		t.Fatal(err)
	}
	return &rawH2{t: t, c: c, tmp: make([]byte, 64<<10)}
}

// rawH2 reads the frames of a raw HTTP/2 connection.
type rawH2 struct {
	t   *testing.T
	c   interface{ Read([]byte) (int, error) }
	buf []byte
	tmp []byte
}

// next returns the next frame (its Data valid until the next call).
func (r *rawH2) next() (h2.Frame, error) {
	for {
		f, k, err := h2.ParseFrame(r.buf, h2.MaxMaxFrameSize)
		if err != nil {
			r.t.Fatal(err)
		}
		if k > 0 {
			r.buf = r.buf[k:]
			return f, nil
		}
		n, err := r.c.Read(r.tmp)
		if err != nil {
			return h2.Frame{}, err
		}
		r.buf = append(r.buf[:len(r.buf):len(r.buf)], r.tmp[:n]...)
	}
}

// TestH2WindowStall: a client that reads everything the proxy writes but
// never opens its windows (no WINDOW_UPDATE) holds a response's upstream
// as a client that stops reading would hold an HTTP/1.1 one: for
// write_timeout, not for good. The stream is reset (the proxy's doing),
// its server connection closed, not pooled, and its line says the client
// timed out (CT; it said CD, the client's reset or close).
func TestH2WindowStall(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		const size = 8 << 20
		served := make(chan error, 1)
		u := newHTTPUpstream(t, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Length", fmt.Sprint(size))
			_, err := w.Write(make([]byte, size))
			served <- err
		})
		cfg := h2cConfig(b, u.addr)
		cfg.Engine.WriteTimeout = Duration(300 * time.Millisecond)
		cfg.Listeners[0].ResponseTimeout = Duration(time.Minute)
		path := filepath.Join(t.TempDir(), "access.log")
		cfg.Listeners[0].AccessLog = &AccessLogConfig{Path: path}
		p := startProxy(t, cfg)
		r := rawH2Get(t, p, 65535, "/")
		r.c.(interface{ SetReadDeadline(time.Time) error }).SetReadDeadline(time.Now().Add(15 * time.Second))
		data := 0
		for {
			f, err := r.next()
			if err != nil {
				t.Fatalf("after %d bytes of data, no reset of the stalled stream: %v", data, err)
			}
			if f.Type == h2.FrameData && f.StreamID == 1 {
				data += len(f.Data)
			}
			if f.Type == h2.FrameRSTStream && f.StreamID == 1 {
				break
			}
		}
		if data > 65535 {
			t.Errorf("%d bytes of data past a window of 65535", data)
		}
		waitFor(t, "the server connection to be let go", func() bool {
			st := serverTotals(p, u.addr)
			return st.Active == 0 && st.Idle == 0
		})
		if n := p.Totals().Listeners[0].H2ResetsProxy; n != 1 {
			t.Errorf("%d streams reset by the proxy, want 1", n)
		}
		select {
		case err := <-served:
			if err == nil {
				t.Error("the server wrote the whole response to a stream whose window never opened")
			}
		case <-time.After(10 * time.Second):
			t.Error("the server's connection was not closed")
		}
		checkFields(t, waitLine(t, path, "the stream's line", func(map[string]any) bool { return true }), map[string]string{"term": "CT"})
	})
}

// capture is an upstream that keeps what it reads and never answers.
type capture struct {
	mu  sync.Mutex
	got []byte
}

func (c *capture) serve(conn net.Conn) {
	buf := make([]byte, 4096)
	for {
		n, err := conn.Read(buf)
		c.mu.Lock()
		c.got = append(c.got, buf[:n]...)
		c.mu.Unlock()
		if err != nil {
			return
		}
	}
}

func (c *capture) bytes() []byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]byte(nil), c.got...)
}

// TestH2FieldsNotH1: a field HTTP/2 lets through but HTTP/1.1 does not
// carry (a name that is not a token, a value with a control character
// other than HTAB: internal/h1 refuses both in what it parses) is not
// written to a server: in the request's head the stream gets 400 and no
// server sees it; in its trailers the stream is reset.
func TestH2FieldsNotH1(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		u := newHTTPUpstream(t, func(w http.ResponseWriter, r *http.Request) {})
		p := startProxy(t, h2cConfig(b, u.addr))
		base := [][2]string{{":method", "GET"}, {":scheme", "http"}, {":authority", "x"}, {":path", "/"}}
		// A name that is not a token is malformed to internal/h2 itself
		// (its stream reset); a value with a control character h2 lets
		// through is the proxy's 400.
		for _, f := range [][2]string{{"x(y", "1"}, {"a/b", "1"}} {
			if s := rawH2Status(t, p, append(base, f)); s != "RST_STREAM PROTOCOL_ERROR" {
				t.Errorf("%q: %s, want RST_STREAM PROTOCOL_ERROR", f, s)
			}
		}
		for _, f := range [][2]string{{"x-v", "a\x01b"}, {"x-v", "a\x7fb"}, {"x-v", "a\x0bb"}} {
			if s := rawH2Status(t, p, append(base, f)); s != "400" {
				t.Errorf("%q: %s, want 400", f, s)
			}
		}
		if n := serverTotals(p, u.addr).Requests; n != 0 {
			t.Errorf("%d requests reached the server, want 0", n)
		}

		cp := &capture{}
		cu := newUpstream(t, cp.serve)
		p = startProxy(t, h2cConfig(b, cu.addr))
		for _, f := range [][2]string{{"x(y", "1"}, {"x-t", "a\x01b"}} {
			c := dial(t, p)
			enc := hpack.NewEncoder()
			block := enc.StartBlock(nil)
			for _, f := range [][2]string{{":method", "POST"}, {":scheme", "http"}, {":authority", "x"}, {":path", "/"}} {
				block = enc.AppendField(block, hpack.Field{Name: []byte(f[0]), Value: []byte(f[1])})
			}
			out := append([]byte(h2.ClientPreface), h2.AppendSettings(nil, nil)...)
			out = h2.AppendHeaders(out, 1, block, false, h2.MinMaxFrameSize)
			out = h2.AppendData(out, 1, []byte("abc"), false)
			trl := enc.AppendField(enc.StartBlock(nil), hpack.Field{Name: []byte(f[0]), Value: []byte(f[1])})
			out = h2.AppendHeaders(out, 1, trl, true, h2.MinMaxFrameSize)
			if _, err := c.Write(out); err != nil {
				t.Fatal(err)
			}
			c.SetReadDeadline(time.Now().Add(5 * time.Second))
			r := &rawH2{t: t, c: c, tmp: make([]byte, 16<<10)}
			for {
				fr, err := r.next()
				if err != nil {
					t.Errorf("trailer %q: no reset: %v", f, err)
					break
				}
				if fr.Type == h2.FrameRSTStream && fr.StreamID == 1 {
					break
				}
			}
			c.Close()
			if got := cp.bytes(); bytes.Contains(got, []byte(f[0]+": ")) {
				t.Errorf("trailer %q reached the server: %q", f, got)
			}
		}
	})
}

// TestH2PathNotH1: a :path that is no HTTP/1.1 request target (a
// fragment, a '%' not followed by two hex digits, a byte past ASCII: an
// HTTP/1.1 client's such target is 400, internal/h1 refusing it) gets 400
// and reaches no server.
func TestH2PathNotH1(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		u := newHTTPUpstream(t, func(w http.ResponseWriter, r *http.Request) {})
		p := startProxy(t, h2cConfig(b, u.addr))
		for _, path := range []string{"/a#b", "/%zz", "/a%2", "/\x80", "/\xff"} {
			fs := [][2]string{{":method", "GET"}, {":scheme", "http"}, {":authority", "x"}, {":path", path}}
			if s := rawH2Status(t, p, fs); s != "400" {
				t.Errorf("%q: %s, want 400", path, s)
			}
		}
		if n := serverTotals(p, u.addr).Requests; n != 0 {
			t.Errorf("%d requests reached the server, want 0", n)
		}
		fs := [][2]string{{":method", "GET"}, {":scheme", "http"}, {":authority", "x"}, {":path", "/a%2Fb?q=%41&r=~!$'()*+,;=:@"}}
		if s := rawH2Status(t, p, fs); s != "200" {
			t.Errorf("a valid target: %s, want 200", s)
		}
	})
}

// TestH2AuthorityNotH1: an :authority (or host) that is no HTTP/1.1 Host
// (a port not all digits, two ports, a stray bracket, percent-encoding,
// no host: an HTTP/1.1 client's such Host is 400, internal/h1 refusing
// it) gets 400 and reaches no server.
func TestH2AuthorityNotH1(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		u := newHTTPUpstream(t, func(w http.ResponseWriter, r *http.Request) {})
		p := startProxy(t, h2cConfig(b, u.addr))
		for _, a := range []string{"x:y", "x:1:2", "[x", "x]", "%41", ":80", "[::1]x"} {
			for _, name := range []string{":authority", "host"} {
				fs := [][2]string{{":method", "GET"}, {":scheme", "http"}, {":path", "/"}, {name, a}}
				if s := rawH2Status(t, p, fs); s != "400" {
					t.Errorf("%s %q: %s, want 400", name, a, s)
				}
			}
		}
		if n := serverTotals(p, u.addr).Requests; n != 0 {
			t.Errorf("%d requests reached the server, want 0", n)
		}
		for _, a := range []string{"x", "x:8080", "[::1]:80", "a-b.c_d~!$&'()*+,;="} {
			fs := [][2]string{{":method", "GET"}, {":scheme", "http"}, {":authority", a}, {":path", "/"}}
			if s := rawH2Status(t, p, fs); s != "200" {
				t.Errorf("%q: %s, want 200", a, s)
			}
		}
	})
}
