package proxy

import (
	"io"
	"net"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/spindlenet/spindle/engine"
	"github.com/spindlenet/spindle/internal/h2"
)

// h2Transport is an h2c (prior knowledge) transport whose connections
// take rbuf bytes a stream and a connection before their reader reads.
func h2Transport(rbuf int32) *http.Transport {
	var pr http.Protocols
	pr.SetUnencryptedHTTP2(true)
	return &http.Transport{Protocols: &pr, DisableCompression: true,
		HTTP2: &http.HTTP2Config{MaxReceiveBufferPerStream: int(rbuf), MaxReceiveBufferPerConnection: int(rbuf)}}
}

// TestH2UpSlowClientsNoHOL: clients that never read their responses
// must not stall other clients' streams on the same upstream connection.
// 24 streams of a client that reads nothing each leave the proxy holding
// an upstream stream window's worth (64 KiB): 1.5 MiB, past a 1 MiB
// connection window returned only as clients take the bytes; another
// client's 256 KiB response on the same connection (h2_max_connections
// 1) must still arrive.
func TestH2UpSlowClientsNoHOL(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		var written atomic.Int64
		big := writesCounted(4<<20, &written)
		small := writesCounted(256<<10, new(atomic.Int64))
		up := newH2CUp(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/big" {
				big(w, r)
				return
			}
			small(w, r)
		}), nil)
		cfg := h2cPoolConfig(b, up.addr)
		cfg.Pools[0].H2MaxConnections = 1
		p := startProxy(t, cfg)
		base := "http://" + p.Addr("web").String()

		slowTr := h2Transport(64 << 10)
		defer slowTr.CloseIdleConnections()
		slow := &http.Client{Transport: slowTr, Timeout: 30 * time.Second}
		const n = 24
		var bodies []io.ReadCloser
		defer func() {
			for _, b := range bodies {
				b.Close()
			}
		}()
		for range n {
			resp, err := slow.Get(base + "/big")
			if err != nil {
				t.Fatal(err)
			}
			bodies = append(bodies, resp.Body)
		}
		time.Sleep(300 * time.Millisecond)
		t.Logf("the server wrote %d bytes to %d streams not read", written.Load(), n)

		fastTr := h2Transport(1 << 20)
		defer fastTr.CloseIdleConnections()
		fast := &http.Client{Transport: fastTr, Timeout: 5 * time.Second}
		resp, err := fast.Get(base + "/small")
		if err != nil {
			t.Fatalf("another client's request behind %d unread streams: %v", n, err)
		}
		got, err := io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if err != nil || got != 256<<10 {
			t.Fatalf("another client's response behind %d unread streams: %d bytes, %v; want %d", n, got, err, 256<<10)
		}
		if st := serverTotals(p, up.addr); up.conns.Load() != 1 {
			t.Errorf("%d upstream connections (%d streams), want 1", up.conns.Load(), st.H2Streams)
		}
	})
}

// zeroStreamsUp is a server taking no stream: its SETTINGS say
// MAX_CONCURRENT_STREAMS 0; it reads the rest and drops it.
func zeroStreamsUp(c net.Conn) {
	out := h2.AppendSettings(nil, []h2.Setting{{ID: h2.SettingMaxConcurrentStreams, Val: 0}})
	out = h2.AppendSettingsAck(out)
	if _, err := c.Write(out); err != nil {
		return
	}
	io.Copy(io.Discard, c)
}

// TestH2UpZeroStreams: a server whose SETTINGS allow no stream
// (MAX_CONCURRENT_STREAMS 0) is a server that cannot take the request:
// a stream waiting for it goes on to the next server at once, not after
// response_timeout (504) on a connection closed with nobody dialing
// another.
func TestH2UpZeroStreams(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		zero := newUpstream(t, zeroStreamsUp)
		good := newH2CUp(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			io.WriteString(w, "ok")
		}), nil)
		cfg := h2cPoolConfig(b, zero.addr, good.addr)
		cfg.Listeners[0].ResponseTimeout = Duration(3 * time.Second)
		p := startProxy(t, cfg)
		c, base := h2Client(t, p)
		for k := range 4 {
			t0 := time.Now()
			resp, body := do(t, c, mustReq(t, "GET", base+"/x", nil))
			if d := time.Since(t0); resp.StatusCode != 200 || string(body) != "ok" || d > time.Second {
				t.Fatalf("request %d: %d %q after %v; want 200 \"ok\" at once", k, resp.StatusCode, body, d)
			}
		}
		if zero.accepted.Load() == 0 {
			t.Errorf("the server allowing no stream was never tried")
		}
	})
}
