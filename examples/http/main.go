// Command http is a minimal HTTP/1.1 and h2c server on the spindle engine:
// it answers every request with "hello, world".
//
// HTTP/1.1: it reads and drops request bodies (Content-Length or chunked),
// keeps connections alive, supports pipelining, and closes after the
// response to "Connection: close" (or HTTP/1.0 without keep-alive) or an
// error response to a request it refuses (400, 413, 414, 431, 501, 505),
// either way as net/http does: FIN first, the client's further bytes
// drained for a bounded time.
//
// HTTP/2 without TLS (h2c with prior knowledge: a connection that starts
// with the HTTP/2 preface; no Upgrade from HTTP/1.1): many requests at once
// on a connection, bodies dropped as they arrive, CONNECT refused (501) and
// bodies over 1 MiB (413) as on HTTP/1.1; SIGINT or SIGTERM sends GOAWAY
// and closes each connection once its open requests are answered.
//
//	go run ./examples/http -addr 127.0.0.1:8080
//	curl --http2-prior-knowledge http://127.0.0.1:8080/
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spindlenet/spindle/engine"
	"github.com/spindlenet/spindle/examples/http/hello"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:8080", "listen address (tcp host:port)")
	backend := flag.String("backend", "uring", "uring, uring-sqpoll, uring-napi, epoll or epoll-busypoll")
	flag.Parse()
	h := &hello.Handler{}
	e, err := engine.New(&engine.Config{Backend: engine.Backend(*backend)}, h)
	if err != nil {
		fmt.Fprintln(os.Stderr, "http:", err)
		os.Exit(1)
	}
	ln, err := e.Listen("tcp", *addr, nil)
	if err != nil {
		fmt.Fprintln(os.Stderr, "http:", err)
		os.Exit(1)
	}
	fmt.Println("http: listening on", ln.Addr())
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		e.Shutdown(sctx) // the Handler, an engine.Drainer, ends its connections politely
	}()
	if err := e.Run(context.Background()); err != nil {
		fmt.Fprintln(os.Stderr, "http:", err)
		os.Exit(1)
	}
}
