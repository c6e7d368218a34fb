package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"runtime"
	"testing"
	"time"

	"github.com/spindlenet/spindle/bench"
)

// startTestGnet runs the gnet arm with one loop on loopback until the test
// ends, when its Close must succeed, and returns its address. It skips the
// test off Linux.
func startTestGnet(t *testing.T) string {
	t.Helper()
	if runtime.GOOS != "linux" {
		t.Skip("gnet arm is tested on Linux")
	}
	srv, err := startGnet(context.Background(), bench.ServerConfig{Addr: "127.0.0.1:0", Loops: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := srv.Close(); err != nil {
			t.Error(err)
		}
	})
	return srv.Addr().String()
}

// dialTest connects to addr, closes the connection when the test ends and
// sets the deadline of every read and write on it timeout from now.
func dialTest(t *testing.T, addr string, timeout time.Duration) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(timeout))
	return c
}

func TestGnetEcho(t *testing.T) {
	addr := startTestGnet(t)
	c := dialTest(t, addr, 5*time.Second)
	tests := []struct {
		name string
		req  []byte
	}{
		{"small", bench.AppendRequest(nil, 1, 1, 64)},
		{"two pipelined", bench.AppendRequest(bench.AppendRequest(nil, 1, 2, 128), 1, 3, 100)},
		{"large", bench.AppendRequest(nil, 1, 4, 200000)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			// Write in two parts to exercise partial frames.
			half := len(tc.req) / 2
			if _, err := c.Write(tc.req[:half]); err != nil {
				t.Fatal(err)
			}
			time.Sleep(5 * time.Millisecond)
			if _, err := c.Write(tc.req[half:]); err != nil {
				t.Fatal(err)
			}
			got := make([]byte, len(tc.req))
			if _, err := io.ReadFull(c, got); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, tc.req) {
				t.Fatal("echo differs")
			}
		})
	}
	// And HTTP/1.1 on a second connection.
	h := dialTest(t, addr, 5*time.Second)
	if _, err := io.WriteString(h, "GET / HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 15)
	if _, err := io.ReadFull(h, buf); err != nil || string(buf) != "HTTP/1.1 200 OK" {
		t.Fatalf("HTTP reply %q, %v", buf, err)
	}
}

// TestGnetHTTPClose: an HTTP/1.0 request without keep-alive, and an
// HTTP/1.1 one with "Connection: close", get their response and then the
// close that ends it, read to EOF within a deadline. gnet kept the
// connection open, so an HTTP/1.0 client (ab) waited for the end of the
// response forever.
func TestGnetHTTPClose(t *testing.T) {
	addr := startTestGnet(t)
	for _, req := range []string{
		"GET / HTTP/1.0\r\nHost: x\r\n\r\n",
		"POST /echo HTTP/1.0\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello",
		"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
	} {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		c.SetDeadline(time.Now().Add(5 * time.Second))
		if _, err := io.WriteString(c, req); err != nil {
			c.Close()
			t.Fatal(err)
		}
		all, err := io.ReadAll(c)
		c.Close()
		if err != nil {
			t.Errorf("%q: reading the response to EOF: %v (got %q): gnet did not close", req, err, all)
			continue
		}
		resp, err := http.ReadResponse(bufio.NewReader(bytes.NewReader(all)), nil)
		if err != nil {
			t.Errorf("%q: %v in %q", req, err, all)
			continue
		}
		body, err := io.ReadAll(resp.Body)
		if err != nil || resp.StatusCode != 200 || !resp.Close || len(body) == 0 {
			t.Errorf("%q: status %d, close %v, %d-byte body, %v: want 200 with Connection: close", req, resp.StatusCode, resp.Close, len(body), err)
		}
	}
}

// TestGnetHTTPClosePipelined: requests pipelined after one with
// "Connection: close" do not reset the connection: the client gets that
// response and then the end of the stream, and a client that goes on
// sending without closing is closed on in bounded time and bytes. gnet
// closed at once with the pipelined bytes unread, so the kernel sent RST
// and the client's read failed with ECONNRESET.
func TestGnetHTTPClosePipelined(t *testing.T) {
	addr := startTestGnet(t)
	req := []byte("GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
	for len(req) < 160<<10 {
		req = append(req, "GET /next HTTP/1.1\r\nHost: x\r\n\r\n"...)
	}
	c := dialTest(t, addr, 10*time.Second)
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
	if err != nil || resp.StatusCode != 200 || !resp.Close || len(body) != bench.DefaultPayload || bytes.Count(all, []byte("HTTP/1.1")) != 1 {
		t.Errorf("status %d, close %v, %d-byte body, %v in %q: want one 200 with Connection: close", resp.StatusCode, resp.Close, len(body), err, all)
	}
	chunk := make([]byte, 4<<10)
	for sent := 0; ; sent += len(chunk) {
		if _, err := c.Write(chunk); err != nil {
			if errors.Is(err, os.ErrDeadlineExceeded) {
				t.Fatalf("the server still reads after %d more bytes: its lingering is not bounded", sent)
			}
			break
		}
	}
}
