package proxy

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/textproto"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/spindlenet/spindle/engine"
	"github.com/spindlenet/spindle/internal/h2"
	"github.com/spindlenet/spindle/internal/hpack"
)

// seenReq is what headEcho's server saw of a request.
type seenReq struct {
	Proto int
	URI   string
	Host  string
	Hdr   http.Header
}

// headEcho answers a request with what it saw (JSON), and the fields
// Server: up, X-Up: 1, X-Resp: u, Cache-Control: public.
func headEcho(w http.ResponseWriter, r *http.Request) {
	io.Copy(io.Discard, r.Body)
	h := w.Header()
	h.Set("Server", "up")
	h.Set("X-Up", "1")
	h.Set("X-Resp", "u")
	h.Set("Cache-Control", "public")
	json.NewEncoder(w).Encode(seenReq{Proto: r.ProtoMajor, URI: r.RequestURI, Host: r.Host, Hdr: r.Header})
}

// rewriteConfig is h2cConfig (HTTP/1.1 and HTTP/2 clients) to server,
// with the pool's protocol, a second pool "api" of the same server, and
// rules on the listener and on the routes /api/ (to api) and /exact.
func rewriteConfig(b engine.Backend, server, protocol string) *Config {
	cfg := h2cConfig(b, server)
	cfg.Pools[0].Protocol = protocol
	cfg.Pools = append(cfg.Pools, PoolConfig{Name: "api", Servers: Servers(server), Protocol: protocol})
	l := &cfg.Listeners[0]
	l.RequestHeaders = HeaderRules{Set: map[string]string{"X-Env": "prod", "X-Over": "l"}, Add: map[string]string{"X-Tag": "l"}, Remove: []string{"x-debug-l"}}
	l.ResponseHeaders = HeaderRules{Set: map[string]string{"Cache-Control": "no-store"}, Add: map[string]string{"X-L": "1"}}
	l.Routes = []RouteConfig{{
		PathPrefix: "/api/", Pool: "api", RewritePrefix: "/v2/", HostRewrite: "backend.internal:8080",
		RequestHeaders:  HeaderRules{Set: map[string]string{"X-Route": "api"}, Add: map[string]string{"x-tag": "r"}, Remove: []string{"X-Over", "X-DEBUG"}},
		ResponseHeaders: HeaderRules{Set: map[string]string{"X-Up": "rt"}, Add: map[string]string{"X-Resp": "r"}, Remove: []string{"server"}},
	}, {PathPrefix: "/exact", Pool: "app", RewritePrefix: "/e"}}
	return cfg
}

// TestRewrite: request_headers, response_headers, rewrite_prefix and
// host_rewrite, for each pair of client (HTTP/1.1, HTTP/2) and pool
// (http1, h2c) protocols: the listener's rules apply to every request
// (an unrouted one's too), the route's after them (its remove drops a
// field the listener's set wrote, its add follows the listener's); set
// replaces the client's field, remove drops every one in any case; the
// path's prefix is replaced, the query kept, an empty remainder
// rewritten; Host (:authority) is host_rewrite, X-Forwarded-Host the
// request's; the response's fields likewise (HTTP/2 clients get them in
// lower case, or Go's client refuses them). The access log has the
// target and host as received.
func TestRewrite(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		eachPool(t, headEcho, func(protocol, server string) {
			cfg := rewriteConfig(b, server, protocol)
			logPath := filepath.Join(t.TempDir(), "access.log")
			cfg.Listeners[0].AccessLog = &AccessLogConfig{Path: logPath}
			p := startProxy(t, cfg)
			h1c, base := client(t, p)
			h2c, _ := h2Client(t, p)
			for _, cl := range []struct {
				name  string
				c     *http.Client
				proto int
			}{{"h1", h1c, 1}, {"h2", h2c, 2}} {
				t.Run(cl.name+"-"+protocol, func(t *testing.T) {
					rewriteCase(t, cl.c, cl.proto, base, protocol)
				})
			}
			for _, proto := range []string{"HTTP/1.1", "HTTP/2.0"} {
				waitLine(t, logPath, proto+" /api/x?q=1 as received", func(m map[string]any) bool {
					return m["proto"] == proto && m["target"] == "/api/x?q=1" && m["host"] == "www.example.com" && m["route"] == "/api/"
				})
			}
		})
	})
}

// rewriteCase is TestRewrite's requests by client c (speaking HTTP/proto)
// to a pool of protocol.
func rewriteCase(t *testing.T, c *http.Client, proto int, base, protocol string) {
	upProto := 1
	if protocol == ProtocolH2C {
		upProto = 2
	}
	send := func(path string) (*http.Response, seenReq) {
		t.Helper()
		req := mustReq(t, "GET", base+path, nil)
		req.Host = "www.example.com"
		req.Header = http.Header{
			"X-Env": {"dev"}, "X-Tag": {"c"}, "X-Debug": {"1"}, "x-debug-l": {"1"}, "X-Over": {"c"}, "X-Keep": {"k"},
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var seen seenReq
		if err := json.NewDecoder(resp.Body).Decode(&seen); err != nil {
			t.Fatalf("%s: %d: %v", path, resp.StatusCode, err)
		}
		if resp.ProtoMajor != proto || seen.Proto != upProto {
			t.Fatalf("%s: client got HTTP/%d, server HTTP/%d", path, resp.ProtoMajor, seen.Proto)
		}
		return resp, seen
	}
	check := func(what string, got http.Header, want map[string][]string) {
		t.Helper()
		for name, w := range want {
			if g := got.Values(name); !reflect.DeepEqual(g, w) && (len(g) > 0 || len(w) > 0) {
				t.Errorf("%s %s: %q, want %q", what, name, g, w)
			}
		}
	}

	resp, seen := send("/api/x?q=1")
	if seen.URI != "/v2/x?q=1" || seen.Host != "backend.internal:8080" {
		t.Errorf("/api/x?q=1: server got %s Host %s, want /v2/x?q=1 Host backend.internal:8080", seen.URI, seen.Host)
	}
	check("route request", seen.Hdr, map[string][]string{
		"X-Env": {"prod"}, "X-Tag": {"c", "l", "r"}, "X-Debug": nil, "X-Debug-L": nil, "X-Over": nil,
		"X-Route": {"api"}, "X-Keep": {"k"}, "X-Forwarded-Host": {"www.example.com"},
	})
	check("route response", resp.Header, map[string][]string{
		"Cache-Control": {"no-store"}, "X-L": {"1"}, "Server": nil, "X-Resp": {"u", "r"}, "X-Up": {"rt"},
	})

	resp, seen = send("/other?z")
	if seen.URI != "/other?z" || seen.Host != "www.example.com" {
		t.Errorf("/other?z: server got %s Host %s, want them as sent", seen.URI, seen.Host)
	}
	check("listener request", seen.Hdr, map[string][]string{
		"X-Env": {"prod"}, "X-Tag": {"c", "l"}, "X-Debug": {"1"}, "X-Debug-L": nil, "X-Over": {"l"}, "X-Route": nil, "X-Keep": {"k"},
	})
	check("listener response", resp.Header, map[string][]string{
		"Cache-Control": {"no-store"}, "X-L": {"1"}, "Server": {"up"}, "X-Resp": {"u"}, "X-Up": {"1"},
	})

	for path, want := range map[string]string{
		"/api/":        "/v2/",
		"/api/?a=/b":   "/v2/?a=/b",
		"/exact":       "/e",
		"/exact?x":     "/e?x",
		"/exact/y":     "/e/y",
		"/exactly%20z": "/ely%20z",
	} {
		if _, seen := send(path); seen.URI != want {
			t.Errorf("%s: server got %s, want %s", path, seen.URI, want)
		}
	}
}

// TestRewriteReload: a reload changing the rules applies to the requests
// routed after it, on the client connections open before it too (an
// HTTP/1.1 and an HTTP/2 one, kept alive).
func TestRewriteReload(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		server := newHTTPUpstream(t, headEcho).addr
		mk := func(gen string) *Config {
			cfg := h2cConfig(b, server)
			cfg.Listeners[0].Routes = []RouteConfig{{PathPrefix: "/", Pool: "app", RewritePrefix: "/" + gen + "/",
				RequestHeaders:  HeaderRules{Set: map[string]string{"X-Gen": gen}},
				ResponseHeaders: HeaderRules{Set: map[string]string{"X-Gen": gen}}}}
			return cfg
		}
		p := startProxy(t, mk("a"))
		h1c, base := client(t, p)
		h2c, _ := h2Client(t, p)
		for _, gen := range []string{"a", "b"} {
			if gen == "b" {
				if err := p.Reload(mk("b")); err != nil {
					t.Fatal(err)
				}
			}
			for _, c := range []*http.Client{h1c, h2c} {
				resp, err := c.Get(base + "/x")
				if err != nil {
					t.Fatal(err)
				}
				var seen seenReq
				err = json.NewDecoder(resp.Body).Decode(&seen)
				resp.Body.Close()
				if err != nil || seen.URI != "/"+gen+"/x" || seen.Hdr.Get("X-Gen") != gen || resp.Header.Get("X-Gen") != gen {
					t.Errorf("HTTP/%d after config %s: server got %s X-Gen %q, client X-Gen %q (%v)", resp.ProtoMajor, gen, seen.URI, seen.Hdr.Get("X-Gen"), resp.Header.Get("X-Gen"), err)
				}
			}
		}
		if lt := p.Totals().Listeners[0]; lt.Accepted != 2 {
			t.Errorf("%d client connections, want 2 (kept alive over the reload)", lt.Accepted)
		}
	})
}

// allocRules sets rules of every kind on cfg's listener and a route of
// every path with rewrite_prefix and host_rewrite, and
// headers_with_underscores drop.
func allocRules(cfg *Config) {
	l := &cfg.Listeners[0]
	l.HeadersWithUnderscores = UnderscoresDrop
	l.RequestHeaders = HeaderRules{Set: map[string]string{"X-Env": "prod"}, Add: map[string]string{"X-Tag": "l"}, Remove: []string{"Accept"}}
	l.ResponseHeaders = HeaderRules{Set: map[string]string{"Cache-Control": "no-store"}}
	l.Routes = []RouteConfig{{PathPrefix: "/", Pool: "app", RewritePrefix: "/r/", HostRewrite: "backend.internal",
		RequestHeaders:  HeaderRules{Set: map[string]string{"X-Route": "r"}, Remove: []string{"User-Agent"}},
		ResponseHeaders: HeaderRules{Add: map[string]string{"X-Resp": "r"}, Remove: []string{"Content-Type"}}}}
}

// TestRewriteAllocs: requests through a route with rules of every kind
// take no allocation (TestHTTPAllocs, TestH2Allocs and TestH2UpAllocs
// with allocRules), for each client and pool protocol pair.
func TestRewriteAllocs(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		t.Run("h1-http1", func(t *testing.T) { httpAllocs(t, b, allocRules) })
		t.Run("h1-h2c", func(t *testing.T) {
			httpAllocs(t, b, func(cfg *Config) {
				allocRules(cfg)
				var first atomic.Bool
				cfg.Pools[0].Servers, cfg.Pools[0].Protocol = Servers(newUpstream(t, rawH2Up("", &first)).addr), ProtocolH2C
			})
		})
		t.Run("h2-http1", func(t *testing.T) {
			u := newUpstream(t, rawHTTPServer)
			cfg := h2cConfig(b, u.addr)
			allocRules(cfg)
			h2AllocsZero(t, startProxy(t, cfg), 10)
		})
		t.Run("h2-h2c", func(t *testing.T) {
			var first atomic.Bool
			u := newUpstream(t, rawH2Up("", &first))
			cfg := h2cPoolConfig(b, u.addr)
			allocRules(cfg)
			h2AllocsZero(t, startProxy(t, cfg), 10)
		})
	})
}

// TestRewriteAbsoluteForm: an HTTP/1.1 request with an absolute-form
// target through a route with rewrite_prefix and host_rewrite: to an
// http1 pool it keeps its form, with host_rewrite as its authority and
// Host, the path rewritten (an empty one, which matched "/", as
// rewrite_prefix), the query kept; to an h2c pool it goes as :path and
// :authority; X-Forwarded-Host is the request's host either way.
func TestRewriteAbsoluteForm(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		eachPool(t, headEcho, func(protocol, server string) {
			cfg := httpConfig(b, server)
			cfg.Pools[0].Protocol = protocol
			cfg.Listeners[0].Routes = []RouteConfig{{PathPrefix: "/", Pool: "app", RewritePrefix: "/root/", HostRewrite: "b.internal:81"}}
			p := startProxy(t, cfg)
			for target, want := range map[string]string{
				"http://www.example.com/x?q": "/root/x?q",
				"http://www.example.com?q":   "/root/?q",
				"http://www.example.com":     "/root/",
			} {
				c := dial(t, p)
				io.WriteString(c, "GET "+target+" HTTP/1.1\r\nHost: www.example.com\r\nConnection: close\r\n\r\n")
				resp, body := readResponse(t, c, "GET")
				var seen seenReq
				if err := json.Unmarshal([]byte(body), &seen); err != nil {
					t.Fatalf("%s: %d %q", target, resp.StatusCode, body)
				}
				if protocol == ProtocolHTTP1 {
					want = "http://b.internal:81" + want
				}
				if seen.URI != want || seen.Host != "b.internal:81" || seen.Hdr.Get("X-Forwarded-Host") != "www.example.com" {
					t.Errorf("%s to %s: server got %s Host %s X-Forwarded-Host %s, want %s Host b.internal:81 X-Forwarded-Host www.example.com",
						target, protocol, seen.URI, seen.Host, seen.Hdr.Get("X-Forwarded-Host"), want)
				}
			}
		})
	})
}

// TestRewriteNotInterimOrLocal: response_headers apply to a final
// response from upstream only: not to an interim 103 before it, nor to
// the proxy's own response (400 to a dot-segment), for each client and
// pool protocol pair.
func TestRewriteNotInterimOrLocal(t *testing.T) {
	hint := func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Link", "</a.css>; rel=preload")
		w.WriteHeader(103)
		w.Header().Del("Link")
		io.WriteString(w, "ok")
	}
	forBackends(t, func(t *testing.T, b engine.Backend) {
		eachPool(t, hint, func(protocol, server string) {
			cfg := h2cConfig(b, server)
			cfg.Pools[0].Protocol = protocol
			cfg.Listeners[0].ResponseHeaders = HeaderRules{Set: map[string]string{"X-L": "1"}}
			cfg.Listeners[0].Routes = []RouteConfig{{PathPrefix: "/", Pool: "app", ResponseHeaders: HeaderRules{Add: map[string]string{"X-R": "1"}}}}
			p := startProxy(t, cfg)
			h1c, base := client(t, p)
			h2c, _ := h2Client(t, p)
			for _, c := range []*http.Client{h1c, h2c} {
				var interim []http.Header
				req := mustReq(t, "GET", base+"/hint", nil)
				req = req.WithContext(httptrace.WithClientTrace(req.Context(), &httptrace.ClientTrace{
					Got1xxResponse: func(code int, h textproto.MIMEHeader) error {
						interim = append(interim, http.Header(h))
						return nil
					},
				}))
				resp, err := c.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				name := fmt.Sprintf("HTTP/%d to %s", resp.ProtoMajor, protocol)
				if resp.Header.Get("X-L") != "1" || resp.Header.Get("X-R") != "1" {
					t.Errorf("%s: final response %v, want X-L and X-R", name, resp.Header)
				}
				if len(interim) != 1 || interim[0].Get("Link") == "" || interim[0].Get("X-L") != "" || interim[0].Get("X-R") != "" {
					t.Errorf("%s: interim responses %v, want one 103 with Link only", name, interim)
				}
				req = mustReq(t, "GET", base+"/", nil)
				req.URL.Opaque = "/a/%2e%2e/b"
				resp, err = c.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
				if resp.StatusCode != 400 || resp.Header.Get("X-L") != "" || resp.Header.Get("X-R") != "" {
					t.Errorf("%s: local response %d %v, want 400 without X-L and X-R", name, resp.StatusCode, resp.Header)
				}
			}
		})
	})
}

// eachPool runs f for each pool protocol (http1, h2c) with a server of
// that protocol serving h (its address).
func eachPool(t *testing.T, h http.HandlerFunc, f func(protocol, server string)) {
	for _, protocol := range []string{ProtocolHTTP1, ProtocolH2C} {
		if protocol == ProtocolH2C {
			f(protocol, newH2CUp(t, h, nil).addr)
		} else {
			f(protocol, newHTTPUpstream(t, h).addr)
		}
	}
}

// TestRewriteSensitiveKept: a field an HTTP/2 client sent never-indexed
// (RFC 7541 6.2.3: an intermediary keeps that representation) goes so
// to an h2c pool, through a route with request_headers as without, and
// a rule's field beside it does not take the flag.
func TestRewriteSensitiveKept(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		var first atomic.Bool
		up := newUpstream(t, rawH2Up("sensitive", &first))
		cfg := h2cPoolConfig(b, up.addr)
		cfg.Listeners[0].Routes = []RouteConfig{{PathPrefix: "/r/", Pool: "app", RewritePrefix: "/",
			RequestHeaders: HeaderRules{Set: map[string]string{"X-Env": "prod"}}}}
		p := startProxy(t, cfg)
		for _, path := range []string{"/x", "/r/x"} {
			r := rawH2Get(t, p, 65535, path, hpack.Field{Name: []byte("x-secret"), Value: []byte("s3cret"), Sensitive: true},
				hpack.Field{Name: []byte("x-plain"), Value: []byte("p")})
			var body []byte
			for {
				f, err := r.next()
				if err != nil {
					t.Fatalf("%s: %v", path, err)
				}
				if f.Type == h2.FrameData {
					body = append(body, f.Data...)
					if f.Flags&h2.FlagEndStream != 0 {
						break
					}
				}
			}
			if string(body) != "x-secret " {
				t.Errorf("%s: the server got never-indexed %q, want %q", path, body, "x-secret ")
			}
		}
	})
}

// TestPseudoNeverIndexedKept: pseudo-header fields an HTTP/2 client sent
// never-indexed go so to an h2c pool (RFC 7541 6.2.3), :path after
// rewrite_prefix too, and a Host field sent never-indexed, which the
// proxy sends as :authority where the client sent none, does as well.
func TestPseudoNeverIndexedKept(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		var first atomic.Bool
		up := newUpstream(t, rawH2Up("sensitive", &first))
		cfg := h2cPoolConfig(b, up.addr)
		cfg.Listeners[0].Routes = []RouteConfig{{PathPrefix: "/r/", Pool: "app", RewritePrefix: "/"}, {PathPrefix: "/", Pool: "app"}}
		p := startProxy(t, cfg)
		field := func(name, value string, sensitive bool) hpack.Field {
			return hpack.Field{Name: []byte(name), Value: []byte(value), Sensitive: sensitive}
		}
		for _, tc := range []struct {
			name   string
			fields []hpack.Field
			want   string
		}{
			{"path and authority", []hpack.Field{field(":method", "GET", false), field(":scheme", "http", false),
				field(":authority", "x", true), field(":path", "/x?token=t0k3n", true)}, ":authority :path "},
			{"rewritten path", []hpack.Field{field(":method", "GET", false), field(":scheme", "http", false),
				field(":authority", "x", false), field(":path", "/r/x?token=t0k3n", true)}, ":path "},
			{"host", []hpack.Field{field(":method", "GET", false), field(":scheme", "http", false),
				field(":path", "/x", false), field("host", "x", true)}, ":authority "},
			{"none", []hpack.Field{field(":method", "GET", false), field(":scheme", "http", false),
				field(":authority", "x", false), field(":path", "/x", false)}, ""},
		} {
			r := rawH2Fields(t, p, tc.fields)
			var body []byte
			for {
				f, err := r.next()
				if err != nil {
					t.Fatalf("%s: %v", tc.name, err)
				}
				if f.Type == h2.FrameData {
					body = append(body, f.Data...)
					if f.Flags&h2.FlagEndStream != 0 {
						break
					}
				}
			}
			if string(body) != tc.want {
				t.Errorf("%s: the server got never-indexed %q, want %q", tc.name, body, tc.want)
			}
		}
	})
}

// TestRewriteReloadInFlight: a request routed before a reload that
// changes the rules keeps the rules it was routed with for its response
// too (the route's index is the listener's of its own generation), for
// each client and pool protocol pair.
func TestRewriteReloadInFlight(t *testing.T) {
	arrived, release := make(chan string, 1), make(chan struct{})
	hold := func(w http.ResponseWriter, r *http.Request) {
		arrived <- r.Header.Get("X-Gen")
		<-release
		io.WriteString(w, "ok")
	}
	forBackends(t, func(t *testing.T, b engine.Backend) {
		eachPool(t, hold, func(protocol, server string) {
			mk := func(gen string, routes int) *Config {
				cfg := h2cConfig(b, server)
				cfg.Pools[0].Protocol = protocol
				for i := range routes { // (the held request's route is the last)
					cfg.Listeners[0].Routes = append(cfg.Listeners[0].Routes, RouteConfig{PathPrefix: fmt.Sprintf("/r%d/", i), Pool: "app"})
				}
				cfg.Listeners[0].Routes = append(cfg.Listeners[0].Routes, RouteConfig{PathPrefix: "/", Pool: "app",
					RequestHeaders: HeaderRules{Set: map[string]string{"X-Gen": gen}}, ResponseHeaders: HeaderRules{Set: map[string]string{"X-Gen": gen}}})
				return cfg
			}
			p := startProxy(t, mk("a", 0))
			h1c, base := client(t, p)
			h2c, _ := h2Client(t, p)
			for i, c := range []*http.Client{h1c, h2c} {
				before, after := fmt.Sprint("a", i), fmt.Sprint("b", i)
				if err := p.Reload(mk(before, 0)); err != nil {
					t.Fatal(err)
				}
				got := make(chan *http.Response, 1)
				go func() {
					resp, err := c.Get(base + "/x")
					if err != nil {
						t.Error(err)
					}
					got <- resp
				}()
				if gen := <-arrived; gen != before {
					t.Errorf("%s, client %d: server got X-Gen %q, want %q", protocol, i, gen, before)
				}
				if err := p.Reload(mk(after, 1)); err != nil {
					t.Fatal(err)
				}
				release <- struct{}{}
				resp := <-got
				if resp == nil {
					continue
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if g := resp.Header.Values("X-Gen"); len(g) != 1 || g[0] != before {
					t.Errorf("%s, HTTP/%d: response X-Gen %q after a reload in flight, want %q (the request's rules)", protocol, resp.ProtoMajor, g, before)
				}
			}
		})
	})
}

// TestRewriteTrailers: a field request_headers removes is dropped from a
// request's trailer section as from its head (TestRequestTrailersRules),
// and a field response_headers removes from a response's trailer section
// as from its head (TestResponseTrailersFiltered), for each client and
// pool protocol pair.
func TestRewriteTrailers(t *testing.T) {
	echo := func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Trailer", "X-Debug, X-Echo")
		w.Header().Set("X-Head", r.Header.Get("X-Debug"))
		w.WriteHeader(200)
		io.WriteString(w, "ok")
		w.(http.Flusher).Flush()
		w.Header().Set("X-Echo", "got ["+r.Trailer.Get("X-Debug")+"]")
		w.Header().Set("X-Debug", "t")
	}
	forBackends(t, func(t *testing.T, b engine.Backend) {
		eachPool(t, echo, func(protocol, server string) {
			cfg := h2cConfig(b, server)
			cfg.Pools[0].Protocol = protocol
			cfg.Listeners[0].RequestHeaders = HeaderRules{Remove: []string{"X-Debug"}}
			cfg.Listeners[0].ResponseHeaders = HeaderRules{Remove: []string{"X-Debug"}}
			p := startProxy(t, cfg)
			h1c, base := client(t, p)
			h2c, _ := h2Client(t, p)
			for _, c := range []*http.Client{h1c, h2c} {
				req := mustReq(t, "POST", base+"/", io.MultiReader(strings.NewReader("hello")))
				req.Header.Set("X-Debug", "head")
				req.Trailer = http.Header{"X-Debug": {"t"}}
				resp, err := c.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if string(body) != "ok" || resp.Header.Get("X-Head") != "" || resp.Trailer.Get("X-Echo") != "got []" || resp.Trailer.Get("X-Debug") != "" {
					t.Errorf("HTTP/%d to %s: body %q, X-Head %q, trailers %v; want ok, none, X-Echo: got [] alone", resp.ProtoMajor, protocol, body, resp.Header.Get("X-Head"), resp.Trailer)
				}
			}
		})
	})
}

// TestRewriteSwitchingProtocols: response_headers apply to a 101, the
// last HTTP response on its connections (no final response follows to
// carry the rules' fields: HAProxy's http-response rules apply to it, as
// nginx's add_header ... always does), and not to an interim 103 before
// it; the tunnel works after it.
func TestRewriteSwitchingProtocols(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		u := newUpstream(t, func(c net.Conn) {
			defer c.Close()
			if _, ok := readHeadBytes(c); !ok {
				return
			}
			io.WriteString(c, "HTTP/1.1 103 Early Hints\r\nLink: </a.css>; rel=preload\r\nServer: up\r\n\r\n")
			io.WriteString(c, "HTTP/1.1 101 Switching Protocols\r\nConnection: upgrade\r\nUpgrade: websocket\r\nServer: up\r\nX-Up: 1\r\nSec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\n\r\n")
			// The tunnel: an echo (not io.Copy, whose splice keeps pipes in
			// a pool the leak check would count).
			b := make([]byte, 64)
			for {
				n, err := c.Read(b)
				if err != nil {
					return
				}
				c.Write(b[:n])
			}
		})
		cfg := httpConfig(b, u.addr)
		l := &cfg.Listeners[0]
		l.ResponseHeaders = HeaderRules{Set: map[string]string{"X-L": "1"}}
		l.Routes = []RouteConfig{{PathPrefix: "/", Pool: "app", ResponseHeaders: HeaderRules{Set: map[string]string{"X-Up": "rt"}, Add: map[string]string{"X-R": "1"}, Remove: []string{"Server"}}}}
		p := startProxy(t, cfg)
		c := dial(t, p)
		io.WriteString(c, "GET /chat HTTP/1.1\r\nHost: x\r\nConnection: upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n")
		br := bufio.NewReader(c)
		hint := rawHead(t, c, br)
		if !strings.HasPrefix(hint, "HTTP/1.1 103 ") || len(fieldLines(hint, "Server")) != 1 || len(fieldLines(hint, "X-L")) != 0 || len(fieldLines(hint, "X-R")) != 0 {
			t.Errorf("interim head %q, want the 103 as the server sent it", hint)
		}
		head := rawHead(t, c, br)
		if !strings.HasPrefix(head, "HTTP/1.1 101 ") {
			t.Fatalf("head %q, want a 101", head)
		}
		for _, f := range []struct {
			name string
			want []string
		}{
			{"X-L", []string{"1"}}, {"X-R", []string{"1"}}, {"X-Up", []string{"rt"}}, {"Server", nil},
			{"Upgrade", []string{"websocket"}}, {"Sec-WebSocket-Accept", []string{"s3pPLMBiTxaQ9kYGzzhZRbK+xOo="}},
		} {
			if got := fieldLines(head, f.name); !slices.Equal(got, f.want) {
				t.Errorf("101's %s %q, want %q (head %q)", f.name, got, f.want, head)
			}
		}
		io.WriteString(c, "ping")
		got := make([]byte, 4)
		c.SetReadDeadline(time.Now().Add(10 * time.Second))
		if _, err := io.ReadFull(br, got); err != nil || string(got) != "ping" {
			t.Errorf("through the tunnel: %q, %v", got, err)
		}
	})
}
