package proxy

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/spindlenet/spindle/engine"
)

// heldBytes returns the capacity, in bytes, of the slices in v and in
// the structs and arrays it holds, not following pointers (other
// objects: the connection, the pool) nor the slices a slice's elements
// hold (they point into buffers counted where they are kept). It counts
// by reflection, so that a buffer added to a stream later counts too.
func heldBytes(v reflect.Value) int {
	switch v.Kind() {
	case reflect.Struct:
		n := 0
		for i := range v.NumField() {
			n += heldBytes(v.Field(i))
		}
		return n
	case reflect.Array:
		n := 0
		for i := range v.Len() {
			n += heldBytes(v.Index(i))
		}
		return n
	case reflect.Slice:
		return v.Cap() * int(v.Type().Elem().Size())
	}
	return 0
}

// pinning returns the names of the slices in v (a stream, as heldBytes
// walks it) whose elements, up to their capacity, are not all zero
// where those elements hold slices of their own: a free stream's field
// lists would keep the buffers their fields point into alive.
func pinning(v reflect.Value, name string) []string {
	switch v.Kind() {
	case reflect.Struct:
		var out []string
		for i := range v.NumField() {
			out = append(out, pinning(v.Field(i), name+"."+v.Type().Field(i).Name)...)
		}
		return out
	case reflect.Slice:
		if v.Type().Elem().Kind() != reflect.Struct {
			return nil
		}
		all := v.Slice3(0, v.Cap(), v.Cap())
		for i := range all.Len() {
			if !all.Index(i).IsZero() {
				return []string{name}
			}
		}
	}
	return nil
}

// h2ConnHeld is what an HTTP/2 client connection keeps in its streams.
type h2ConnHeld struct {
	held       int      // bytes of the streams' slices (heldBytes), open and free
	open, free int      // streams
	pinned     []string // free streams' field lists that point into buffers (pinning)
}

// h2ConnsHeld returns what p's HTTP/2 client connections keep (read on
// their loops).
func h2ConnsHeld(p *Proxy) []h2ConnHeld {
	var out []h2ConnHeld
	for k, el := range p.e.Loops() {
		done := make(chan struct{})
		el.Post(func() {
			for _, c := range p.loops[k].h2conns {
				h := h2ConnHeld{open: len(c.streams), free: len(c.free)}
				for _, st := range c.streams {
					h.held += heldBytes(reflect.ValueOf(st).Elem())
				}
				for _, st := range c.free {
					v := reflect.ValueOf(st).Elem()
					h.held += heldBytes(v)
					h.pinned = append(h.pinned, pinning(v, "st")...)
				}
				out = append(out, h)
			}
			close(done)
		})
		<-done
	}
	return out
}

// bigHeader sets n fields of size bytes each (their values) in h,
// named prefix and a number.
func bigHeader(h http.Header, prefix string, n, size int) {
	for i := range n {
		h.Set(fmt.Sprintf("%s-%d", prefix, i), strings.Repeat(string(rune('a'+i%26)), size))
	}
}

// barrierApp answers a request once n of them are in (or 10s passed),
// so that they are open at once in the proxy: its body read, a head
// with fields fields of size bytes, a body of body bytes and trailers of
// the same size as the head's fields.
type barrierApp struct {
	n, fields, size, body int
	in                    atomic.Int64
	all                   chan struct{}
	once                  sync.Once
}

func newBarrierApp(n, fields, size, body int) *barrierApp {
	return &barrierApp{n: n, fields: fields, size: size, body: body, all: make(chan struct{})}
}

func (a *barrierApp) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	io.Copy(io.Discard, r.Body)
	if a.in.Add(1) >= int64(a.n) {
		a.once.Do(func() { close(a.all) })
	}
	select {
	case <-a.all:
	case <-time.After(10 * time.Second):
	}
	bigHeader(w.Header(), "X-Resp", a.fields, a.size)
	w.WriteHeader(200)
	w.Write(bytes.Repeat([]byte("r"), a.body))
	w.(http.Flusher).Flush()
	bigHeader(w.Header(), http.TrailerPrefix+"X-T", a.fields, a.size)
}

// TestH2StreamsTrimmed: an HTTP/2 client connection whose streams once
// carried large heads, trailers and bodies (more fields than keptFields,
// more bytes than keptHeadBuf) does not keep those buffers once the
// streams ended, to an HTTP/1.1 pool and to an h2c pool: after n
// concurrent streams of that size, what its streams (open and free) hold
// is no more than what the same n streams with small heads and bodies
// left, which keep theirs for the next streams; its free streams' field
// lists point into no buffer; n is more than the free list keeps
// (keptStreams): the extra streams go. The large streams' client has a
// small window, so that the proxy holds their responses' DATA and
// trailers. (Before: 1.6 MB kept after the large streams to the HTTP/1.1
// pool, 5.4 MB to the h2c pool, against 0.36 MB and 73 KB after the
// small ones, their 20 streams all free.)
func TestH2StreamsTrimmed(t *testing.T) {
	const n = keptStreams + 4
	for _, proto := range []string{"http1", "h2c"} {
		t.Run(proto, func(t *testing.T) {
			forBackends(t, func(t *testing.T, b engine.Backend) {
				var cfg *Config
				small, large := newBarrierApp(n, 2, 8, 16), newBarrierApp(n, 80, 150, 128<<10)
				mux := http.NewServeMux()
				mux.HandleFunc("/warm", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })
				mux.Handle("/small", small)
				mux.Handle("/large", large)
				if proto == "h2c" {
					cfg = h2cPoolConfig(b, newH2CUp(t, mux, nil).addr)
				} else {
					cfg = h2cConfig(b, newHTTPUpstream(t, mux.ServeHTTP).addr)
				}
				p := startProxy(t, cfg)
				// round sends n concurrent POSTs to path over one fresh
				// connection (one request first, so that all go on it),
				// with window as its streams' receive window (0: Go's
				// default, 4 MiB; a small one has the proxy hold the
				// response's DATA, and its trailers behind it), and returns
				// what the connection keeps once they ended.
				round := func(path string, fields, size, body, window int) h2ConnHeld {
					c, base := h2Client(t, p)
					c.Transport.(*http.Transport).HTTP2 = &http.HTTP2Config{MaxReceiveBufferPerStream: window}
					do(t, c, mustReq(t, "GET", base+"/warm", nil))
					send := func() error {
						req, _ := http.NewRequest("POST", base+path, bytes.NewReader(bytes.Repeat([]byte("q"), body)))
						bigHeader(req.Header, "X-Req", fields, size)
						req.Trailer = http.Header{}
						for i := range fields {
							req.Trailer.Set(fmt.Sprintf("X-Req-T-%d", i), "")
						}
						bigHeader(req.Trailer, "X-Req-T", fields, size)
						resp, err := c.Do(req)
						if err != nil {
							return err
						}
						defer resp.Body.Close()
						got, err := io.ReadAll(resp.Body)
						if err == nil && (resp.StatusCode != 200 || resp.ProtoMajor != 2) {
							err = fmt.Errorf("%s %s", resp.Proto, resp.Status)
						}
						if err == nil && len(got) == 0 {
							err = fmt.Errorf("no body")
						}
						return err
					}
					var wg sync.WaitGroup
					errs := make([]error, n)
					for i := range n {
						wg.Go(func() { errs[i] = send() })
					}
					wg.Wait()
					for _, err := range errs {
						if err != nil {
							t.Fatalf("%s: %v", path, err)
						}
					}
					var hs []h2ConnHeld
					waitFor(t, "the streams ended", func() bool {
						hs = h2ConnsHeld(p)
						return len(hs) != 1 || hs[0].open == 0
					})
					if len(hs) != 1 {
						t.Fatalf("%s: %d HTTP/2 client connections open, want 1", path, len(hs))
					}
					c.Transport.(*http.Transport).CloseIdleConnections()
					waitFor(t, "the client connection closed", func() bool { return len(h2ConnsHeld(p)) == 0 })
					return hs[0]
				}
				s := round("/small", 2, 8, 16, 0)
				l := round("/large", 80, 150, 48<<10, 4<<10)
				t.Logf("after %d small streams: %+v; after %d large ones: %+v", n, s, n, l)
				for _, h := range []h2ConnHeld{s, l} {
					if h.free > keptStreams {
						t.Errorf("%d streams free, want at most %d", h.free, keptStreams)
					}
					if len(h.pinned) > 0 {
						t.Errorf("free streams' field lists %v point into buffers", h.pinned)
					}
				}
				if s.held == 0 {
					t.Errorf("the connection's streams keep nothing after small streams: their buffers are not reused")
				}
				if l.held > s.held {
					t.Errorf("the connection's streams keep %d bytes after large streams, %d after small ones: want no more", l.held, s.held)
				}
			})
		})
	}
}
