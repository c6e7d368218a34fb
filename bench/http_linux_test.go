package bench

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// httpArms are the arms whose HTTP/1.1 mode the tests drive: the built-in
// go-net arm and one engine arm per kind of I/O path (the gnet arm is
// tested in bench/peers).
var httpArms = []string{"go-net", "epoll", "uring"}

// checkHTTPClient checks an arm's HTTP/1.1 side with Go's HTTP client,
// bodies verified: a GET gets the default body, a POST gets its body back,
// chunked or not, on one kept-alive connection.
func checkHTTPClient(t *testing.T, addr string) {
	tr := &http.Transport{MaxConnsPerHost: 1}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Timeout: 5 * time.Second}
	wantGet := make([]byte, DefaultPayload)
	for i := range wantGet {
		wantGet[i] = 'a' + byte(i%26)
	}
	post := bytes.Repeat([]byte("spindle-"), 500) // 4000 bytes
	for i := range 3 {
		resp, err := client.Get("http://" + addr + "/x")
		if err != nil {
			t.Fatal(err)
		}
		got, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != 200 || !bytes.Equal(got, wantGet) {
			t.Fatalf("GET %d: status %d, %d-byte body %q, err %v", i, resp.StatusCode, len(got), got, err)
		}
		resp, err = client.Post("http://"+addr+"/echo", "application/octet-stream", bytes.NewReader(post))
		if err != nil {
			t.Fatal(err)
		}
		got, err = io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != 200 || !bytes.Equal(got, post) {
			t.Fatalf("POST %d: status %d, %d-byte body (want the %d sent), err %v", i, resp.StatusCode, len(got), len(post), err)
		}
		// A body of unknown length: Go's client sends it chunked, and
		// the server echoes it chunked (it read the chunks as the next
		// request).
		resp, err = client.Post("http://"+addr+"/echo", "application/octet-stream", struct{ io.Reader }{bytes.NewReader(post)})
		if err != nil {
			t.Fatal(err)
		}
		got, err = io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != 200 || !bytes.Equal(got, post) || fmt.Sprint(resp.TransferEncoding) != "[chunked]" {
			t.Fatalf("chunked POST %d: status %d, %v, %d-byte body (want the %d sent), err %v", i, resp.StatusCode, resp.TransferEncoding, len(got), len(post), err)
		}
	}
}

// lookTool finds an HTTP load tool or skips with the reason; CI installs
// both (.ci/run).
func lookTool(t *testing.T, name, pkg string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		t.Skipf("%s not installed (Debian package %s; .ci/run installs it): %v", name, pkg, err)
	}
	return p
}

// runTool runs a load tool with a deadline and returns its output.
func runTool(t *testing.T, argv ...string) string {
	t.Helper()
	cmd := exec.Command(argv[0], argv[1:]...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("%s: %v\n%s", strings.Join(argv, " "), err, out.String())
		}
	case <-time.After(30 * time.Second):
		cmd.Process.Kill()
		<-done
		t.Fatalf("%s did not finish within 30s:\n%s", strings.Join(argv, " "), out.String())
	}
	return out.String()
}

var (
	wrkRequests = regexp.MustCompile(`(\d+) requests in `)
	h2Requests  = regexp.MustCompile(`requests: (\d+) total, (\d+) started, (\d+) done, (\d+) succeeded, (\d+) failed, (\d+) errored, (\d+) timeout`)
	h2Status    = regexp.MustCompile(`status codes: (\d+) 2xx`)
	h2Traffic   = regexp.MustCompile(`traffic: .*\((\d+)\) data`)
)

func atoi(t *testing.T, s string) int {
	t.Helper()
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestHTTPMode checks each arm's HTTP/1.1 mode with Go's HTTP client
// (bodies verified), then points wrk and h2load at it as the docs tell
// users to: every request must succeed, pipelined ones too, and h2load's
// byte count proves each reply carried the whole body (the GET default, or
// the POSTed body echoed). The load tools are skipped, with the reason,
// where they are not installed.
func TestHTTPMode(t *testing.T) {
	skipUnlessLinux(t)
	for _, arm := range httpArms {
		t.Run(arm, func(t *testing.T) {
			addr := startTestServer(t, arm)
			url := "http://" + addr + "/"
			t.Run("net/http", func(t *testing.T) { checkHTTPClient(t, addr) })
			t.Run("wrk", func(t *testing.T) {
				wrk := lookTool(t, "wrk", "wrk")
				// Plain keep-alive load, then 4 requests pipelined per write.
				script := filepath.Join(t.TempDir(), "pipeline.lua")
				lua := "init = function(args) local r = {} for i = 1, 4 do r[i] = wrk.format() end req = table.concat(r) end\n" +
					"request = function() return req end\n"
				if err := os.WriteFile(script, []byte(lua), 0o644); err != nil {
					t.Fatal(err)
				}
				for _, extra := range [][]string{nil, {"-s", script}} {
					argv := append([]string{wrk, "-t1", "-c8", "-d1s", "--timeout", "2s"}, extra...)
					out := runTool(t, append(argv, url)...)
					m := wrkRequests.FindStringSubmatch(out)
					if m == nil || atoi(t, m[1]) == 0 {
						t.Fatalf("%v: no requests completed:\n%s", argv[1:], out)
					}
					if strings.Contains(out, "Socket errors") || strings.Contains(out, "Non-2xx") {
						t.Fatalf("%v: errors:\n%s", argv[1:], out)
					}
					t.Logf("wrk %v: %s requests", extra, m[1])
				}
			})
			t.Run("h2load", func(t *testing.T) {
				h2load := lookTool(t, "h2load", "nghttp2-client")
				body := filepath.Join(t.TempDir(), "body")
				if err := os.WriteFile(body, bytes.Repeat([]byte("x"), 1000), 0o644); err != nil {
					t.Fatal(err)
				}
				const n = 2000
				tests := []struct {
					name  string
					args  []string
					bytes int // response body bytes per request
				}{
					{"GET", nil, DefaultPayload},
					{"GET pipelined 8", []string{"-m", "8"}, DefaultPayload},
					{"POST 1000 B", []string{"-d", body, "-m", "4"}, 1000},
				}
				for _, tc := range tests {
					argv := append([]string{h2load, "--h1", "-c", "4", "-n", strconv.Itoa(n)}, tc.args...)
					out := runTool(t, append(argv, url)...)
					m := h2Requests.FindStringSubmatch(out)
					s := h2Status.FindStringSubmatch(out)
					d := h2Traffic.FindStringSubmatch(out)
					if m == nil || s == nil || d == nil {
						t.Fatalf("%s: unexpected h2load output:\n%s", tc.name, out)
					}
					if atoi(t, m[4]) != n || atoi(t, m[5])+atoi(t, m[6])+atoi(t, m[7]) != 0 || atoi(t, s[1]) != n {
						t.Errorf("%s: want %d succeeded with 2xx:\n%s", tc.name, n, out)
					}
					if got, want := atoi(t, d[1]), n*tc.bytes; got != want {
						t.Errorf("%s: %d body bytes received, want %d (%d × %d)", tc.name, got, want, n, tc.bytes)
					}
					t.Logf("h2load %s: %s", tc.name, fmt.Sprint(m[0]))
				}
			})
		})
	}
}

// httpCloseCases are requests after whose response the server must close
// the connection (RFC 9112 §9.3, §9.6): HTTP/1.0 without keep-alive, and
// HTTP/1.1 with "Connection: close". Clients such as ab (HTTP/1.0) read
// the response to EOF.
var httpCloseCases = []struct{ name, req string }{
	{"HTTP/1.0", "GET / HTTP/1.0\r\nHost: x\r\n\r\n"},
	{"HTTP/1.0 POST", "POST /echo HTTP/1.0\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello"},
	{"HTTP/1.1 Connection: close", "GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"},
}

// checkHTTPClose sends each of httpCloseCases on its own connection and
// reads the response to EOF within a deadline: the server must answer, say
// "Connection: close" and close. Then an HTTP/1.0 request with
// "Connection: keep-alive" twice on one connection: both answered, each
// response saying keep-alive.
func checkHTTPClose(t *testing.T, addr string) {
	t.Helper()
	for _, tc := range httpCloseCases {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		c.SetDeadline(time.Now().Add(5 * time.Second))
		if _, err := io.WriteString(c, tc.req); err != nil {
			c.Close()
			t.Fatal(err)
		}
		all, err := io.ReadAll(c)
		c.Close()
		if err != nil {
			t.Errorf("%s: reading the response to EOF: %v (got %q): the server did not close", tc.name, err, all)
			continue
		}
		resp, err := http.ReadResponse(bufio.NewReader(bytes.NewReader(all)), nil)
		if err != nil {
			t.Errorf("%s: %v in %q", tc.name, err, all)
			continue
		}
		body, err := io.ReadAll(resp.Body)
		if err != nil || resp.StatusCode != 200 || !resp.Close || len(body) == 0 {
			t.Errorf("%s: status %d, close %v, %d-byte body, %v: want 200 with Connection: close", tc.name, resp.StatusCode, resp.Close, len(body), err)
		}
	}
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	r := bufio.NewReader(c)
	for i := range 2 {
		if _, err := io.WriteString(c, "GET / HTTP/1.0\r\nHost: x\r\nConnection: keep-alive\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
		resp, err := http.ReadResponse(r, nil)
		if err != nil {
			t.Fatalf("HTTP/1.0 keep-alive, request %d: %v", i, err)
		}
		body, err := io.ReadAll(resp.Body)
		if err != nil || resp.StatusCode != 200 || resp.Close || resp.Header.Get("Connection") != "keep-alive" || len(body) != DefaultPayload {
			t.Fatalf("HTTP/1.0 keep-alive, request %d: status %d, Connection %q, %d-byte body, %v", i, resp.StatusCode, resp.Header.Get("Connection"), len(body), err)
		}
	}
}

// TestHTTPClose: every arm's HTTP mode closes the connection after the
// response where the request asks for it, as checkHTTPClose checks with
// raw requests over a socket. The arms kept it open, so an HTTP/1.0 client
// (ab) waited for the end of the response forever.
func TestHTTPClose(t *testing.T) {
	skipUnlessLinux(t)
	for _, arm := range httpArms {
		t.Run(arm, func(t *testing.T) { checkHTTPClose(t, startTestServer(t, arm)) })
	}
}

// TestHTTPClosePipelined: a client that pipelines requests after one with
// "Connection: close" gets that response and then the end of the stream,
// not a reset. The server answers the close request, sends FIN, and drops
// what the client still sends until the client closes too (bounded in
// time and bytes). The arms closed at once with the pipelined bytes
// unread, which makes the kernel send RST instead of FIN: the client's
// read failed with ECONNRESET (and a response still in the server's send
// queue is lost).
func TestHTTPClosePipelined(t *testing.T) {
	skipUnlessLinux(t)
	req := []byte("GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
	next := []byte("GET /next HTTP/1.1\r\nHost: x\r\n\r\n")
	// More than any arm reads at once, less than the lingering bound.
	for len(req) < 160<<10 {
		req = append(req, next...)
	}
	for _, arm := range httpArms {
		t.Run(arm, func(t *testing.T) {
			c, err := net.Dial("tcp", startTestServer(t, arm))
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			c.SetDeadline(time.Now().Add(10 * time.Second))
			wrote := make(chan error, 1)
			go func() {
				_, err := c.Write(req)
				wrote <- err
			}()
			all, err := io.ReadAll(c)
			if err != nil {
				t.Fatalf("reading the response to EOF: %v (got %d bytes)", err, len(all))
			}
			if err := <-wrote; err != nil {
				t.Errorf("writing the pipelined requests: %v", err)
			}
			resp, err := http.ReadResponse(bufio.NewReader(bytes.NewReader(all)), nil)
			if err != nil {
				t.Fatalf("%v in %q", err, all)
			}
			body, err := io.ReadAll(resp.Body)
			if err != nil || resp.StatusCode != 200 || !resp.Close || len(body) != DefaultPayload {
				t.Errorf("status %d, close %v, %d-byte body, %v: want 200 with Connection: close", resp.StatusCode, resp.Close, len(body), err)
			}
			if bytes.Count(all, []byte("HTTP/1.1")) != 1 {
				t.Errorf("more than one response: %q", all)
			}
			// A client that goes on sending and never closes: the server
			// stops lingering (lingerBytes or lingerTimeout), closes, and a
			// write fails, well within the deadline.
			chunk := make([]byte, 4<<10)
			for sent := 0; ; sent += len(chunk) {
				if _, err := c.Write(chunk); err != nil {
					if errors.Is(err, os.ErrDeadlineExceeded) {
						t.Fatalf("the server still reads after %d more bytes: its lingering is not bounded", sent)
					}
					break
				}
			}
		})
	}
}
