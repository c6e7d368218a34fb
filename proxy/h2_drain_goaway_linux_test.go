package proxy

import (
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/spindlenet/spindle/engine"
	"github.com/spindlenet/spindle/internal/h2"
	"github.com/spindlenet/spindle/internal/hpack"
)

// drainStarted opens a raw HTTP/2 client to a proxy run for cfg with a
// 10 s drain (longer than goAwayWait), makes sure the proxy took it (a
// PING answered), stops the proxy in the background, and returns the
// client once it has read the first GOAWAY of the drain, which must name
// 2^31-1 with NO_ERROR, and the PING after it, whose data it returns;
// done gets Run's result.
func drainStarted(t *testing.T, cfg *Config) (r *rawH2Conn, ping [8]byte, done chan error) {
	t.Helper()
	p, err := New(cfg, &Options{Drain: 10 * time.Second, Logf: func(string, ...any) {}})
	if err != nil {
		t.Fatal(err)
	}
	stop := run(p)
	t.Cleanup(func() { stop() })
	r = openRawH2(t, p)
	r.w(h2.AppendPing(nil, [8]byte{1}, false))
	for {
		f, err := r.next()
		if err != nil {
			t.Fatalf("no PING ACK: %v", err)
		}
		if f.Type == h2.FramePing && f.Flags.Has(h2.FlagAck) {
			break
		}
	}
	done = make(chan error, 1)
	go func() { done <- stop() }()
	f := r.until(h2.FrameGoAway)
	if f.LastStream != h2.MaxWindow || f.Code != h2.NoError {
		t.Fatalf("first GOAWAY of the drain: last stream %d %v, want 2147483647 NO_ERROR", f.LastStream, f.Code)
	}
	f = r.until(h2.FramePing)
	if f.Flags.Has(h2.FlagAck) {
		t.Fatal("a PING ACK after the first GOAWAY, want a PING")
	}
	return r, [8]byte(f.Data), done
}

// until reads frames until one of type typ, which it returns.
func (r *rawH2Conn) until(typ h2.FrameType) h2.Frame {
	r.t.Helper()
	for {
		f, err := r.next()
		if err != nil {
			r.t.Fatalf("no %v frame: %v", typ, err)
		}
		if f.Type == typ {
			return f
		}
	}
}

// closed fails the test unless the proxy closes the connection with no
// frame but GOAWAY.
func (r *rawH2Conn) closed() {
	r.t.Helper()
	for {
		f, err := r.next()
		if err == io.EOF {
			return
		}
		if err != nil || f.Type != h2.FrameGoAway {
			r.t.Fatalf("%v frame, error %v; want the connection closed", f.Type, err)
		}
	}
}

// TestH2DrainServesRequestAfterFirstGoAway: a drain's first GOAWAY names
// 2^31-1 (RFC 9113 6.8), so a request the client sends before it sees it
// (here: after, as its earlier send would arrive) is served, not left
// unprocessed; the client's ACK of the PING that follows brings the
// final GOAWAY, naming that request's stream, and the close.
func TestH2DrainServesRequestAfterFirstGoAway(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		u := newHTTPUpstream(t, func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "u") })
		r, ping, done := drainStarted(t, h2cConfig(b, u.addr))
		r.w(r.headers(1, true, [2]string{":method", "GET"}, [2]string{":scheme", "http"}, [2]string{":authority", "x"}, [2]string{":path", "/"}))
		dec := hpack.NewDecoder(4096, 64<<10)
		status, body := "", ""
		for end := false; !end; {
			f, err := r.untilStream(1)
			switch {
			case err != nil:
				t.Fatalf("the request after the first GOAWAY: %v", err)
			case f.Type == h2.FrameGoAway:
				t.Fatalf("GOAWAY last stream %d %v before the response", f.LastStream, f.Code)
			case f.Type == h2.FrameHeaders:
				dec.Decode(f.Data, func(x hpack.Field) error {
					if string(x.Name) == ":status" {
						status = string(x.Value)
					}
					return nil
				})
			case f.Type == h2.FrameData:
				body += string(f.Data)
			case f.Type == h2.FrameRSTStream:
				t.Fatalf("the request after the first GOAWAY reset: %v", f.Code)
			}
			end = f.Flags.Has(h2.FlagEndStream)
		}
		if status != "200" || body != "u" {
			t.Fatalf("the request after the first GOAWAY: %s %q, want 200 \"u\"", status, body)
		}
		r.w(h2.AppendPing(nil, ping, true))
		if f := r.until(h2.FrameGoAway); f.LastStream != 1 || f.Code != h2.NoError {
			t.Fatalf("final GOAWAY: last stream %d %v, want 1 NO_ERROR", f.LastStream, f.Code)
		}
		r.closed()
		runEnds(t, done, "the client was closed")
	})
}

// TestH2DrainPingUnanswered: a client that never answers the PING after
// a drain's first GOAWAY gets the final one all the same (after
// goAwayWait), naming no stream, and is closed; the drain ends.
func TestH2DrainPingUnanswered(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		u := newHTTPUpstream(t, func(w http.ResponseWriter, r *http.Request) {})
		r, _, done := drainStarted(t, h2cConfig(b, u.addr))
		if f := r.until(h2.FrameGoAway); f.LastStream != 0 || f.Code != h2.NoError {
			t.Fatalf("final GOAWAY: last stream %d %v, want 0 NO_ERROR", f.LastStream, f.Code)
		}
		r.closed()
		runEnds(t, done, "the client was closed")
	})
}
