package proxy

import (
	"bufio"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/spindlenet/spindle/engine"
)

// trailerNames answers a request's body length and its trailer fields'
// names ("5 X-Sum,X_note"), read after its body.
func trailerNames(w http.ResponseWriter, r *http.Request) {
	n, _ := io.Copy(io.Discard, r.Body)
	var names []string
	for k := range r.Trailer {
		if len(r.Trailer[k]) > 0 {
			names = append(names, k)
		}
	}
	slices.Sort(names)
	io.WriteString(w, strconv.FormatInt(n, 10)+" "+strings.Join(names, ","))
}

// trickledTrailers is TestRequestTrailersTrickled's first request's
// trailer section.
var trickledTrailers = "X-Sum: abc\r\nX_Note: n\r\n"

// TestRequestTrailersTrickled: an HTTP/1.1 client's chunked request
// sent a byte a write, its trailer section too, then a request
// pipelined after it, each with trailers, get their responses, the
// server their trailers, for each pool protocol (to an h2c pool the
// trailers, ended by a read of their own, waited for the next write to
// the connection before).
func TestRequestTrailersTrickled(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		eachPool(t, trailerNames, func(protocol, server string) {
			cfg := httpConfig(b, server)
			cfg.Pools[0].Protocol = protocol
			p := startProxy(t, cfg)
			conn := dial(t, p)
			conn.SetDeadline(time.Now().Add(10 * time.Second))
			// (Go's HTTP/2 server keeps the trailers the head names.)
			first := "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nTrailer: X-Sum, X_Note\r\n\r\n" +
				"5\r\nhello\r\n0\r\n" + trickledTrailers + "\r\n"
			for i := range len(first) {
				if _, err := io.WriteString(conn, first[i:i+1]); err != nil {
					t.Fatal(err)
				}
				time.Sleep(200 * time.Microsecond)
			}
			io.WriteString(conn, "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nTrailer: X-Sum\r\n\r\n"+
				"3\r\nabc\r\n0\r\nX-Sum: d\r\n\r\n"+
				"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
			br := bufio.NewReader(conn)
			for i, want := range []string{"5 X-Sum,X_note", "3 X-Sum", "0 "} {
				resp, err := http.ReadResponse(br, nil)
				if err != nil {
					t.Fatalf("to %s: response %d: %v", protocol, i, err)
				}
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if got := string(body); resp.StatusCode != 200 || !strings.EqualFold(got, want) {
					t.Errorf("to %s: response %d: %d %q, want 200 %q", protocol, i, resp.StatusCode, got, want)
				}
			}
			conn.Close()
		})
	})
}
