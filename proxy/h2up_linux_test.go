package proxy

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/spindlenet/spindle/engine"
)

// h2cUp is a net/http server speaking h2c with prior knowledge only (no
// HTTP/1.1: a request that reached it came over HTTP/2), counting the
// connections it accepted.
type h2cUp struct {
	addr  string
	srv   *httptest.Server
	conns atomic.Int64
}

type connKey struct{}

// newH2CUp starts an h2c server for h until the test ends; edit, if not
// nil, changes its http.Server first. The handler finds its net.Conn in
// its request's context under connKey{}.
func newH2CUp(t *testing.T, h http.Handler, edit func(*http.Server)) *h2cUp {
	t.Helper()
	u := &h2cUp{}
	srv := httptest.NewUnstartedServer(h)
	srv.Config.Protocols = new(http.Protocols)
	srv.Config.Protocols.SetUnencryptedHTTP2(true)
	srv.Config.ConnState = func(c net.Conn, s http.ConnState) {
		if s == http.StateNew {
			u.conns.Add(1)
		}
	}
	srv.Config.ConnContext = func(ctx context.Context, c net.Conn) context.Context {
		return context.WithValue(ctx, connKey{}, c)
	}
	if edit != nil {
		edit(srv.Config)
	}
	srv.Start()
	t.Cleanup(srv.Close)
	u.srv, u.addr = srv, srv.Listener.Addr().String()
	return u
}

// h2cPoolConfig is h2cConfig (HTTP/2 clients) with the pool h2c.
func h2cPoolConfig(b engine.Backend, servers ...string) *Config {
	cfg := h2cConfig(b, servers...)
	cfg.Pools[0].Protocol = ProtocolH2C
	return cfg
}

// grpcMsg frames p as a gRPC length-prefixed message (not compressed).
func grpcMsg(p []byte) []byte {
	b := make([]byte, 5, 5+len(p))
	binary.BigEndian.PutUint32(b[1:], uint32(len(p)))
	return append(b, p...)
}

// readMsg reads one gRPC length-prefixed message.
func readMsg(r io.Reader) ([]byte, error) {
	var h [5]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		return nil, err
	}
	p := make([]byte, binary.BigEndian.Uint32(h[1:]))
	_, err := io.ReadFull(r, p)
	return p, err
}

// grpcHandler is a gRPC-shaped service: /Echo/Unary answers its one
// message with "re:" and it; /Echo/Bidi answers each message as it comes
// (flushed), and ends with grpc-status 0 at the request's end; both check
// content-type application/grpc and te: trailers, and end with
// grpc-status and grpc-message trailers. A request that did not come over
// HTTP/2 gets 505.
func grpcHandler(w http.ResponseWriter, r *http.Request) {
	if r.ProtoMajor != 2 || r.Header.Get("Content-Type") != "application/grpc" {
		http.Error(w, "not gRPC over HTTP/2", 505)
		return
	}
	w.Header().Set("Content-Type", "application/grpc")
	w.Header().Set("X-Saw-XFF", r.Header.Get("X-Forwarded-For"))
	w.Header().Set("X-Saw-Via", r.Header.Get("Via"))
	w.Header().Set("X-Saw-TE", r.Header.Get("Te"))
	w.Header().Set("Trailer", "Grpc-Status, Grpc-Message")
	switch r.URL.Path {
	case "/Echo/Unary":
		m, err := readMsg(r.Body)
		if err != nil {
			w.Header().Set("Grpc-Status", "3")
			return
		}
		w.Write(grpcMsg(append([]byte("re:"), m...)))
	case "/Echo/Bidi":
		rc := http.NewResponseController(w)
		w.WriteHeader(200)
		rc.Flush()
		for {
			m, err := readMsg(r.Body)
			if err != nil {
				break
			}
			w.Write(grpcMsg(append([]byte("re:"), m...)))
			rc.Flush()
		}
	}
	w.Header().Set("Grpc-Status", "0")
	w.Header().Set("Grpc-Message", "fine")
}

// TestH2UpGRPC: a gRPC-shaped exchange through an h2c listener to an h2c
// pool: unary (one message each way, grpc-status and grpc-message
// trailers back), and bidi streaming where the client sends its next
// message only once the reply to the last came back, so nothing on the
// way waits for a whole body. The server saw HTTP/2 (it refuses anything
// else), te: trailers, X-Forwarded-For and Via: 2.0 spindle; the client
// got via; one upstream connection carried all of it.
func TestH2UpGRPC(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		up := newH2CUp(t, http.HandlerFunc(grpcHandler), nil)
		p := startProxy(t, h2cPoolConfig(b, up.addr))
		c, base := h2Client(t, p)
		req, _ := http.NewRequest("POST", base+"/Echo/Unary", bytes.NewReader(grpcMsg([]byte("hello"))))
		req.Header.Set("Content-Type", "application/grpc")
		req.Header.Set("TE", "trailers")
		resp, body := do(t, c, req)
		m, err := readMsg(bytes.NewReader(body))
		if err != nil || string(m) != "re:hello" {
			t.Fatalf("unary reply %q, %v", m, err)
		}
		if resp.StatusCode != 200 || resp.Trailer.Get("Grpc-Status") != "0" || resp.Trailer.Get("Grpc-Message") != "fine" {
			t.Fatalf("unary: %d, trailers %v", resp.StatusCode, resp.Trailer)
		}
		if resp.Header.Get("X-Saw-XFF") != "127.0.0.1" || resp.Header.Get("X-Saw-Via") != "2.0 spindle" || resp.Header.Get("X-Saw-TE") != "trailers" || resp.Header.Get("Via") != "2.0 spindle" {
			t.Errorf("fields: %v", resp.Header)
		}

		pr, pw := io.Pipe()
		req, _ = http.NewRequest("POST", base+"/Echo/Bidi", pr)
		req.Header.Set("Content-Type", "application/grpc")
		respc := make(chan *http.Response, 1)
		errc := make(chan error, 1)
		go func() {
			resp, err := c.Do(req)
			if err != nil {
				errc <- err
				return
			}
			respc <- resp
		}()
		var rb io.ReadCloser
		select {
		case resp = <-respc:
			rb = resp.Body
		case err := <-errc:
			t.Fatal(err)
		case <-time.After(10 * time.Second):
			t.Fatal("no response head for a bidi stream before any message")
		}
		defer rb.Close()
		for i := range 5 {
			msg := fmt.Sprintf("msg %d", i)
			done := make(chan struct{})
			go func() {
				defer close(done)
				pw.Write(grpcMsg([]byte(msg)))
			}()
			m, err := readMsg(rb)
			if err != nil || string(m) != "re:"+msg {
				t.Fatalf("bidi reply %d: %q, %v", i, m, err)
			}
			<-done
		}
		pw.Close()
		if rest, err := io.ReadAll(rb); err != nil || len(rest) != 0 {
			t.Fatalf("bidi end: %q, %v", rest, err)
		}
		if resp.Trailer.Get("Grpc-Status") != "0" {
			t.Fatalf("bidi trailers %v", resp.Trailer)
		}
		if n := up.conns.Load(); n != 1 {
			t.Errorf("%d upstream connections, want 1", n)
		}
		if st := serverTotals(p, up.addr); st.H2Streams != 2 || st.H2Connections != 1 || st.Active != 0 {
			t.Errorf("server totals: %+v", st)
		}
	})
}

var _ = errors.New
var _ = strings.Contains
var _ sync.Mutex
