// Command http is a minimal HTTP/1.1 server on the spindle engine: it answers
// every request with "hello, world", reads and drops request bodies
// (Content-Length or chunked), keeps connections alive, supports
// pipelining, and closes after the response to "Connection: close" (or
// HTTP/1.0 without keep-alive) or an error response to a request it refuses
// (400, 413, 414, 431, 501, 505), either way as net/http does: FIN first,
// the client's further bytes drained for a bounded time.
//
//	go run ./examples/http -addr 127.0.0.1:8080
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
	e, err := engine.New(&engine.Config{Backend: engine.Backend(*backend)}, &hello.Handler{})
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
		e.Shutdown(sctx)
	}()
	if err := e.Run(context.Background()); err != nil {
		fmt.Fprintln(os.Stderr, "http:", err)
		os.Exit(1)
	}
}
