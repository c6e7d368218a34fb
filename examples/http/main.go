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
// and closes each connection once its open requests are answered (an
// HTTP/1.1 one: its request under way), for up to 5 seconds; a second
// signal ends the process at once.
//
// With -tls-cert and -tls-key (PEM files) it serves HTTPS instead, the
// engine terminating TLS (engine.ListenConfig.TLS): HTTP/2 or HTTP/1.1 as
// the client's ALPN asks.
//
//	go run ./examples/http -addr 127.0.0.1:8080
//	curl --http2-prior-knowledge http://127.0.0.1:8080/
//	go run ./examples/http -addr 127.0.0.1:8443 -tls-cert cert.pem -tls-key key.pem
//	curl --cacert cert.pem https://localhost:8443/
package main

import (
	"context"
	"crypto/tls"
	"errors"
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
	certFile := flag.String("tls-cert", "", "serve HTTPS with the certificate (chain) in this PEM file; with -tls-key")
	keyFile := flag.String("tls-key", "", "the private key of -tls-cert, a PEM file")
	flag.Parse()
	lc, err := listenConfig(*certFile, *keyFile)
	if err != nil {
		fmt.Fprintln(os.Stderr, "http:", err)
		os.Exit(2)
	}
	h := &hello.Handler{}
	e, err := engine.New(&engine.Config{Backend: engine.Backend(*backend)}, h)
	if err != nil {
		fmt.Fprintln(os.Stderr, "http:", err)
		os.Exit(1)
	}
	ln, err := e.Listen("tcp", *addr, lc)
	if err != nil {
		fmt.Fprintln(os.Stderr, "http:", err)
		os.Exit(1)
	}
	fmt.Println("http: listening on", ln.Addr())
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	context.AfterFunc(ctx, func() {
		stop() // the signals' default action again: a second one ends the process at once
		fmt.Fprintln(os.Stderr, "http: stopping; a second signal ends it at once")
	})
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

// listenConfig is the listener's options: nil for plain HTTP, TLS with the
// certificate and key in certFile and keyFile (PEM) when both are given,
// offering h2 and http/1.1 through ALPN.
func listenConfig(certFile, keyFile string) (*engine.ListenConfig, error) {
	switch {
	case certFile == "" && keyFile == "":
		return nil, nil
	case certFile == "" || keyFile == "":
		return nil, errors.New("-tls-cert and -tls-key go together")
	}
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, err
	}
	return &engine.ListenConfig{TLS: &tls.Config{
		Certificates: []tls.Certificate{cert},
		NextProtos:   []string{"h2", "http/1.1"},
	}}, nil
}
