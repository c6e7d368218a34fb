package h2

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/spindlenet/spindle/internal/hpack"
)

// drive runs c over nc until done() or a failure: the loop a proxy's
// upstream connection would run.
func drive(t *testing.T, c *Client, nc net.Conn, done func() bool) {
	t.Helper()
	buf := make([]byte, 0, 1<<16)
	rd := make([]byte, 1<<15)
	deadline := time.Now().Add(20 * time.Second)
	for {
		if out := c.Pending(); len(out) > 0 {
			n, err := nc.Write(out)
			c.Written(n)
			if err != nil {
				t.Fatalf("write: %v", err)
			}
		}
		if done() {
			return
		}
		nc.SetReadDeadline(deadline)
		n, err := nc.Read(rd)
		if err != nil {
			t.Fatalf("read: %v", err)
		}
		buf = append(buf, rd[:n]...)
		k, ferr := c.Feed(buf)
		buf = buf[:copy(buf, buf[k:])]
		if ferr != nil {
			t.Fatalf("client: %v", ferr)
		}
	}
}

// goServer starts Go's net/http server for h speaking h2c with prior
// knowledge (with HTTP/2 config cfg, if not nil) until the test ends, and
// returns a Client connected to it past the SETTINGS exchange.
func goServer(t *testing.T, h http.Handler, cfg *http.HTTP2Config) (*Client, *clientApp, net.Conn) {
	srv := httptest.NewUnstartedServer(h)
	srv.Config.Protocols = new(http.Protocols)
	srv.Config.Protocols.SetUnencryptedHTTP2(true)
	srv.Config.HTTP2 = cfg
	srv.Start()
	t.Cleanup(srv.Close)
	nc, err := net.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	a := newClientApp()
	c := NewClient(a, nil)
	drive(t, c, nc, func() bool { return !c.SettingsPending() })
	return c, a, nc
}

// TestClientGoServer: a Client against Go's net/http server speaking h2c
// with prior knowledge over TCP: GET, a 1 MiB POST echoed, 100 concurrent
// streams, trailers both ways (gRPC-like: declared with Trailer and set
// after the body, which net/http sends as a trailing HEADERS).
func TestClientGoServer(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("/hello", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		io.WriteString(w, "hello, "+r.Proto)
	})
	mux.HandleFunc("/echo", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Trailer", "Grpc-Status, X-Got")
		n, _ := io.Copy(w, r.Body)
		w.Header().Set("Grpc-Status", strconv.FormatInt(n, 10))
		w.Header().Set("X-Got", r.Trailer.Get("X-Check"))
	})
	c, a, nc := goServer(t, mux, nil)

	get := &Request{Method: []byte("GET"), Scheme: []byte("http"), Authority: []byte("go"), Path: []byte("/hello")}
	id, _ := a.start(c, get, nil, nil)
	drive(t, c, nc, func() bool { return a.st[id].ended })
	if st := a.st[id]; fmt.Sprint(st.status) != "[200]" || string(st.body) != "hello, HTTP/2.0" {
		t.Fatalf("GET: %v %q %v", st.status, st.body, st.fields)
	}

	big := pattern(1 << 20)
	check := []hpack.Field{{Name: []byte("x-check"), Value: []byte("yes")}}
	post := req("/echo")
	post.Fields = []hpack.Field{{Name: []byte("trailer"), Value: []byte("x-check")}}
	id, _ = a.start(c, post, big, check)
	drive(t, c, nc, func() bool { return a.st[id].ended || a.st[id].reset != "" })
	if st := a.st[id]; fmt.Sprint(st.status) != "[200]" || !bytes.Equal(st.body, big) || fmt.Sprint(st.trailers) != "[grpc-status=1048576 x-got=yes]" {
		t.Fatalf("POST 1 MiB: %v %d bytes trailers %v reset %q", st.status, len(st.body), st.trailers, st.reset)
	}

	var ids []uint32
	for i := range 100 {
		id, err := a.start(c, req("/echo"), pattern(1000*i), nil)
		if err != nil {
			t.Fatalf("stream %d: %v", i, err)
		}
		ids = append(ids, id)
	}
	drive(t, c, nc, func() bool { return c.live() == 0 })
	for i, id := range ids {
		st := a.st[id]
		if fmt.Sprint(st.status) != "[200]" || !bytes.Equal(st.body, pattern(1000*i)) || fmt.Sprint(st.trailers) != fmt.Sprintf("[grpc-status=%d x-got=]", 1000*i) {
			t.Fatalf("stream %d: %v %d bytes %v reset %q", id, st.status, len(st.body), st.trailers, st.reset)
		}
	}
	c.Shutdown()
	drive(t, c, nc, c.Done)
}

// TestClientGoServerSmallWindows: a Client uploads 32 MiB to Go's net/http
// server with 64 KiB receive windows, which credits the stream and the
// connection every few DATA frames: those WINDOW_UPDATEs return window
// our DATA used and are not charged to the control-frame budget (before,
// the upload ended with ENHANCE_YOUR_CALM).
func TestClientGoServerSmallWindows(t *testing.T) {
	c, a, nc := goServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, err := io.Copy(io.Discard, r.Body)
		fmt.Fprintf(w, "%d %v", n, err)
	}), smallWindows)
	id, err := a.start(c, req("/upload"), pattern(32<<20), nil)
	if err != nil {
		t.Fatal(err)
	}
	drive(t, c, nc, func() bool { return a.st[id].ended || a.st[id].reset != "" })
	if st := a.st[id]; fmt.Sprint(st.status) != "[200]" || string(st.body) != fmt.Sprintf("%d <nil>", 32<<20) {
		t.Fatalf("upload: %v %q reset %q", st.status, st.body, st.reset)
	}
	c.Shutdown()
	drive(t, c, nc, c.Done)
}
