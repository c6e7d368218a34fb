package bench

import (
	"crypto/tls"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestProxyHandshakeDefaults checks what --tls-handshakes and --tls-resume
// imply (TLS, and handshakes for resume) and that they take the tcp and
// http protocols only.
func TestProxyHandshakeDefaults(t *testing.T) {
	for _, tc := range []struct {
		protocol           string
		handshakes, resume bool
		ok                 bool
	}{
		{ProxyProtocolTCP, true, false, true},
		{ProxyProtocolHTTP, true, false, true},
		{ProxyProtocolHTTP, false, true, true},
		{ProxyProtocolH2, true, false, false},
		{ProxyProtocolH2H2, false, true, false},
	} {
		cfg, err := ProxyConfig{Protocol: tc.protocol, TLSHandshakes: tc.handshakes, TLSResume: tc.resume, UpstreamCommand: []string{"/nonexistent"}, ProxyCommand: []string{"/nonexistent"}}.withDefaults()
		switch {
		case !tc.ok && err == nil:
			t.Errorf("%+v: taken", tc)
		case tc.ok && err != nil:
			t.Errorf("%+v: %v", tc, err)
		case tc.ok && (!cfg.TLS || !cfg.TLSHandshakes || cfg.TLSResume != tc.resume):
			t.Errorf("%+v: tls %v, handshakes %v, resume %v", tc, cfg.TLS, cfg.TLSHandshakes, cfg.TLSResume)
		}
	}
}

// TestHandshakeClientTLS checks the clients' configs: without resumption
// no session cache and tickets disabled, with it a cache that counts the
// tickets put in it; both otherwise the --tls client's, which is left as
// it was.
func TestHandshakeClientTLS(t *testing.T) {
	base := proxyClientTLS(nil, []string{"http/1.1"})
	full := handshakeClientTLS(base, false)
	if !full.SessionTicketsDisabled || full.ClientSessionCache != nil || full.MinVersion != tls.VersionTLS13 || len(full.CurvePreferences) != 1 {
		t.Errorf("full: %+v", full)
	}
	res := handshakeClientTLS(base, true)
	if res.SessionTicketsDisabled || res.ClientSessionCache == nil || res.NextProtos[0] != "http/1.1" {
		t.Fatalf("resume: %+v", res)
	}
	res.ClientSessionCache.Put("a", &tls.ClientSessionState{})
	res.ClientSessionCache.Put("a", nil) // a removal, not a ticket
	res.ClientSessionCache.Put("b", &tls.ClientSessionState{})
	if n := tickets(res); n != 2 {
		t.Errorf("tickets %d, want 2", n)
	}
	if _, ok := res.ClientSessionCache.Get("a"); ok {
		t.Error("the removed session is still cached")
	}
	if _, ok := res.ClientSessionCache.Get("b"); !ok {
		t.Error("the session put is not cached")
	}
	if tickets(full) != 0 || base.SessionTicketsDisabled || base.ClientSessionCache != nil {
		t.Error("the base config changed, or a config without a ticket cache counts tickets")
	}
}

// TestCheckHandshakes checks what fails a --tls-handshakes measurement:
// the version, ALPN or cipher suite, no connection, a resumed connection
// without resumption, more full handshakes than one a slot with it.
func TestCheckHandshakes(t *testing.T) {
	alpn := []string{"http/1.1"}
	ok := func(h, r int) *ProxyTLSResult {
		return &ProxyTLSResult{Handshakes: h, Resumed: r, Version: "TLS 1.3", CipherSuite: proxyTLSCipher, ALPN: "http/1.1"}
	}
	for _, tc := range []struct {
		res    *ProxyTLSResult
		slots  int
		resume bool
		ok     bool
	}{
		{ok(100, 0), 4, false, true},
		{ok(100, 96), 4, true, true},
		{ok(100, 100), 4, true, true},
		{ok(100, 1), 4, false, false},
		{ok(100, 95), 4, true, false},
		{ok(0, 0), 4, false, false},
		{nil, 4, false, false},
		{&ProxyTLSResult{Handshakes: 10, Version: "TLS 1.2", CipherSuite: proxyTLSCipher, ALPN: "http/1.1"}, 4, false, false},
		{&ProxyTLSResult{Handshakes: 10, Version: "TLS 1.3", CipherSuite: "TLS_AES_256_GCM_SHA384", ALPN: "http/1.1"}, 4, false, false},
		{&ProxyTLSResult{Handshakes: 10, Version: "TLS 1.3", CipherSuite: proxyTLSCipher}, 4, false, false},
	} {
		err := checkHandshakes(tc.res, tc.slots, alpn, tc.resume)
		if (err == nil) != tc.ok {
			t.Errorf("checkHandshakes(%+v, %d, resume %v): %v", tc.res, tc.slots, tc.resume, err)
		}
	}
}

// TestReadTimeWait reads a captured /proc/net/tcp and tcp6 (proxy on port
// 40000, 0x9C40, upstream on 35000, 0x88B8) and counts the sockets in
// TIME_WAIT by side, those with less than 60 s less the time since the
// start left on their timers (in clock ticks: 0x1388 is 50 s, 0x0F3C
// 39 s) left out as older.
func TestReadTimeWait(t *testing.T) {
	root := t.TempDir()
	writeFile(t, root+"/proc/net/tcp", `  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 0100007F:9C40 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 1 1 0000000000000000 100 0 0 10 0
   1: 0100007F:8001 0100007F:9C40 06 00000000:00000000 03:00001388 00000000     0        0 0 3 0000000000000000
   2: 0100007F:8002 0100007F:9C40 06 00000000:00000000 03:00000F3C 00000000     0        0 0 3 0000000000000000
   3: 0100007F:9C40 0100007F:8003 06 00000000:00000000 03:00001388 00000000     0        0 0 3 0000000000000000
   4: 0100007F:8004 0100007F:88B8 06 00000000:00000000 03:00001388 00000000     0        0 0 3 0000000000000000
   5: 0100007F:88B8 0100007F:8005 06 00000000:00000000 03:00001388 00000000     0        0 0 3 0000000000000000
   6: 0100007F:8006 0100007F:01BB 06 00000000:00000000 03:00001388 00000000     0        0 0 3 0000000000000000
   7: 0100007F:8007 0100007F:9C40 01 00000000:00000000 00:00000000 00000000     0        0 1 1 0000000000000000 20 4 30 10 -1
`)
	writeFile(t, root+"/proc/net/tcp6", `  sl  local_address                         remote_address                        st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 00000000000000000000000001000000:8008 00000000000000000000000001000000:9C40 06 00000000:00000000 03:00001388 00000000     0        0 0 3 0000000000000000
`)
	socks, err := readTimeWait(root)
	if err != nil {
		t.Fatal(err)
	}
	if len(socks) != 7 {
		t.Fatalf("%d sockets in TIME_WAIT, want 7: %v", len(socks), socks)
	}
	got := countTimeWait(nil, socks, 20*time.Second, 40000, 35000)
	want := ProxyTimeWait{ClientSide: 2, ProxySide: 1, ToUpstream: 1, UpstreamSide: 1, Total: 7}
	if got != want {
		t.Errorf("counted %+v, want %+v", got, want)
	}
	if got := countTimeWait(nil, socks, 30*time.Second, 40000, 35000); got.ClientSide != 3 {
		t.Errorf("30 s after the start, %d on the client's side, want 3 (the 39 s one too)", got.ClientSide)
	}
	// At the start the proxy's side one was there with 50.5 s left: the
	// same socket (not a later one on the same addresses, with more left).
	before := []twSocket{{local: "0100007F:9C40", remote: "0100007F:8003", left: 50*time.Second + 500*time.Millisecond}, {local: "0100007F:8001", remote: "0100007F:9C40", left: 49 * time.Second}}
	want.ProxySide = 0
	if got := countTimeWait(before, socks, 20*time.Second, 40000, 35000); got != want {
		t.Errorf("with the sockets at the start, counted %+v, want %+v", got, want)
	}
	writeFile(t, root+"/proc/net/tcp", "header\n   0: 0100007F:ZZZZ 0100007F:9C40 06 0:0 03:00001388\n")
	if _, err := readTimeWait(root); err == nil {
		t.Error("a bad port read")
	}
	writeFile(t, root+"/proc/net/tcp", "header\n   0: 0100007F:8001 0100007F:9C40 06 0:0 03\n")
	if _, err := readTimeWait(root); err == nil {
		t.Error("a bad timer read")
	}
}

// TestProxyHandshakeReport checks what a --tls-handshakes report says:
// its title, rate column, TLS line (handshakes, resumed, tickets, the
// server's bytes) and TIME_WAIT line (the most of each count over an
// arm's measurements).
func TestProxyHandshakeReport(t *testing.T) {
	hs := func(h, r, tk int) *ProxyTLSResult {
		return &ProxyTLSResult{Handshakes: h, Resumed: r, Tickets: tk, ServerBytes: 590.4, Version: "TLS 1.3", CipherSuite: proxyTLSCipher, ALPN: "http/1.1"}
	}
	rep := &ProxyReport{Schema: ProxySchema, Config: ProxySettings{Protocol: ProxyProtocolHTTP, TLS: true, TLSHandshakes: true, TLSResume: true, Conns: 4, Reps: 2}, Results: []ProxyResult{
		{Arm: ProxyArmSpindleUring, Rep: 1, TLS: hs(100, 97, 100), TimeWait: &ProxyTimeWait{ClientSide: 100, ToUpstream: 3, Total: 500}},
		{Arm: ProxyArmSpindleUring, Rep: 2, TLS: hs(90, 88, 90), TimeWait: &ProxyTimeWait{ClientSide: 90, ProxySide: 1, Total: 600}},
		{Arm: ProxyArmHAProxy, Rep: 1, TLS: hs(50, 46, 50), TimeWait: &ProxyTimeWait{ClientSide: 50, UpstreamSide: 2, Total: 550}},
	}}
	md := ProxyMarkdown(rep)
	markdownHas(t, md,
		"# spindle bench proxy report: HTTP/1.1 reverse proxies (POSTs, echoed), TLS 1.3 on the client side, a connection and a resumed handshake per request\n",
		"the clients agreed: spindle-uring TLS 1.3 TLS_AES_128_GCM_SHA256 http/1.1 (100 handshakes, 97 resumed, 100 tickets sent, 590 bytes from the server a connection); haproxy TLS 1.3 TLS_AES_128_GCM_SHA256 http/1.1 (50 handshakes, 46 resumed, 50 tickets sent, 590 bytes from the server a connection)\n",
		"upstream side, of all on the host at its end): spindle-uring 100 / 1 / 3 / 0 of 600; haproxy 50 / 0 / 0 / 2 of 550\n",
		"- 4 connection slots, closed loop: each connection one request",
		"| arm | handshakes/s | p50 |",
	)
	rep.Config.TLSResume = false
	if got := proxyTitle(rep.Config); got != "HTTP/1.1 reverse proxies (POSTs, echoed), TLS 1.3 on the client side, a connection and a full handshake per request" {
		t.Errorf("title %q", got)
	}
	rep.Config.TLSHandshakes = false
	if md := ProxyMarkdown(rep); strings.Contains(md, "TIME_WAIT") || strings.Contains(md, "handshakes/s") || strings.Contains(md, "resumed") {
		t.Errorf("a --tls report says handshake things:\n%s", md)
	}
}

// writeFile writes text to path, making its directories.
func writeFile(t *testing.T, path, text string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}
