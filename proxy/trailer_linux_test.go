package proxy

import (
	"bufio"
	"io"
	"net/http"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/spindlenet/spindle/engine"
)

// trailerNames answers a request's body length and its trailer fields'
// names ("5 X-Sum,X_note"), read after its body.
func trailerNames(w http.ResponseWriter, r *http.Request) {
	n, _ := io.Copy(io.Discard, r.Body)
	var names []string
	for k := range r.Trailer {
		if len(r.Trailer[k]) > 0 {
			names = append(names, k)
		}
	}
	slices.Sort(names)
	io.WriteString(w, strconv.FormatInt(n, 10)+" "+strings.Join(names, ","))
}

// trickledTrailers is TestRequestTrailersTrickled's first request's
// trailer section: X_Forwarded_For and Cookie are dropped
// (TestRequestTrailersFiltered).
var trickledTrailers = "X-Sum: abc\r\nX_Forwarded_For: 1.2.3.4\r\nCookie: s=1\r\nX_Note: n\r\n"

// TestRequestTrailersTrickled: an HTTP/1.1 client's chunked request
// sent a byte a write, its trailer section too, then a request
// pipelined after it, each with trailers, get their responses, the
// server their trailers, for each pool protocol (to an h2c pool the
// trailers, ended by a read of their own, waited for the next write to
// the connection before).
func TestRequestTrailersTrickled(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		eachPool(t, trailerNames, func(protocol, server string) {
			cfg := httpConfig(b, server)
			cfg.Pools[0].Protocol = protocol
			p := startProxy(t, cfg)
			conn := dial(t, p)
			conn.SetDeadline(time.Now().Add(10 * time.Second))
			// (Go's HTTP/2 server keeps the trailers the head names.)
			first := "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nTrailer: X-Sum, X_Note\r\n\r\n" +
				"5\r\nhello\r\n0\r\n" + trickledTrailers + "\r\n"
			for i := range len(first) {
				if _, err := io.WriteString(conn, first[i:i+1]); err != nil {
					t.Fatal(err)
				}
				time.Sleep(200 * time.Microsecond)
			}
			io.WriteString(conn, "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nTrailer: X-Sum\r\n\r\n"+
				"3\r\nabc\r\n0\r\nX.Real.IP: 1.2.3.4\r\nX-Sum: d\r\n\r\n"+
				"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
			br := bufio.NewReader(conn)
			for i, want := range []string{"5 X-Sum,X_note", "3 X-Sum", "0 "} {
				resp, err := http.ReadResponse(br, nil)
				if err != nil {
					t.Fatalf("to %s: response %d: %v", protocol, i, err)
				}
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if got := string(body); resp.StatusCode != 200 || !strings.EqualFold(got, want) {
					t.Errorf("to %s: response %d: %d %q, want 200 %q", protocol, i, resp.StatusCode, got, want)
				}
			}
			conn.Close()
		})
	})
}

// TestRequestTrailersFiltered: a request's trailer section reaches the
// server without the forwarding fields in any spelling and the fields
// no trailer may carry (Authorization, Cookie, Via, Max-Forwards, ...),
// the others as they came, from a client trusted_proxies lists too, for
// each client and pool protocol pair (TestRequestTrailersTrickled: a
// trailer section in parts).
func TestRequestTrailersFiltered(t *testing.T) {
	trailer := http.Header{
		"X-Forwarded-For": {"1.2.3.4"},
		"X_Forwarded_For": {"1.2.3.4"},
		"X.Real.IP":       {"1.2.3.4"},
		"Forwarded":       {"for=1.2.3.4"},
		"Authorization":   {"Basic eDp5"},
		"Cookie":          {"s=1"},
		"Via":             {"1.1 evil"},
		"Max_Forwards":    {"1"},
		"X-Sum":           {"abc"},
		"X_Note":          {"n"},
	}
	forBackends(t, func(t *testing.T, b engine.Backend) {
		eachPool(t, trailerNames, func(protocol, server string) {
			cfg := h2cConfig(b, server)
			cfg.Pools[0].Protocol = protocol
			cfg.Listeners[0].TrustedProxies = Prefixes{netip.MustParsePrefix("127.0.0.0/8")}
			p := startProxy(t, cfg)
			h1c, base := client(t, p)
			h2c, _ := h2Client(t, p)
			for _, c := range []*http.Client{h1c, h2c} {
				// (A section all dropped ends the body as none would.)
				for _, tc := range []struct {
					trailer http.Header
					want    string
				}{{trailer, "5 X-Sum,X_note"}, {http.Header{"X-Forwarded-For": {"1.2.3.4"}}, "5 "}} {
					if major, code, body := postTrailers(t, c, base, tc.trailer); code != 200 || !strings.EqualFold(body, tc.want) {
						t.Errorf("HTTP/%d to %s: %d %q, want 200 %q", major, protocol, code, body, tc.want)
					}
				}
			}
		})
	})
}

// postTrailers POSTs "hello" to base with trailer (chunked) on c and
// returns the response's HTTP major version, status and body.
func postTrailers(t *testing.T, c *http.Client, base string, trailer http.Header) (major, code int, body string) {
	t.Helper()
	req := mustReq(t, "POST", base+"/", io.MultiReader(strings.NewReader("hello")))
	req.Trailer = trailer.Clone()
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp.ProtoMajor, resp.StatusCode, string(b)
}

// TestRequestTrailersRules: a request's trailer fields go through the
// listener's and the route's request_headers remove (X-User, X-Route,
// and X_User, as the head's) and headers_with_underscores (drop and
// reject: X_Note is dropped, the request answered, reject's 400 being
// too late once the head went), for each client and pool protocol pair:
// a server merging trailers into the head read the fields a rule
// removed from it.
func TestRequestTrailersRules(t *testing.T) {
	trailer := http.Header{
		"X-User":  {"admin"},
		"X_User":  {"admin"},
		"X-Route": {"r"},
		"X-Sum":   {"abc"},
		"X_Note":  {"n"},
	}
	forBackends(t, func(t *testing.T, b engine.Backend) {
		for _, us := range []string{UnderscoresAllow, UnderscoresDrop, UnderscoresReject} {
			want := "5 X-Sum"
			if us == UnderscoresAllow {
				want = "5 X-Sum,X_note"
			}
			eachPool(t, trailerNames, func(protocol, server string) {
				cfg := h2cConfig(b, server)
				cfg.Pools[0].Protocol = protocol
				cfg.Listeners[0].HeadersWithUnderscores = us
				cfg.Listeners[0].RequestHeaders = HeaderRules{Remove: []string{"X-User"}}
				cfg.Listeners[0].Routes = []RouteConfig{{PathPrefix: "/", Pool: cfg.Pools[0].Name,
					RequestHeaders: HeaderRules{Remove: []string{"X-Route"}}}}
				p := startProxy(t, cfg)
				h1c, base := client(t, p)
				h2c, _ := h2Client(t, p)
				for _, c := range []*http.Client{h1c, h2c} {
					if major, code, body := postTrailers(t, c, base, trailer); code != 200 || !strings.EqualFold(body, want) {
						t.Errorf("%s, HTTP/%d to %s: %d %q, want 200 %q", us, major, protocol, code, body, want)
					}
				}
			})
		}
	})
}
