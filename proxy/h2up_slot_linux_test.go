package proxy

import (
	"bytes"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/spindlenet/spindle/engine"
)

// TestH2UpEndedResponseFreesStream: a response whose end the server has
// sent, held in the proxy only by its client's windows (a client not
// reading), takes no stream of the server's connection any more: the
// next request, on a connection of one stream (h2_max_concurrent_streams
// 1, h2_max_connections 1), is served at once, and the held response
// still arrives whole once read. The held stream kept its place until its
// client had taken the last byte, and the next request waited for
// response_timeout (504) behind a stream the server had finished.
func TestH2UpEndedResponseFreesStream(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		big := randomBytes(29, 100<<10)
		up := newH2CUp(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/big" {
				w.Write(big)
				return
			}
			io.WriteString(w, "ok")
		}), nil)
		cfg := h2cPoolConfig(b, up.addr)
		cfg.Pools[0].H2MaxConcurrentStreams = 1
		cfg.Pools[0].H2MaxConnections = 1
		cfg.Listeners[0].ResponseTimeout = Duration(2 * time.Second)
		p := startProxy(t, cfg)
		var pr http.Protocols
		pr.SetUnencryptedHTTP2(true)
		// A stream window of 64 KiB, a connection's of 1 MiB: the big
		// response stops at the stream's, the next one passes.
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
		if got := <-getAsync(c, base+"/next"); got != "200 ok" {
			t.Errorf("the request after the held response: %q, want \"200 ok\" at once", got)
		}
		got, err := io.ReadAll(resp.Body)
		if err != nil || !bytes.Equal(got, big) {
			t.Errorf("the held response: %d bytes (%v), want the %d sent", len(got), err, len(big))
		}
	})
}
