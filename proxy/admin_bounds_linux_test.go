package proxy

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"strings"
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

// TestAdminBoundsRequestHead: a request head past adminMaxHead gets 431
// and its connection closed, as the loops bound theirs, rather than the
// megabyte net/http reads by default.
func TestAdminBoundsRequestHead(t *testing.T) {
	u := newUpstream(t, nil)
	p := startProxy(t, testConfig(testBackends[0], u.addr))
	for _, tc := range []struct {
		name string
		size int // of the X-Pad field's value
		want int
	}{
		{"within", adminMaxHead / 2, 200},
		{"past", 4 * adminMaxHead, 431},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, err := http.NewRequest("GET", "http://"+p.AdminAddr().String()+"/healthz", nil)
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("X-Pad", strings.Repeat("x", tc.size))
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tc.want {
				t.Errorf("a head of %d bytes: %d, want %d", tc.size, resp.StatusCode, tc.want)
			}
		})
	}
}
