package proxy

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/spindlenet/spindle/engine"
	"github.com/spindlenet/spindle/internal/h2"
	"github.com/spindlenet/spindle/internal/hpack"
)

// respTrailerFields are the trailer fields respTrailers sends: X-Sum and
// Grpc-Status pass; X-L and X_L (the listener's response_headers remove
// X-L), X-R (the route's remove) and X-S (the route's set) go as the
// head's would; Set-Cookie, Via and the response controls and content
// format fields RFC 9110 6.5.1 keeps out of trailers are dropped.
var respTrailerFields = map[string]string{
	"X-Sum": "abc", "Grpc-Status": "0",
	"X-L": "l", "X_L": "l", "X-R": "r", "X-S": "s",
	"Set-Cookie": "s=1", "Via": "1.1 evil", "Age": "1", "Expires": "0",
	"Location": "/evil", "Vary": "*", "Retry-After": "1",
	"Content-Language": "de", "Content-Location": "/evil",
}

// respTrailersH1 are trailer fields respTrailers sends over HTTP/1.1
// only (Go's HTTP/2 server leaves them out, and HTTP/2 refuses the
// connection-specific ones): all dropped.
var respTrailersH1 = map[string]string{
	"Cache-Control": "no-store", "Content-Type": "text/evil", "Content-Encoding": "gzip",
	"Www-Authenticate": "Basic", "Proxy-Authenticate": "Basic", "Pragma": "no-cache",
	"Connection": "x-a", "Keep-Alive": "timeout=1", "Proxy-Connection": "close",
	"Te": "trailers", "Upgrade": "h2c", "Trailer": "X-Sum", "Http2-Settings": "AAAA",
	"Set_Cookie": "s=1",
}

// respTrailersKept are the trailer fields a client gets of respTrailers'.
const respTrailersKept = "Grpc-Status,X-Sum"

// respTrailers answers "hello" (chunked, over HTTP/1.1) with the
// respTrailerFields (and respTrailersH1 to an HTTP/1.1 request) as
// trailers.
func respTrailers(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Trailer", "X-Sum")
	io.WriteString(w, "hello")
	w.(http.Flusher).Flush()
	h := w.Header()
	for k, v := range respTrailerFields {
		h[http.TrailerPrefix+k] = []string{v}
	}
	if r.ProtoMajor == 1 {
		for k, v := range respTrailersH1 {
			h[http.TrailerPrefix+k] = []string{v}
		}
	}
}

// trailerKeys returns the names of h's fields with a value, sorted and
// joined by commas.
func trailerKeys(h http.Header) string {
	var names []string
	for k, v := range h {
		if len(v) > 0 {
			names = append(names, k)
		}
	}
	slices.Sort(names)
	return strings.Join(names, ",")
}

// withRespRules gives cfg's listener response_headers removing X-L and
// a route for every request removing X-R and setting X-S: rule.
func withRespRules(cfg *Config) *Config {
	cfg.Listeners[0].ResponseHeaders = HeaderRules{Remove: []string{"X-L"}}
	cfg.Listeners[0].Routes = []RouteConfig{{PathPrefix: "/", Pool: cfg.Pools[0].Name,
		ResponseHeaders: HeaderRules{Remove: []string{"X-R"}, Set: map[string]string{"X-S": "rule"}}}}
	return cfg
}

// TestResponseTrailersFiltered: a response's trailers reach the client
// without the fields the listener's and the route's response_headers
// remove or set (the set's value is not added to them, as a request's
// trailers get none) and those RFC 9110 6.5.1 keeps out of a trailer,
// for each client (HTTP/1.1, HTTP/2) and pool protocol (http1's chunked
// trailer section, h2c's trailing HEADERS) pair; the head keeps the
// rule's X-S.
func TestResponseTrailersFiltered(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		eachPool(t, respTrailers, func(protocol, server string) {
			cfg := h2cConfig(b, server)
			cfg.Pools[0].Protocol = protocol
			p := startProxy(t, withRespRules(cfg))
			h1c, base := client(t, p)
			h2c, _ := h2Client(t, p)
			for _, c := range []*http.Client{h1c, h2c} {
				for range 2 { // (the second on a kept-alive connection)
					resp, err := c.Get(base + "/")
					if err != nil {
						t.Fatal(err)
					}
					body, err := io.ReadAll(resp.Body)
					resp.Body.Close()
					if err != nil {
						t.Fatalf("HTTP/%d from %s: %v", resp.ProtoMajor, protocol, err)
					}
					if string(body) != "hello" || resp.Header.Get("X-S") != "rule" {
						t.Errorf("HTTP/%d from %s: %q, X-S %q, want \"hello\", \"rule\"", resp.ProtoMajor, protocol, body, resp.Header.Get("X-S"))
					}
					if got := trailerKeys(resp.Trailer); got != respTrailersKept {
						t.Errorf("HTTP/%d from %s: trailers %s (%v), want %s", resp.ProtoMajor, protocol, got, resp.Trailer, respTrailersKept)
					}
					if v := resp.Trailer.Get("X-Sum"); v != "abc" {
						t.Errorf("HTTP/%d from %s: X-Sum %q, want abc", resp.ProtoMajor, protocol, v)
					}
				}
			}
		})
	})
}

// trickledRespTrailers is the trailer section the trickling server of
// TestResponseTrailersTrickled sends, a byte a write.
const trickledRespTrailers = "X-Sum: abc\r\nSet-Cookie: s=1\r\nCache_Control: no-store\r\nGrpc-Status: 0\r\nVia: 1.1 evil\r\n"

// TestResponseTrailersTrickled: an HTTP/1.1 server's chunked response
// sent a byte a write, its trailer section too, reaches an HTTP/1.1
// client (the section held to the body's end and filtered) and an
// HTTP/2 client with the trailers kept alone, and a second response on
// the same connections after it (without trailers) goes as it came.
func TestResponseTrailersTrickled(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		up := newUpstream(t, func(c net.Conn) {
			br := bufio.NewReader(c)
			for {
				req, err := http.ReadRequest(br)
				if err != nil {
					return
				}
				io.Copy(io.Discard, req.Body)
				resp := "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTrailer: X-Sum\r\n\r\n5\r\nhello\r\n0\r\n" + trickledRespTrailers + "\r\n"
				if req.URL.Path == "/plain" {
					resp = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n"
				}
				for i := range len(resp) {
					if _, err := io.WriteString(c, resp[i:i+1]); err != nil {
						return
					}
					if req.URL.Path != "/plain" {
						time.Sleep(200 * time.Microsecond)
					}
				}
			}
		})
		p := startProxy(t, h2cConfig(b, up.addr))
		h1c, base := client(t, p)
		h2c, _ := h2Client(t, p)
		for _, c := range []*http.Client{h1c, h2c} {
			for _, tc := range []struct{ path, body, trailers string }{
				{"/", "hello", respTrailersKept}, {"/plain", "abc", ""}, {"/", "hello", respTrailersKept},
			} {
				resp, err := c.Get(base + tc.path)
				if err != nil {
					t.Fatal(err)
				}
				body, err := io.ReadAll(resp.Body)
				resp.Body.Close()
				if err != nil {
					t.Fatalf("HTTP/%d %s: %v", resp.ProtoMajor, tc.path, err)
				}
				if got := trailerKeys(resp.Trailer); string(body) != tc.body || got != tc.trailers {
					t.Errorf("HTTP/%d %s: %q, trailers %s, want %q, %s", resp.ProtoMajor, tc.path, body, got, tc.body, tc.trailers)
				}
			}
		}
	})
}

// TestRequestTrailersCountAliases: the forwarding fields spelled with
// another separator that a request's trailer section loses are counted
// in spindle_proxy_listener_underscore_dropped_total as a head's are
// (X_Forwarded_For, X.Real.IP: 2 a request; X-Forwarded-For under its
// own name is not, as in a head), for each client and pool protocol
// pair.
func TestRequestTrailersCountAliases(t *testing.T) {
	trailer := http.Header{
		"X-Forwarded-For": {"1.2.3.4"},
		"X_Forwarded_For": {"1.2.3.4"},
		"X.Real.IP":       {"1.2.3.4"},
		"X-Sum":           {"abc"},
	}
	forBackends(t, func(t *testing.T, b engine.Backend) {
		eachPool(t, trailerNames, func(protocol, server string) {
			cfg := h2cConfig(b, server)
			cfg.Pools[0].Protocol = protocol
			p := startProxy(t, cfg)
			h1c, base := client(t, p)
			h2c, _ := h2Client(t, p)
			for _, c := range []*http.Client{h1c, h2c} {
				before := p.Totals().Listeners[0].UnderscoreDropped
				if major, code, body := postTrailers(t, c, base, trailer); code != 200 || body != "5 X-Sum" {
					t.Errorf("HTTP/%d to %s: %d %q, want 200 %q", major, protocol, code, body, "5 X-Sum")
				}
				if d := p.Totals().Listeners[0].UnderscoreDropped - before; d != 2 {
					t.Errorf("to %s: %d counted, want 2", protocol, d)
				}
			}
		})
	})
}

// TestResponseTrailersHeld: an h2c server's trailers that arrive while
// the response's DATA waits for an HTTP/2 client's window (held behind
// it) reach the client filtered as those passed at once do.
func TestResponseTrailersHeld(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		up := newH2CUp(t, http.HandlerFunc(respTrailers), nil)
		p := startProxy(t, withRespRules(h2cPoolConfig(b, up.addr)))
		r := rawH2Get(t, p, 0, "/") // (no DATA until the window opens)
		dec := hpack.NewDecoder(4096, 1<<20)
		var body []byte
		var trailers []string
		opened := false
		for done := false; !done; {
			f, err := r.next()
			if err != nil {
				t.Fatal(err)
			}
			switch f.Type {
			case h2.FrameHeaders:
				var names []string
				if err := dec.Decode(f.Data, func(hf hpack.Field) error {
					names = append(names, http.CanonicalHeaderKey(string(hf.Name)))
					return nil
				}); err != nil {
					t.Fatal(err)
				}
				if f.Flags&h2.FlagEndStream == 0 && !opened {
					// The response head: let the body and trailers reach
					// the proxy, then open the window.
					time.Sleep(300 * time.Millisecond)
					r.c.(net.Conn).Write(h2.AppendWindowUpdate(nil, 1, 1<<16))
					opened = true
					continue
				}
				slices.Sort(names)
				trailers, done = names, true
			case h2.FrameData:
				body = append(body, f.Data...)
				done = f.Flags&h2.FlagEndStream != 0
			case h2.FrameRSTStream, h2.FrameGoAway:
				t.Fatalf("%v", f.Type)
			}
		}
		if got := strings.Join(trailers, ","); string(body) != "hello" || got != respTrailersKept {
			t.Errorf("%q, trailers %s, want \"hello\", %s", body, got, respTrailersKept)
		}
	})
}
