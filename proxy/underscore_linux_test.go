package proxy

import (
	"encoding/json"
	"io"
	"net/http"
	"net/netip"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/spindlenet/spindle/engine"
)

// underscoreFields are TestHeadersWithUnderscores's request fields: the
// forwarding fields spelled with underscores (as a CGI, WSGI, Rack or
// PHP server reads them: HTTP_X_FORWARDED_FOR for both spellings), one
// other field with an underscore and one without, and two that are, so
// read, fields request_headers remove (X-Debug) and set (X-User); and
// some spelled with other separators, which lighttpd's CGI, FastCGI and
// SCGI read as '_' (any byte not a letter or digit) and PHP too ('.').
var underscoreFields = http.Header{
	"X.Real.IP":         {"1.2.3.4"},
	"X~Forwarded~For":   {"1.2.3.4"},
	"X.Debug":           {"1"},
	"X_Forwarded_For":   {"1.2.3.4"},
	"x_forwarded-proto": {"https"},
	"X-Forwarded_Host":  {"evil.example"},
	"X_Real_IP":         {"1.2.3.4"},
	"X_Custom":          {"c"},
	"X_Debug":           {"1"},
	"X_user":            {"evil"},
	"X-Keep":            {"k"},
}

// TestHeadersWithUnderscores, for each pair of client (HTTP/1.1,
// HTTP/2) and pool (http1, h2c) protocols: a forwarding field spelled
// with underscores never reaches the server, from a client
// trusted_proxies lists or not (the server reads X-Forwarded-For: the
// client), whatever headers_with_underscores says; with allow (the
// default) other such fields pass, with drop none does (counted), with
// reject the request gets 400 (PR in the access log) and one without
// such a field passes; request_headers's remove and set drop a field of
// their names so spelled, whatever the option; a reload applies it; /metrics counts the
// fields dropped.
func TestHeadersWithUnderscores(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		eachPool(t, headEcho, func(protocol, server string) {
			logPath := filepath.Join(t.TempDir(), "access.log")
			mk := func(mode string, trusted bool) *Config {
				cfg := h2cConfig(b, server)
				cfg.Pools[0].Protocol = protocol
				l := &cfg.Listeners[0]
				l.HeadersWithUnderscores = mode
				l.RequestHeaders = HeaderRules{Set: map[string]string{"X-User": "gw"}, Remove: []string{"X-Debug"}}
				l.AccessLog = &AccessLogConfig{Path: logPath}
				if trusted {
					l.TrustedProxies = Prefixes{netip.MustParsePrefix("127.0.0.0/8")}
				}
				return cfg
			}
			p := startProxy(t, mk("", false))
			h1c, base := client(t, p)
			h2c, _ := h2Client(t, p)
			send := func(c *http.Client, hdr http.Header) (int, http.Header) {
				t.Helper()
				req := mustReq(t, "GET", base+"/x", nil)
				req.Header = hdr.Clone()
				resp, err := c.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				defer resp.Body.Close()
				if resp.StatusCode != 200 {
					io.Copy(io.Discard, resp.Body)
					return resp.StatusCode, nil
				}
				var seen seenReq
				if err := json.NewDecoder(resp.Body).Decode(&seen); err != nil {
					t.Fatal(err)
				}
				return 200, seen.Hdr
			}
			underscored := func(h http.Header) []string { // (or another separator but '-')
				var names []string
				for n := range h {
					if strings.ContainsFunc(n, func(c rune) bool {
						return !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-')
					}) {
						names = append(names, n)
					}
				}
				slices.Sort(names)
				return names
			}
			dropped := func() uint64 { return p.Totals().Listeners[0].UnderscoreDropped }
			for _, step := range []struct {
				mode    string
				trusted bool
				want    []string // the fields with underscores the server gets
				drops   uint64   // fields dropped per request
			}{
				{"", false, []string{"X_custom"}, 6},
				{UnderscoresAllow, true, []string{"X_custom"}, 6},
				{UnderscoresDrop, false, nil, 7},
				{UnderscoresDrop, true, nil, 7},
				{UnderscoresReject, false, nil, 0},
			} {
				if err := p.Reload(mk(step.mode, step.trusted)); err != nil {
					t.Fatal(err)
				}
				for _, cl := range []struct {
					name string
					c    *http.Client
				}{{"h1", h1c}, {"h2", h2c}} {
					what := cl.name + "-" + protocol + " " + step.mode
					if step.trusted {
						what += " trusted"
					}
					before := dropped()
					status, seen := send(cl.c, underscoreFields)
					if step.mode == UnderscoresReject {
						if status != 400 {
							t.Errorf("%s: %d, want 400", what, status)
						}
						if status, _ := send(cl.c, http.Header{"X-Keep": {"k"}}); status != 200 {
							t.Errorf("%s: %d without an underscore, want 200", what, status)
						}
						continue
					}
					if status != 200 {
						t.Fatalf("%s: %d", what, status)
					}
					if got := underscored(seen); strings.Join(got, ",") != strings.Join(step.want, ",") {
						t.Errorf("%s: server got %q, want %q", what, got, step.want)
					}
					if got := seen.Values("X-Forwarded-For"); len(got) != 1 || got[0] != "127.0.0.1" {
						t.Errorf("%s: X-Forwarded-For %q, want the client", what, got)
					}
					if got := seen.Get("X-Forwarded-Proto"); got != "http" {
						t.Errorf("%s: X-Forwarded-Proto %q, want http", what, got)
					}
					if got := seen.Values("X-User"); len(got) != 1 || got[0] != "gw" {
						t.Errorf("%s: X-User %q, want the rule's", what, got)
					}
					if seen.Get("X-Keep") != "k" {
						t.Errorf("%s: X-Keep %q, want k", what, seen.Get("X-Keep"))
					}
					if d := dropped() - before; d != step.drops {
						t.Errorf("%s: %d dropped, want %d", what, d, step.drops)
					}
				}
			}
			if got, want := scrape(t, p)[`spindle_proxy_listener_underscore_dropped_total{listener="web"}`], float64(dropped()); got != want || want == 0 {
				t.Errorf("/metrics: %v dropped, want %v", got, want)
			}
			for _, proto := range []string{"HTTP/1.1", "HTTP/2.0"} {
				waitLine(t, logPath, proto+" 400 PR", func(m map[string]any) bool {
					return m["proto"] == proto && m["status"] == float64(400) && m["term"] == "PR"
				})
			}
		})
	})
}
