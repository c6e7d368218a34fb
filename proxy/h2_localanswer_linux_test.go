package proxy

import (
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/spindlenet/spindle/engine"
	"github.com/spindlenet/spindle/internal/h2"
	"github.com/spindlenet/spindle/internal/hpack"
)

// rawH2Conn is a raw HTTP/2 client connection to p's listener "web":
// the preface and SETTINGS sent, its frames read with next.
type rawH2Conn struct {
	*rawH2
	conn *net.TCPConn
	enc  *hpack.Encoder
	w    func([]byte)
}

func openRawH2(t *testing.T, p *Proxy) *rawH2Conn {
	t.Helper()
	c := dial(t, p)
	c.SetDeadline(time.Now().Add(60 * time.Second))
	w := func(b []byte) {
		if _, err := c.Write(b); err != nil {
			t.Fatal(err)
		}
	}
	w(append([]byte(h2.ClientPreface), h2.AppendSettings(nil, nil)...))
	return &rawH2Conn{rawH2: &rawH2{t: t, c: c, tmp: make([]byte, 16<<10)}, conn: c, enc: hpack.NewEncoder(), w: w}
}

// headers returns HEADERS (END_STREAM as end) of a request on stream id
// with the given fields, pseudo ones first.
func (r *rawH2Conn) headers(id uint32, end bool, fields ...[2]string) []byte {
	b := r.enc.StartBlock(nil)
	for _, f := range fields {
		b = r.enc.AppendField(b, hpack.Field{Name: []byte(f[0]), Value: []byte(f[1])})
	}
	return h2.AppendHeaders(nil, id, b, end, h2.MinMaxFrameSize)
}

// untilStream reads frames until one on stream id or a GOAWAY, which it
// returns.
func (r *rawH2Conn) untilStream(id uint32) (h2.Frame, error) {
	for {
		f, err := r.next()
		if err != nil || f.StreamID == id || f.Type == h2.FrameGoAway {
			return f, err
		}
	}
}

// TestH2RapidResetBetweenLocalAnswers: a client that puts a request the
// proxy answers itself at no cost (400 for a dot-segment) between rapid
// resets (each a request that reached the server, reset before any
// response) is bounded by the early-reset limit (200) as one that only
// resets is: before, each answered stream gave an early reset back, the
// count stayed level and every reset request went on reaching the server.
func TestH2RapidResetBetweenLocalAnswers(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		got := make(chan struct{}, 1000)
		u := newHTTPUpstream(t, func(w http.ResponseWriter, r *http.Request) {
			got <- struct{}{}
			<-r.Context().Done() // no response: the proxy resets the connection
		})
		p := startProxy(t, h2cConfig(b, u.addr))
		r := openRawH2(t, p)
		const rounds = 400
		for i := range rounds {
			id := uint32(4*i + 1)
			r.w(r.headers(id, true, [2]string{":method", "GET"}, [2]string{":scheme", "http"}, [2]string{":authority", "x"}, [2]string{":path", "/work"}))
			select {
			case <-got:
			case <-time.After(10 * time.Second):
				t.Fatalf("round %d: the request did not reach the server", i)
			}
			out := h2.AppendRSTStream(nil, id, h2.Cancel)
			out = append(out, r.headers(id+2, true, [2]string{":method", "GET"}, [2]string{":scheme", "http"}, [2]string{":authority", "x"}, [2]string{":path", "/a/../b"})...)
			r.w(out)
			f, err := r.untilStream(id + 2)
			if err != nil {
				t.Fatalf("round %d: %v", i, err)
			}
			if f.Type == h2.FrameGoAway {
				if f.Code != h2.EnhanceYourCalm || i != h2.DefaultMaxEarlyResets {
					t.Fatalf("round %d: GOAWAY %v, want ENHANCE_YOUR_CALM at round %d", i, f.Code, h2.DefaultMaxEarlyResets)
				}
				return // bounded at the limit
			}
		}
		t.Errorf("%d requests reset before any response reached the server on one connection, no GOAWAY ENHANCE_YOUR_CALM (limit %d)", rounds, h2.DefaultMaxEarlyResets)
	})
}

// TestH2TrailerResetsBounded: a request whose trailers HTTP/1.1 cannot
// carry is reset by the proxy (PROTOCOL_ERROR) once its head reached the
// server: a stream error of the client's, counted under the early-reset
// limit (200) as internal/h2's own are. Before, such a reset was not
// counted, and a client repeating a request with a bad trailer made the
// proxy open a server connection and send it a head for each, without
// bound, as rapid resets did before their limit.
func TestH2TrailerResetsBounded(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		got := make(chan struct{}, 1000)
		u := newHTTPUpstream(t, func(w http.ResponseWriter, r *http.Request) {
			got <- struct{}{}
			io.Copy(io.Discard, r.Body) // until the proxy resets the connection
		})
		p := startProxy(t, h2cConfig(b, u.addr))
		r := openRawH2(t, p)
		const rounds = 400
		for i := range rounds {
			id := uint32(2*i + 1)
			r.w(r.headers(id, false, [2]string{":method", "POST"}, [2]string{":scheme", "http"}, [2]string{":authority", "x"}, [2]string{":path", "/work"}))
			select {
			case <-got:
			case <-time.After(10 * time.Second):
				f, err := r.untilStream(id)
				t.Fatalf("round %d: the request did not reach the server (%v %v %v)", i, f.Type, f.Code, err)
			}
			r.w(r.headers(id, true, [2]string{"x-t", "a\x01b"}))
			f, err := r.untilStream(id)
			if err != nil || f.Type != h2.FrameRSTStream || f.Code != h2.ProtocolError {
				t.Fatalf("round %d: %v %v %v, want RST_STREAM PROTOCOL_ERROR", i, f.Type, f.Code, err)
			}
			if i == h2.DefaultMaxEarlyResets {
				// One past the limit: the connection ends.
				r.conn.SetReadDeadline(time.Now().Add(2 * time.Second))
				f, err := r.untilStream(0)
				if err != nil || f.Type != h2.FrameGoAway || f.Code != h2.EnhanceYourCalm {
					t.Fatalf("reset %d, past the limit of %d: %v %v %v, want GOAWAY ENHANCE_YOUR_CALM", i+1, h2.DefaultMaxEarlyResets, f.Type, f.Code, err)
				}
				return
			}
		}
		t.Errorf("%d requests reset for their trailers after reaching the server on one connection, no GOAWAY ENHANCE_YOUR_CALM (limit %d)", rounds, h2.DefaultMaxEarlyResets)
	})
}

// TestH2LocalAnswerWaitsForWindow: the proxy's own answer (400 for a
// dot-segment here) whose body the client's stream window does not take
// whole is sent on as the window opens, and ends the stream. Before, the
// rest of the body was dropped: the client had part of it and a stream
// that never ended, which held one of its MAX_CONCURRENT_STREAMS for the
// connection's life.
func TestH2LocalAnswerWaitsForWindow(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		u := newHTTPUpstream(t, func(w http.ResponseWriter, r *http.Request) {})
		cfg := h2cConfig(b, u.addr)
		cfg.Engine.WriteTimeout = Duration(300 * time.Millisecond)
		p := startProxy(t, cfg)
		// answer sends a request the proxy answers 400 with a stream
		// window of 4 bytes, opens it once 4 bytes came where credit,
		// and returns the body's length and the stream's last frame.
		answer := func(credit bool) (int, h2.Frame) {
			c := dial(t, p)
			enc := hpack.NewEncoder()
			block := enc.StartBlock(nil)
			for _, f := range [][2]string{{":method", "GET"}, {":scheme", "http"}, {":authority", "x"}, {":path", "/a/../b"}} {
				block = enc.AppendField(block, hpack.Field{Name: []byte(f[0]), Value: []byte(f[1])})
			}
			out := append([]byte(h2.ClientPreface), h2.AppendSettings(nil, []h2.Setting{{ID: h2.SettingInitialWindowSize, Val: 4}})...)
			out = h2.AppendHeaders(out, 1, block, true, h2.MinMaxFrameSize)
			if _, err := c.Write(out); err != nil {
				t.Fatal(err)
			}
			r := &rawH2{t: t, c: c, tmp: make([]byte, 16<<10)}
			c.SetReadDeadline(time.Now().Add(5 * time.Second))
			body := 0
			for {
				f, err := r.next()
				if err != nil {
					t.Fatalf("after %d bytes of the body: %v", body, err)
				}
				if f.Type == h2.FrameRSTStream || f.Type == h2.FrameGoAway {
					return body, f
				}
				if f.Type != h2.FrameData || f.StreamID != 1 {
					continue
				}
				body += len(f.Data)
				if f.Flags.Has(h2.FlagEndStream) {
					return body, f
				}
				if body == 4 && credit {
					c.Write(h2.AppendWindowUpdate(nil, 1, 1<<20))
				}
			}
		}
		if n, f := answer(true); n != len(localBody(400)) || !f.Flags.Has(h2.FlagEndStream) {
			t.Errorf("%d bytes of the body, then %v %v; want %d and END_STREAM", n, f.Type, f.Code, len(localBody(400)))
		}
		// A window that never opens: reset past write_timeout.
		if n, f := answer(false); n != 4 || f.Type != h2.FrameRSTStream || f.Code != h2.Cancel {
			t.Errorf("%d bytes of the body, then %v %v; want 4 and RST_STREAM CANCEL", n, f.Type, f.Code)
		}
	})
}
