package proxy

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/spindlenet/spindle/engine"
)

// The client-FIN changes, reviewed (eighteenth session): what broke,
// each test failing before its fix.

// TestHTTPFinWhileRetryResendsH2Up: without abort_on_close, an HTTP/1.1
// client that sends its PUT whole and then its FIN (a half close) is
// answered though its request is retried to an h2c pool whose stream
// window is smaller than the body kept for the retry: the FIN, seen
// while that body went again, is no body cut short (the client sent all
// of it). The first server reads the body whole before the FIN is sent
// and answers 503 only then.
func TestHTTPFinWhileRetryResendsH2Up(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		var badN, goodN atomic.Int64
		read, gate := make(chan struct{}, 1), make(chan struct{})
		open := closer(t, gate)
		bad := newH2CUp(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			badN.Add(1)
			io.Copy(io.Discard, r.Body)
			read <- struct{}{}
			<-gate
			w.WriteHeader(503)
		}), nil).addr
		cfg := h2cPoolConfig(b, bad, sumH2CUp(t, &goodN, false))
		cfg.Listeners[0].Retry = &RetryConfig{On: []string{"503"}, Buffer: new(int64(256 << 10))}
		cfg.Listeners[0].ResponseTimeout = Duration(time.Minute)
		p := startProxy(t, cfg)
		body := randomBytes(1801, 100<<10)
		c := dial(t, p)
		// (Round-robin: the first request goes to the first server.)
		if _, err := fmt.Fprintf(c, "PUT / HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n%s", len(body), body); err != nil {
			t.Fatal(err)
		}
		<-read
		c.CloseWrite()
		open()
		c.SetReadDeadline(time.Now().Add(15 * time.Second))
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatalf("the half-closed client's PUT, retried: %v, want its answer", err)
		}
		got, err := io.ReadAll(resp.Body)
		if want := "ok PUT " + sum(body) + " <nil>"; err != nil || resp.StatusCode != 200 || string(got) != want {
			t.Errorf("the half-closed client's PUT, retried: %d %q %v, want 200 %q", resp.StatusCode, got, err, want)
		}
		if badN.Load() != 1 || goodN.Load() != 1 {
			t.Errorf("the servers got %d and %d requests, want 1 each", badN.Load(), goodN.Load())
		}
	})
}
