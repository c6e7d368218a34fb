package bench

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"runtime"
	"strconv"
	"time"
)

// The servers of `spindle bench http2` that live in this binary, started
// as `spindle bench http2-server` children: each answers every GET with
// status 200, a content-type, a content-length and a date field (net/http
// adds the date itself), and the body (appendBody), over h2c with prior
// knowledge. nginx, the other arm, sends these fields and a server field.

// http2ContentType is the content-type every arm answers with.
const http2ContentType = "application/octet-stream"

// appendBody appends the response body of size bytes to dst: the letters
// a to z over and over, as the HTTP echo answers a request without a body.
func appendBody(dst []byte, size int) []byte {
	for i := range size {
		dst = append(dst, 'a'+byte(i%26))
	}
	return dst
}

// http2Servers are the servers ServeHTTP2Main runs, by arm name.
// Each serves on addr until ctx is done; cpus are the server CPUs (the
// process is pinned to them already).
var http2Servers = map[string]func(ctx context.Context, addr string, cpus []int, body []byte) error{
	HTTP2ArmGoNetHTTP: serveGoNetHTTP2,
}

// ServeHTTP2Main is `spindle bench http2-server`: it serves one arm of
// `spindle bench http2` on -listen until ctx is done. The harness starts
// it pinned to the server CPUs and checks it with a request of its own; it
// writes nothing on stdout. A command line it cannot run is a UsageError;
// -h prints the usage and returns flag.ErrHelp. Main goroutine.
func ServeHTTP2Main(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("bench http2-server", flag.ContinueOnError)
	arm := fs.String("arm", HTTP2ArmGoNetHTTP, "server arm: "+HTTP2ArmGoNetHTTP+", "+HTTP2ArmSpindleUring+" or "+HTTP2ArmSpindleEpoll)
	listen := fs.String("listen", "127.0.0.1:0", "listen address")
	cpus := fs.String("cpus", "", "pin the server process to these CPUs; GOMAXPROCS is their number (go-net-http), the engine runs one loop on the first")
	body := fs.Int("body", DefaultHTTP2Body, "response body bytes")
	if err := parseServeFlags(fs, args); err != nil {
		return err
	}
	serve, ok := http2Servers[*arm]
	if !ok {
		return &UsageError{Err: fmt.Errorf("bench http2-server: no arm %q in this binary", *arm)}
	}
	if *body < MinHTTP2Body || *body > MaxHTTP2Body {
		return &UsageError{Err: fmt.Errorf("bench http2-server: -body %d outside %d..%d", *body, MinHTTP2Body, MaxHTTP2Body)}
	}
	cpuList, err := pinCPUList(*cpus)
	if err != nil {
		return err
	}
	if len(cpuList) > 0 {
		// As `bench server` does for go-net: one P per server CPU.
		runtime.GOMAXPROCS(len(cpuList))
	}
	return serve(ctx, *listen, cpuList, appendBody(nil, *body))
}

// serveGoNetHTTP2 is the go-net-http arm: net/http's server with
// unencrypted HTTP/2 (h2c with prior knowledge) and no HTTP/1, its
// defaults otherwise, and a handler writing the fixed body. It returns
// when ctx is done, closing every connection.
func serveGoNetHTTP2(ctx context.Context, addr string, _ []int, body []byte) error {
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", addr)
	if err != nil {
		return err
	}
	ctype, clen := []string{http2ContentType}, []string{strconv.Itoa(len(body))}
	srv := &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			h := w.Header()
			h["Content-Type"], h["Content-Length"] = ctype, clen
			w.Write(body)
		}),
		Protocols: new(http.Protocols),
	}
	srv.Protocols.SetUnencryptedHTTP2(true)
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
	}
	srv.Close()
	if err := <-done; !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// h2cCheck sends one GET over h2c with prior knowledge (Go's client) to
// addr and verifies the reply: HTTP/2, status 200, the content-type, and
// the body of bodySize bytes with a content-length of it. Within five
// seconds.
func h2cCheck(addr string, bodySize int) error {
	var p http.Protocols
	p.SetUnencryptedHTTP2(true)
	tr := &http.Transport{Protocols: &p}
	defer tr.CloseIdleConnections()
	return h2GetCheck(tr, "http://"+addr+"/", bodySize)
}

// h2GetCheck is h2cCheck's GET of url through tr and its verification.
func h2GetCheck(tr *http.Transport, url string, bodySize int) error {
	c := &http.Client{Transport: tr, Timeout: 5 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	got, err := io.ReadAll(io.LimitReader(resp.Body, int64(bodySize)+1))
	if err != nil {
		return fmt.Errorf("reading the body: %w", err)
	}
	switch want := appendBody(nil, bodySize); {
	case resp.ProtoMajor != 2:
		return fmt.Errorf("answered in %s, not HTTP/2", resp.Proto)
	case resp.StatusCode != http.StatusOK:
		return fmt.Errorf("answered status %d", resp.StatusCode)
	case resp.Header.Get("Content-Type") != http2ContentType:
		return fmt.Errorf("answered content-type %q, want %q", resp.Header.Get("Content-Type"), http2ContentType)
	case resp.ContentLength != int64(bodySize):
		return fmt.Errorf("answered content-length %d, want %d", resp.ContentLength, bodySize)
	case !bytes.Equal(got, want):
		return fmt.Errorf("answered a body of %d bytes that is not the %d expected", len(got), bodySize)
	}
	return nil
}
