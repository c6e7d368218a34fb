// Command echo is a TCP echo server on the spindle engine: one loop per CPU,
// each echoing what it receives by handing the received buffer straight to
// the send queue (no copy, unless the connections' queues hold too much of
// the shared receive ring: see engine.Config.MaxQueuedReadBuffers).
// SIGINT or SIGTERM stops it, giving open connections up to 5 seconds to
// close; a second signal ends the process at once.
//
//	go run ./examples/echo -addr 127.0.0.1:7000 -backend uring
package main

import (
	"context"
	"flag"
	"fmt"
	"net"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spindlenet/spindle/engine"
)

// echo forwards every received buffer to the same connection.
type echo struct{ engine.BaseHandler }

// OnData queues b for sending and keeps it until sent. Loop goroutine.
func (echo) OnData(c *engine.Conn, b engine.Buffer) bool {
	c.WriteBuffer(b)
	return true
}

func main() {
	addr := flag.String("addr", "127.0.0.1:7000", "listen address (tcp host:port)")
	backend := flag.String("backend", "uring", "uring, uring-sqpoll, uring-napi, epoll or epoll-busypoll")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	context.AfterFunc(ctx, func() {
		stop() // the signals' default action again: a second one ends the process at once
		fmt.Fprintln(os.Stderr, "echo: stopping; a second signal ends it at once")
	})
	listening := func(a net.Addr) { fmt.Println("echo: listening on", a) }
	if err := run(ctx, *addr, &engine.Config{Backend: engine.Backend(*backend)}, listening); err != nil {
		fmt.Fprintln(os.Stderr, "echo:", err)
		os.Exit(1)
	}
}

// run serves addr until ctx is done, then gives open connections up to 5
// seconds to finish. listening is told the bound address.
func run(ctx context.Context, addr string, cfg *engine.Config, listening func(net.Addr)) error {
	e, err := engine.New(cfg, echo{})
	if err != nil {
		return err
	}
	ln, err := e.Listen("tcp", addr, nil)
	if err != nil {
		e.Shutdown(context.Background())
		return err
	}
	listening(ln.Addr())
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		e.Shutdown(sctx)
	}()
	return e.Run(context.Background())
}
