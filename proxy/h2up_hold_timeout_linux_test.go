package proxy

import (
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/spindlenet/spindle/engine"
)

// TestH2ResponseHoldWaitCountsInResponseTimeout: a stream that waits for
// room in h2_response_hold has one response_timeout from its request to
// its response head, the wait included: held back for 700 ms of a 1 s
// response_timeout (an h2_response_hold of one stream window, taken by a
// stream the server answers at 700 ms), then sent to a server that does
// not answer, it gets 504 at about 1 s from its request. Its
// response_timeout started again when it went to the server: 504 at 1.7 s
// (a second from the first's release: the bound, which a loaded machine's
// late timer or slow client does not pass; the first stream holds the
// window with holdUntil, and the 700 ms count from the second's wait
// seen, not from its sending).
func TestH2ResponseHoldWaitCountsInResponseTimeout(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		release := make(chan struct{})
		up := newH2CUp(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/first" {
				holdUntil(w, release)
				return
			}
			select {
			case <-r.Context().Done():
			case <-time.After(5 * time.Second):
				io.WriteString(w, "late")
			}
		}), nil)
		cfg := h2cPoolConfig(b, up.addr)
		cfg.Listeners[0].H2ResponseHold = upH2Window
		cfg.Listeners[0].ResponseTimeout = Duration(time.Second)
		p := startProxy(t, cfg)
		c, base := h2Client(t, p)
		first := getAsync(c, base+"/first")
		waitFor(t, "the first stream at the server", func() bool { return serverTotals(p, up.addr).H2Streams == 1 })
		slow := getAsync(c, base+"/slow")
		waitFor(t, "the second stream held back", func() bool {
			n := 0
			onLoops(p, func(ls *loopState) {
				for _, c := range ls.h2conns {
					n += len(c.upWait)
				}
			})
			return n == 1
		})
		time.Sleep(700 * time.Millisecond)
		rel := time.Now()
		close(release)
		if got := <-first; !heldOK(got) {
			t.Fatalf("the first stream: %q, want \"200 ok\" after dots", got)
		}
		got := <-slow
		if d := time.Since(rel); got != "504 "+string(localBody(504)) || d >= time.Second {
			t.Errorf("the stream held back 700 ms, then sent to a server not answering: %q %v after the first's release; want 504 within 300 ms or so (1 s from its request)", got, d)
		}
		if n := serverTotals(p, up.addr).H2Streams; n != 2 {
			t.Errorf("%d streams at the server, want 2 (the second went to it once let go)", n)
		}
	})
}
