package proxy

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"testing"
	"time"
)

// TestAdminBoundsIdleAndStalledClients: the admin server closes a
// keep-alive connection left idle after its answer, and one whose
// request announced a body it never sends, within adminTimeout (with a
// second's slack): neither holds a connection and a goroutine of the
// admin server for as long as the client likes.
func TestAdminBoundsIdleAndStalledClients(t *testing.T) {
	u := newUpstream(t, nil)
	p := startProxy(t, testConfig(testBackends[0], u.addr))
	addr := p.AdminAddr().String()
	for _, tc := range []struct {
		name, req string
		answered  bool // the request gets its answer before the close
	}{
		{"idle", "GET /healthz HTTP/1.1\r\nHost: admin\r\n\r\n", true},
		{"stalled body", "GET /healthz HTTP/1.1\r\nHost: admin\r\nContent-Length: 10\r\n\r\n", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			if _, err := io.WriteString(c, tc.req); err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			c.SetReadDeadline(start.Add(adminTimeout + 5*time.Second))
			br := bufio.NewReader(c)
			if tc.answered {
				resp, err := http.ReadResponse(br, nil)
				if err != nil {
					t.Fatalf("answer: %v", err)
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 || resp.Close {
					t.Fatalf("answer: %d, close %v", resp.StatusCode, resp.Close)
				}
			}
			// What follows (the stalled request's answer, if any) up to the
			// close.
			_, err = io.Copy(io.Discard, br)
			if err != nil {
				t.Fatalf("the connection was not closed after %v: %v", time.Since(start).Round(time.Millisecond), err)
			}
			if d := time.Since(start); d > adminTimeout+time.Second {
				t.Errorf("closed after %v, past adminTimeout %v", d.Round(time.Millisecond), adminTimeout)
			}
		})
	}
}
