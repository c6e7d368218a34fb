package proxy

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"github.com/spindlenet/spindle/engine"
	"github.com/spindlenet/spindle/internal/h2"
	"github.com/spindlenet/spindle/internal/hpack"
)

// TestH2ResponseHoldBoundsClient: an HTTP/2 client that opens 40 streams
// to an h2c pool and reads none of their 256 KiB responses (its
// connection window, 64 KiB, shut) makes the proxy hold at most
// h2_response_hold (1 MiB here) of them, where it held a stream window
// (64 KiB) of each, 2.5 MiB; once the client reads, every response
// arrives whole (the streams the bound held back start as it drains).
func TestH2ResponseHoldBoundsClient(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		const streams = 40
		big := randomBytes(31, 256<<10)
		up := newH2CUp(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Write(big)
		}), nil)
		cfg := h2cPoolConfig(b, up.addr)
		cfg.Listeners[0].H2ResponseHold = 1 << 20
		p := startProxy(t, cfg)
		var pr http.Protocols
		pr.SetUnencryptedHTTP2(true)
		tr := &http.Transport{Protocols: &pr, DisableCompression: true,
			HTTP2: &http.HTTP2Config{MaxReceiveBufferPerStream: 64 << 10, MaxReceiveBufferPerConnection: 64 << 10}}
		defer tr.CloseIdleConnections()
		c := &http.Client{Transport: tr, Timeout: 30 * time.Second}
		url := "http://" + p.Addr("web").String() + "/big"
		read := make(chan struct{})
		got := make(chan string, streams)
		for range streams {
			go func() {
				resp, err := c.Get(url)
				if err != nil {
					got <- err.Error()
					return
				}
				defer resp.Body.Close()
				<-read
				body, err := io.ReadAll(resp.Body)
				switch {
				case err != nil:
					got <- err.Error()
				case !bytes.Equal(body, big):
					got <- "a body of " + http.StatusText(resp.StatusCode) + " not the one sent"
				default:
					got <- ""
				}
			}()
		}
		// What the proxy holds, until it has not moved for half a second
		// (every window the client left open filled).
		var most, last int64
		for still, end := time.Now(), time.Now().Add(10*time.Second); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
			h := p.Totals().Listeners[0].H2ResponseHeld
			most = max(most, h)
			if h != last || h == 0 {
				last, still = h, time.Now()
			} else if time.Since(still) > 500*time.Millisecond {
				break
			}
		}
		if most == 0 || most > 1<<20 {
			t.Errorf("held for the client: at most %d bytes, want some and no more than h2_response_hold's %d", most, 1<<20)
		}
		close(read)
		for range streams {
			if e := <-got; e != "" {
				t.Errorf("a response: %s", e)
			}
		}
		if h := p.Totals().Listeners[0].H2ResponseHeld; h != 0 {
			t.Errorf("held once every response was read: %d bytes, want 0", h)
		}
	})
}

// TestH2ResponseHoldBoundsClientNotReading: an HTTP/2 client with its
// windows wide open that opens 100 streams to an h2c pool and reads
// nothing of its socket has the proxy's output for it (its write queue)
// bounded by h2_response_hold (1 MiB here) past the queue's mark (256 KiB), whether
// the responses stop there at their windows to the server (256 KiB
// ones: 64 KiB each, 16 streams at once) or go there whole (60 KiB ones,
// their streams gone: the queue past its mark counts as held, and the
// next streams wait). It was 100 windows' worth, about 6 MB (and, with
// the streams counted but not the queue, 2.5 MB of the 60 KiB ones).
// Once the client reads, every response arrives whole.
func TestH2ResponseHoldBoundsClientNotReading(t *testing.T) {
	for _, size := range []int{256 << 10, 60 << 10} {
		t.Run(fmt.Sprintf("%dKiB", size>>10), func(t *testing.T) {
			forBackends(t, func(t *testing.T, b engine.Backend) {
				notReading(t, b, size)
			})
		})
	}
}

// notReading is TestH2ResponseHoldBoundsClientNotReading with responses
// of size bytes.
func notReading(t *testing.T, b engine.Backend, size int) {
	const streams = 100
	big := randomBytes(37, size)
	up := newH2CUp(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write(big)
	}), nil)
	cfg := h2cPoolConfig(b, up.addr)
	cfg.Listeners[0].H2ResponseHold = 1 << 20
	p := startProxy(t, cfg)
	c := dialReadBuffer(t, p, 16<<10) // (set before the connect: dialReadBuffer says why)
	enc := hpack.NewEncoder()
	out := append([]byte(h2.ClientPreface), h2.AppendSettings(nil, []h2.Setting{{ID: h2.SettingInitialWindowSize, Val: h2.MaxWindow}})...)
	out = h2.AppendWindowUpdate(out, 0, h2.MaxWindow-65535)
	for i := range streams {
		blk := enc.StartBlock(nil)
		for _, f := range [][2]string{{":method", "GET"}, {":scheme", "http"}, {":authority", "x"}, {":path", "/big"}} {
			blk = enc.AppendField(blk, hpack.Field{Name: []byte(f[0]), Value: []byte(f[1])})
		}
		out = h2.AppendHeaders(out, uint32(2*i+1), blk, true, h2.MinMaxFrameSize)
	}
	if _, err := c.Write(out); err != nil {
		t.Fatal(err)
	}
	// The output held, until it has not moved for half a second.
	most, last := 0, 0
	for still, end := time.Now(), time.Now().Add(10*time.Second); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
		n := h2ClientOut(p)
		most = max(most, n)
		if n != last || n == 0 {
			last, still = n, time.Now()
		} else if time.Since(still) > 500*time.Millisecond {
			break
		}
	}
	if bound := 2 << 20; most == 0 || most > bound {
		t.Errorf("output held for the client: at most %d bytes, want some and no more than %d (h2_response_hold, the queue's mark and what frames and buffers add)", most, bound)
	}
	c.SetReadBuffer(1 << 20)
	c.SetReadDeadline(time.Now().Add(time.Minute))
	r := &rawH2{t: t, c: c, tmp: make([]byte, 64<<10)}
	got := make(map[uint32]int)
	for ended := 0; ended < streams; {
		f, err := r.next()
		if err != nil {
			t.Fatalf("%d of %d responses read: %v", ended, streams, err)
		}
		switch f.Type {
		case h2.FrameRSTStream, h2.FrameGoAway:
			t.Fatalf("%d of %d responses read: %v", ended, streams, f.Type)
		case h2.FrameData:
			got[f.StreamID] += len(f.Data)
		}
		if (f.Type == h2.FrameData || f.Type == h2.FrameHeaders) && f.Flags.Has(h2.FlagEndStream) {
			ended++
			if got[f.StreamID] != size {
				t.Errorf("stream %d: %d bytes, want %d", f.StreamID, got[f.StreamID], size)
			}
		}
	}
}

// TestH2ResponseHoldWaitTimesOut: a stream that h2_response_hold keeps
// from its server (an h2_response_hold of one stream window, held by a
// response its client does not read) waits response_timeout, then is
// answered 504 by the proxy, logged CT (its client's doing, not the
// server's: ST) and not held against the server (passive health with
// http_errors 1 leaves it up); once the client reads the held response,
// it is whole and the next request goes at once: the hold counts nothing
// for the streams gone.
func TestH2ResponseHoldWaitTimesOut(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		big := randomBytes(41, 256<<10)
		up := newH2CUp(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/big" {
				w.Write(big)
				return
			}
			io.WriteString(w, "ok")
		}), nil)
		cfg := h2cPoolConfig(b, up.addr)
		cfg.Listeners[0].H2ResponseHold = upH2Window
		cfg.Listeners[0].ResponseTimeout = Duration(500 * time.Millisecond)
		cfg.Pools[0].Passive = &PassiveConfig{Fails: 1, Cooldown: Duration(time.Minute), HTTPErrors: 1}
		path := filepath.Join(t.TempDir(), "access.log")
		cfg.Listeners[0].AccessLog = &AccessLogConfig{Path: path}
		p := startProxy(t, cfg)
		var pr http.Protocols
		pr.SetUnencryptedHTTP2(true)
		tr := &http.Transport{Protocols: &pr, DisableCompression: true,
			HTTP2: &http.HTTP2Config{MaxReceiveBufferPerStream: 64 << 10, MaxReceiveBufferPerConnection: 1 << 20}}
		defer tr.CloseIdleConnections()
		c := &http.Client{Transport: tr, Timeout: 10 * time.Second}
		base := "http://" + p.Addr("web").String()
		resp, err := c.Get(base + "/big")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		// (Not read: the proxy holds what the client's window did not take.)
		if got := <-getAsync(c, base+"/next"); got != "504 "+string(localBody(504)) {
			t.Errorf("the request past h2_response_hold: %q, want 504", got)
		}
		checkFields(t, waitLine(t, path, "the 504's line", func(m map[string]any) bool { return field(m, "target") == "/next" }), map[string]string{"status": "504", "term": "CT"})
		body, err := io.ReadAll(resp.Body)
		if err != nil || !bytes.Equal(body, big) {
			t.Errorf("the held response: %d bytes (%v), want the %d sent", len(body), err, len(big))
		}
		if got := <-getAsync(c, base+"/after"); got != "200 ok" {
			t.Errorf("the request once the held response was read: %q, want \"200 ok\"", got)
		}
	})
}

// TestH2ResponseHoldEndedStartsWaiting: a response whose end comes while
// its client's window holds part of it counts only that part from then
// on, and the stream that waited for the room its window took starts at
// once, the client reading nothing (an h2_response_hold of two stream
// windows and 8 KiB: the first two streams fill it, the third waits
// until the second's 70 KiB response ends with 6 KiB held). It waited
// for the client's next frame, response_timeout here (504).
func TestH2ResponseHoldEndedStartsWaiting(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		big := randomBytes(43, 256<<10)
		mid := randomBytes(47, 70<<10)
		release := make(chan struct{})
		up := newH2CUp(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			switch r.URL.Path {
			case "/big":
				w.Write(big)
			case "/mid":
				w.Write(mid[:64<<10])
				w.(http.Flusher).Flush()
				<-release
				w.Write(mid[64<<10:])
			default:
				io.WriteString(w, "ok")
			}
		}), nil)
		cfg := h2cPoolConfig(b, up.addr)
		cfg.Listeners[0].H2ResponseHold = 2*upH2Window + 8<<10
		cfg.Listeners[0].ResponseTimeout = Duration(3 * time.Second)
		p := startProxy(t, cfg)
		var pr http.Protocols
		pr.SetUnencryptedHTTP2(true)
		tr := &http.Transport{Protocols: &pr, DisableCompression: true,
			HTTP2: &http.HTTP2Config{MaxReceiveBufferPerStream: 64 << 10, MaxReceiveBufferPerConnection: 1 << 20}}
		defer tr.CloseIdleConnections()
		c := &http.Client{Transport: tr, Timeout: 10 * time.Second}
		base := "http://" + p.Addr("web").String()
		for _, path := range []string{"/big", "/mid"} {
			resp, err := c.Get(base + path)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close() // (not read)
		}
		next := getAsync(c, base+"/next")
		// (The third stream waits in the proxy; then the second's end.)
		waitFor(t, "the third stream", func() bool { return p.Totals().Listeners[0].H2Streams == 3 })
		close(release)
		select {
		case got := <-next:
			if got != "200 ok" {
				t.Errorf("the stream that waited: %q, want \"200 ok\"", got)
			}
		case <-time.After(2 * time.Second):
			t.Error("the stream that waited did not start once the second response ended")
			<-next
		}
	})
}
