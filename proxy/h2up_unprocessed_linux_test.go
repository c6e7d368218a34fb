package proxy

import (
	"bytes"
	"fmt"
	"io"
	"sync/atomic"
	"testing"

	"github.com/spindlenet/spindle/engine"
)

// TestH2UpUnprocessedNotAFailure: a stream the server refused
// (REFUSED_STREAM: RFC 9113 8.7, not processed) after part of the request
// body went cannot be retried (the body is gone), and the client, over
// HTTP/2 or HTTP/1.1, gets 502; but the server did nothing wrong (a
// graceful restart refusing new streams while uploads are in flight), and
// passive health counted it as a failed exchange.
func TestH2UpUnprocessedNotAFailure(t *testing.T) {
	body := make([]byte, 32<<10)
	forBackends(t, func(t *testing.T, b engine.Backend) {
		for _, h2client := range []bool{true, false} {
			var first atomic.Bool
			up := newUpstream(t, rawH2Up("refuse", &first))
			p, _ := startLoggedH2C(t, b, up.addr)
			status := 0
			if h2client {
				c, base := h2Client(t, p)
				resp, err := c.Post(base+"/up", "application/octet-stream", bytes.NewReader(body))
				if err != nil {
					t.Fatal(err)
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				status = resp.StatusCode
			} else {
				c := dial(t, p)
				fmt.Fprintf(c, "POST /up HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n", len(body))
				c.Write(body)
				resp, _ := readResponse(t, c, "POST")
				status = resp.StatusCode
			}
			st := serverTotals(p, up.addr)
			if status != 502 || st.ConsecutiveErrors != 0 || st.ConsecutiveFails != 0 {
				t.Errorf("HTTP/2 client %v: a stream refused after body went: %d, %d errors and %d failures in a row counted against the server; want 502, none", h2client, status, st.ConsecutiveErrors, st.ConsecutiveFails)
			}
		}
	})
}
