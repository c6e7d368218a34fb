package proxy

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/spindlenet/spindle/engine"
)

// h2cConfig is httpConfig with h2c on.
func h2cConfig(b engine.Backend, servers ...string) *Config {
	cfg := httpConfig(b, servers...)
	cfg.Listeners[0].H2C = true
	return cfg
}

// h2Client returns an http.Client speaking HTTP/2 with prior knowledge
// (h2c) to p's listener "web", and its base URL.
func h2Client(t *testing.T, p *Proxy) (*http.Client, string) {
	var pr http.Protocols
	pr.SetUnencryptedHTTP2(true)
	tr := &http.Transport{Protocols: &pr, DisableCompression: true}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 20 * time.Second}, "http://" + p.Addr("web").String()
}

// do sends req and returns the response and its body, checking that it
// came over HTTP/2.
func do(t *testing.T, c *http.Client, req *http.Request) (*http.Response, []byte) {
	t.Helper()
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	if resp.ProtoMajor != 2 {
		t.Fatalf("response over %s, want HTTP/2.0", resp.Proto)
	}
	return resp, body
}

// TestH2GetPost: over one HTTP/2 connection, a GET and a POST of 1 MiB
// (with content-length, and without: chunked to the server) are forwarded
// as HTTP/1.1, their bodies checked both ways; the server sees Host from
// :authority, X-Forwarded-For and Via: 2.0; the response's
// connection-specific fields are not passed on; the metrics count the
// connection and its streams.
func TestH2GetPost(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		big := randomBytes(7, 1<<20)
		u := newHTTPUpstream(t, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("X-Host", r.Host)
			w.Header().Set("X-Got-XFF", r.Header.Get("X-Forwarded-For"))
			w.Header().Set("X-Got-Via", r.Header.Get("Via"))
			w.Header().Set("X-Got-TE", strings.Join(r.TransferEncoding, ","))
			w.Header().Set("Keep-Alive", "timeout=5")
			switch r.Method {
			case "POST":
				body, _ := io.ReadAll(r.Body)
				w.Header().Set("X-Sum", sum(body))
				w.Write(body)
			default:
				w.Write(big)
			}
		})
		p := startProxy(t, h2cConfig(b, u.addr))
		c, base := h2Client(t, p)

		req, _ := http.NewRequest("GET", base+"/get", nil)
		resp, body := do(t, c, req)
		if resp.StatusCode != 200 || !bytes.Equal(body, big) {
			t.Fatalf("GET: %d, %d bytes (want 200 and the 1 MiB sent)", resp.StatusCode, len(body))
		}
		if got, want := resp.Header.Get("X-Host"), p.Addr("web").String(); got != want {
			t.Errorf("Host at the server %q, want %q", got, want)
		}
		if got := resp.Header.Get("X-Got-XFF"); got != "127.0.0.1" {
			t.Errorf("X-Forwarded-For at the server %q, want 127.0.0.1", got)
		}
		if got := resp.Header.Get("X-Got-Via"); got != "2.0 spindle" {
			t.Errorf("Via at the server %q, want 2.0 spindle", got)
		}
		if resp.Header.Get("Keep-Alive") != "" {
			t.Errorf("Keep-Alive passed on to an HTTP/2 client")
		}

		for _, chunked := range []bool{false, true} {
			var rd io.Reader = bytes.NewReader(big)
			if chunked {
				rd = io.MultiReader(rd) // no length known: no content-length
			}
			req, _ := http.NewRequest("POST", base+"/post", rd)
			resp, body := do(t, c, req)
			if resp.StatusCode != 200 || !bytes.Equal(body, big) || resp.Header.Get("X-Sum") != sum(big) {
				t.Fatalf("POST (chunked %v): %d, %d bytes back, server's sum %q (want 200 and the 1 MiB)", chunked, resp.StatusCode, len(body), resp.Header.Get("X-Sum"))
			}
			if got, want := resp.Header.Get("X-Got-TE"), map[bool]string{false: "", true: "chunked"}[chunked]; got != want {
				t.Errorf("POST (chunked %v): server's Transfer-Encoding %q, want %q", chunked, got, want)
			}
		}
		lt := p.Totals().Listeners[0]
		if lt.H2Connections != 1 || lt.H2Streams != 3 {
			t.Errorf("h2 connections %d, streams %d; want 1 and 3", lt.H2Connections, lt.H2Streams)
		}
	})
}

// TestH2Concurrent: 100 concurrent streams on one HTTP/2 connection, over
// several upstream connections, each answered with its own body.
func TestH2Concurrent(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		u := newHTTPUpstream(t, func(w http.ResponseWriter, r *http.Request) {
			time.Sleep(20 * time.Millisecond)
			io.WriteString(w, strings.Repeat(r.URL.Path, 1000))
		})
		p := startProxy(t, h2cConfig(b, u.addr))
		c, base := h2Client(t, p)
		get(t, c, base+"/warm") // one connection, its SETTINGS known, before the burst
		const n = 100
		var wg sync.WaitGroup
		errc := make(chan error, n)
		for i := range n {
			wg.Go(func() {
				path := fmt.Sprintf("/s%d", i)
				resp, err := c.Get(base + path)
				if err != nil {
					errc <- err
					return
				}
				body, err := io.ReadAll(resp.Body)
				resp.Body.Close()
				if err != nil || resp.StatusCode != 200 || string(body) != strings.Repeat(path, 1000) || resp.ProtoMajor != 2 {
					errc <- fmt.Errorf("%s: %v, %d, %s, %d bytes", path, err, resp.StatusCode, resp.Proto, len(body))
				}
			})
		}
		wg.Wait()
		close(errc)
		for err := range errc {
			t.Error(err)
		}
		lt := p.Totals().Listeners[0]
		if lt.H2Connections != 1 || lt.H2Streams != n+1 {
			t.Errorf("h2 connections %d, streams %d; want 1 and %d", lt.H2Connections, lt.H2Streams, n+1)
		}
		if got := u.accepted.Load(); got < 2 {
			t.Errorf("the server accepted %d connections, want several (one a concurrent stream)", got)
		}
	})
}

// TestH2H1Unchanged: an HTTP/1.1 client on an h2c listener is served as
// without h2c, also one that sends a head in pieces starting with "P".
func TestH2H1Unchanged(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		u := newHTTPUpstream(t, func(w http.ResponseWriter, r *http.Request) {
			io.WriteString(w, r.Method+" "+r.URL.Path)
		})
		p := startProxy(t, h2cConfig(b, u.addr))
		c, base := client(t, p)
		resp, body := get(t, c, base+"/x")
		if resp.StatusCode != 200 || body != "GET /x" || resp.ProtoMajor != 1 {
			t.Fatalf("%s %d %q", resp.Proto, resp.StatusCode, body)
		}
		cn := dial(t, p)
		for _, part := range []string{"P", "UT /y HTTP/1.1\r\nHost: a\r\n", "Content-Length: 0\r\n\r\n"} {
			io.WriteString(cn, part)
			time.Sleep(20 * time.Millisecond)
		}
		resp, got := readResponse(t, cn, "PUT")
		if resp.StatusCode != 200 || got != "PUT /y" {
			t.Fatalf("PUT in pieces: %d %q", resp.StatusCode, got)
		}
		if lt := p.Totals().Listeners[0]; lt.H2Connections != 0 {
			t.Errorf("%d h2 connections counted, want 0", lt.H2Connections)
		}
	})
}
