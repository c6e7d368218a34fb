package proxy

import (
	"crypto/tls"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/spindlenet/spindle/engine"
	"github.com/spindlenet/spindle/internal/h2"
	"github.com/spindlenet/spindle/internal/hpack"
	"github.com/spindlenet/spindle/internal/testnet"
)

// smallApp answers each request, once it has all of it, with "a small
// body" in one write: HEADERS and DATA in one TLS record.
type smallApp struct{}

func (smallApp) OnRequest(s *h2.Server, id uint32, r *h2.Request, end bool) {
	if end {
		smallApp{}.answer(s, id)
	}
}
func (smallApp) answer(s *h2.Server, id uint32) {
	if s.WriteHeaders(id, 200, nil, false) == nil {
		s.WriteData(id, []byte("a small body"), true)
	}
}
func (smallApp) OnData(s *h2.Server, id uint32, p []byte, end bool) {
	s.Consumed(id, len(p))
	if end {
		smallApp{}.answer(s, id)
	}
}
func (smallApp) OnTrailers(s *h2.Server, id uint32, fields []hpack.Field) {}
func (smallApp) OnReset(*h2.Server, uint32, h2.ErrCode)                   {}
func (smallApp) OnWritable(*h2.Server, uint32)                            {}
func (smallApp) OnGoAway(*h2.Server, h2.ErrCode, []byte)                  {}

// TestTLSH2UpRecordsPerResponse: behind a TLS listener, an HTTP/2
// response from an h2 pool's server (its HEADERS and DATA in one record)
// goes to the client as one TLS record, as one from an HTTP/1.1 server
// does (TestTLSH2RecordsPerResponse): the response head, flushed as it
// came, and the body went as two.
func TestTLSH2UpRecordsPerResponse(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		ca := newTestCA(t)
		cert, key := ca.issue(t, "web", "web.test")
		up := newTLSUp(t, ca, "app", []string{"app.test"}, func(c *tls.Config) { c.NextProtos = []string{"h2"} }, nil,
			func(c *tls.Conn) { serveH2(c, smallApp{}) })
		cfg := httpConfig(b, up.addr)
		cfg.Pools[0].Protocol = ProtocolH2
		cfg.Pools[0].TLS = &UpstreamTLSConfig{ServerName: "app.test", CAFile: caFile(t, ca, "ca.pem")}
		cfg.Listeners[0].TLS = &TLSConfig{CertFile: cert, KeyFile: key}
		p := startProxy(t, cfg)
		if per := h2RecordsPerResponse(t, p, ca); per > 1.1 {
			t.Errorf("%.2f TLS records per HTTP/2 response from an h2 server, want 1", per)
		}
	})
}

// TestTLSH2UpRecordsPerRequest: a request with a body that an HTTP/2
// client sends in one write, its HEADERS and its DATA, goes to an h2
// pool's server as one TLS record: the request head, flushed as the
// stream started, and the body went as two.
func TestTLSH2UpRecordsPerRequest(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		ca := newTestCA(t)
		certFile, keyFile := ca.issue(t, "app", "app.test")
		pair, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			t.Fatal(err)
		}
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		var mu sync.Mutex
		var rcs []*testnet.RecordCounter
		var conns []net.Conn
		var wg sync.WaitGroup
		t.Cleanup(func() {
			ln.Close()
			mu.Lock()
			for _, c := range conns {
				c.Close()
			}
			mu.Unlock()
			wg.Wait()
		})
		wg.Go(func() {
			for {
				raw, err := ln.Accept()
				if err != nil {
					return
				}
				rc := &testnet.RecordCounter{Conn: raw}
				mu.Lock()
				rcs, conns = append(rcs, rc), append(conns, raw)
				mu.Unlock()
				wg.Go(func() {
					c := tls.Server(rc, &tls.Config{Certificates: []tls.Certificate{pair}, NextProtos: []string{"h2"}})
					defer c.Close()
					serveH2(c, smallApp{})
				})
			}
		})
		records := func() (n int64) {
			mu.Lock()
			defer mu.Unlock()
			for _, r := range rcs {
				n += r.Records()
			}
			return n
		}
		cfg := h2cPoolConfig(b, ln.Addr().String())
		cfg.Pools[0].Protocol = ProtocolH2
		cfg.Pools[0].TLS = &UpstreamTLSConfig{ServerName: "app.test", CAFile: caFile(t, ca, "ca.pem")}
		p := startProxy(t, cfg)

		conn := dial(t, p)
		conn.SetDeadline(time.Now().Add(20 * time.Second))
		r := new(rawStream)
		cl := h2.NewClient(r, nil)
		var tail []byte
		buf := make([]byte, 64<<10)
		post := func() {
			t.Helper()
			*r = rawStream{}
			id, err := cl.Request(&h2.Request{Method: []byte("POST"), Scheme: []byte("http"), Authority: []byte("x"), Path: []byte("/")}, false)
			if err != nil {
				t.Fatal(err)
			}
			cl.WriteData(id, []byte("a small request body"), true)
			for !r.reset && !r.end {
				if out := cl.Pending(); len(out) > 0 { // (the HEADERS and DATA in one write)
					if _, err := conn.Write(out); err != nil {
						t.Fatal(err)
					}
					cl.Written(len(out))
				}
				n, err := conn.Read(buf)
				if n > 0 && cl.FeedTail(&tail, buf[:n]) != nil {
					t.Fatal("connection error")
				}
				if err != nil {
					t.Fatal(err)
				}
			}
			if r.status != 200 || string(r.body) != "a small body" {
				t.Fatalf("%d %q reset %v", r.status, r.body, r.reset)
			}
		}
		for range 5 { // the SETTINGS exchanges and session tickets behind
			post()
		}
		time.Sleep(50 * time.Millisecond)
		const n = 50
		before := records()
		for range n {
			post()
		}
		if per := float64(records()-before) / n; per > 1.1 {
			t.Errorf("%.2f TLS records per HTTP/2 request with a body to an h2 server, want 1", per)
		}
	})
}
