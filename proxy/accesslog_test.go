package proxy

import (
	"encoding/json"
	"net/netip"
	"strings"
	"testing"
	"time"
)

// checkQuoted checks appendQuoted against encoding/json: its output is
// one JSON string that decodes to what encoding/json makes of s (invalid
// UTF-8 as U+FFFD), on one line.
func checkQuoted(t *testing.T, s string) {
	t.Helper()
	got := appendQuoted(nil, s, len(s))
	var dec string
	if err := json.Unmarshal(got, &dec); err != nil {
		t.Fatalf("appendQuoted(%q) = %s: not a JSON string: %v", s, got, err)
	}
	want, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	var wantDec string
	if err := json.Unmarshal(want, &wantDec); err != nil {
		t.Fatal(err)
	}
	if dec != wantDec {
		t.Errorf("appendQuoted(%q) decodes to %q, encoding/json's to %q", s, dec, wantDec)
	}
	if strings.ContainsAny(string(got), "\n\r") {
		t.Errorf("appendQuoted(%q) = %q spans lines", s, got)
	}
}

func TestAppendQuoted(t *testing.T) {
	for _, s := range []string{
		"", "/plain?a=b", `quote " and \ backslash`, "nl\nlf\rtab\t", "\x00\x01\x1f\x7f", "é€😀",
		"\xff\xfe", "bad \xc3 cut", "\xe2\x82", "\xed\xa0\x80 surrogate", "\xf4\x90\x80\x80 too big", "</script>&", "\u2028\u2029",
	} {
		checkQuoted(t, s)
	}
	// The bound cuts the input, not the output: a sequence cut in two is
	// U+FFFD.
	if got := string(appendQuoted(nil, "ab€", 3)); got != `"ab\ufffd"` {
		t.Errorf("cut: %s", got)
	}
}

func FuzzAppendQuoted(f *testing.F) {
	for _, s := range []string{"", "a\"b", "\x00\xff", "€\xe2\x82"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) { checkQuoted(t, s) })
}

// TestLogFieldsAllocs: formatting a line allocates nothing; a client's
// IPv4-mapped address is written as IPv4.
func TestLogFieldsAllocs(t *testing.T) {
	client := netip.MustParseAddrPort("[::ffff:127.0.0.1]:5555")
	buf := make([]byte, 0, maxLogLine)
	target := []byte("/a\"b?\x01")
	now := time.Now()
	for _, js := range []bool{true, false} {
		n := testing.AllocsPerRun(100, func() {
			f := logFields{o: buf[:0], json: js}
			f.begin(now, "web", client)
			f.str("target", target)
			f.num("status", 200)
			f.raw("term", termCodes[termClient])
			f.lit("reused", "true")
			f.server(nil)
			f.end()
		})
		if n != 0 {
			t.Errorf("json %v: %v allocations a line, want 0", js, n)
		}
	}
	f := logFields{json: false}
	f.begin(now, "web", client)
	if got := string(f.end()); !strings.HasSuffix(got, ` "web" 127.0.0.1:5555`+"\n") {
		t.Errorf("text line %q", got)
	}
}

func TestRouteNames(t *testing.T) {
	cfg, err := ParseConfig([]byte(`
listeners: [{name: web, listen: "127.0.0.1:0", pool: app, mode: http, routes: [
  {host: api.example.com, path_prefix: /v1/, pool: app},
  {path_prefix: /static/, pool: app},
  {host: api.example.com, path_prefix: /v1/, pool: app},
  {name: route3, host: x.org, pool: app},
  {host: y.org, pool: app, name: "y.org/"},
  {host: "route2", pool: app},
  {pool: app}]}]
pools: [{name: app, servers: ["127.0.0.1:1"]}]
`))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range cfg.Listeners[0].Routes {
		got = append(got, r.Name)
	}
	// A default taken by a route before it, or by a name given, is
	// route<index>, and that taken, route<index>~2.
	want := []string{"api.example.com/v1/", "/static/", "route2", "route3", "y.org/", "route2/", "/"}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("route names %q, want %q", got, want)
	}
	cfg, err = ParseConfig([]byte(`
listeners: [{name: web, listen: "127.0.0.1:0", pool: app, mode: http, routes: [{path_prefix: /a/, pool: app}, {path_prefix: /a/, pool: app}, {name: route1, pool: app}]}]
pools: [{name: app, servers: ["127.0.0.1:1"]}]
`))
	if err != nil {
		t.Fatal(err)
	}
	if n := cfg.Listeners[0].Routes[1].Name; n != "route1~2" {
		t.Errorf("second /a/ named %q, want route1~2", n)
	}
}

// TestAccessLogConfig: the defaults, and each mistake reported with its
// field.
func TestAccessLogConfig(t *testing.T) {
	cfg, err := ParseConfig([]byte(`
listeners: [{name: web, listen: "127.0.0.1:0", pool: app, access_log: {path: "-"}}, {name: gw, listen: "127.0.0.1:0", pool: app, mode: http, access_log: {path: /tmp/x.log, format: text}}]
pools: [{name: app, servers: ["127.0.0.1:1"]}]
`))
	if err != nil {
		t.Fatal(err)
	}
	if a := cfg.Listeners[0].AccessLog; a == nil || a.Path != "-" || a.Format != AccessLogJSON {
		t.Errorf("tcp access log %+v", a)
	}
	if a := cfg.Listeners[1].AccessLog; a == nil || a.Format != AccessLogText {
		t.Errorf("http access log %+v", a)
	}
	pool := `pools: [{name: app, servers: ["127.0.0.1:1"]}]` + "\n"
	for _, tc := range []struct{ name, yaml, want string }{
		{"format", `listeners: [{name: a, listen: ":1", pool: app, access_log: {path: "-", format: xml}}]` + "\n" + pool, `listeners[0] (a).access_log.format: unknown "xml"`},
		{"path", `listeners: [{name: a, listen: ":1", pool: app, mode: http, access_log: {format: json}}]` + "\n" + pool, "listeners[0] (a).access_log.path: missing"},
		{"unknown field", `listeners: [{name: a, listen: ":1", pool: app, access_log: {path: "-", buffer: 1}}]` + "\n" + pool, "field buffer not found"},
		{"route names", `listeners: [{name: a, listen: ":1", pool: app, mode: http, routes: [{name: api, pool: app}, {name: api, path_prefix: /x/, pool: app}]}]` + "\n" + pool, `listeners[0] (a).routes[1].name: "api" is routes[0]'s name too`},
		{"route default", `listeners: [{name: a, listen: ":1", pool: app, mode: http, routes: [{name: default, pool: app}]}]` + "\n" + pool, `listeners[0] (a).routes[0].name: "default" names the listener's pool`},
		{"route control", `listeners: [{name: a, listen: ":1", pool: app, mode: http, routes: [{name: "a\tb", pool: app}]}]` + "\n" + pool, `listeners[0] (a).routes[0].name: "a\tb" has a control byte`},
		{"route long", `listeners: [{name: a, listen: ":1", pool: app, mode: http, routes: [{name: ` + strings.Repeat("n", 129) + `, pool: app}]}]` + "\n" + pool, "longer than 128 bytes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseConfig([]byte(tc.yaml))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

// TestAccessLogExample: the example config's access logs and route names.
func TestAccessLogExample(t *testing.T) {
	cfg, err := LoadConfig("../examples/proxy/proxy.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if a := cfg.Listeners[0].AccessLog; a == nil || a.Path != "-" || a.Format != AccessLogText {
		t.Errorf("web's access log %+v", a)
	}
	l := cfg.Listeners[1]
	if a := l.AccessLog; a == nil || a.Path != "-" || a.Format != AccessLogJSON {
		t.Errorf("gateway's access log %+v", a)
	}
	if l.Routes[0].Name != "api-v1" || l.Routes[1].Name != "*.static.example.com/" {
		t.Errorf("route names %q, %q", l.Routes[0].Name, l.Routes[1].Name)
	}
}

func TestLogHostPath(t *testing.T) {
	for _, tc := range []struct{ target, hostHdr, host, path string }{
		{"/a?b", "x.org", "x.org", "/a?b"},
		{"http://y.org:8080/a?b", "y.org:8080", "y.org:8080", "/a?b"},
		{"http://y.org?q", "y.org", "y.org", "?q"},
		{"*", "x.org", "x.org", "*"},
	} {
		h, p := logHostPath([]byte(tc.target), []byte(tc.hostHdr))
		if string(h) != tc.host || string(p) != tc.path {
			t.Errorf("logHostPath(%q, %q) = %q, %q; want %q, %q", tc.target, tc.hostHdr, h, p, tc.host, tc.path)
		}
	}
}

// TestLogFieldsAddrZone: an IPv6 zone (an interface's name, which may
// hold '"' or '\\') is escaped in the client and server fields: a JSON
// line stays one object whose fields are the addresses, a text line's
// fields are those addresses (quoted as JSON strings where they need
// escaping); an address that needs none is written as before, bare in
// text.
func TestLogFieldsAddrZone(t *testing.T) {
	now := time.Now()
	for _, tc := range []struct {
		client, server string
		bare           bool // written bare in text
	}{
		{netip.AddrPortFrom(netip.MustParseAddr("fe80::1").WithZone(`a"b\c`), 5555).String(), `[fe80::2%x"y]:443`, false},
		{netip.AddrPortFrom(netip.MustParseAddr("fe80::1").WithZone("e\x01 f"), 5555).String(), `[fe80::2%x\\]:443`, false},
		{"[fe80::1%eth0]:5555", "127.0.0.1:80", true},
	} {
		client := netip.MustParseAddrPort(tc.client)
		if client.String() != tc.client {
			t.Fatalf("%q parses as %q", tc.client, client)
		}
		for _, js := range []bool{true, false} {
			f := logFields{json: js}
			f.begin(now, "web", client)
			f.server(&server{addr: tc.server})
			f.num("status", 200)
			line := string(f.end())
			if strings.Count(line, "\n") != 1 {
				t.Errorf("json %v: %q spans lines", js, line)
				continue
			}
			if js {
				var m map[string]any
				if err := json.Unmarshal([]byte(line), &m); err != nil {
					t.Errorf("not a JSON object: %v: %s", err, line)
					continue
				}
				if m["client"] != tc.client || m["server"] != tc.server || m["status"] != 200.0 {
					t.Errorf("JSON line %s: client %q, server %q, status %v; want %q, %q, 200", line, m["client"], m["server"], m["status"], tc.client, tc.server)
				}
				continue
			}
			fields := textFields(t, line)
			if len(fields) != 5 || fields[2] != tc.client || fields[3] != tc.server || fields[4] != "200" {
				t.Errorf("text line %q: fields %q, want [time web %q %q 200]", line, fields, tc.client, tc.server)
			}
			if bare := strings.Contains(line, " "+tc.client+" "); bare != tc.bare {
				t.Errorf("text line %q: client bare %v, want %v", line, bare, tc.bare)
			}
		}
	}
}

// textFields splits a text log line into its fields: JSON strings
// decoded, bare ones as they are.
func textFields(t *testing.T, line string) []string {
	t.Helper()
	var fields []string
	rest := strings.TrimSuffix(line, "\n")
	for rest != "" {
		if rest[0] != '"' {
			v, r, _ := strings.Cut(rest, " ")
			fields, rest = append(fields, v), r
			continue
		}
		d := json.NewDecoder(strings.NewReader(rest))
		var v string
		if err := d.Decode(&v); err != nil {
			t.Fatalf("text line %q: %v at %q", line, err, rest)
		}
		fields = append(fields, v)
		rest = strings.TrimPrefix(rest[d.InputOffset():], " ")
	}
	return fields
}
