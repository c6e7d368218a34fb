package engine_test

import (
	"context"
	"fmt"
	"time"

	"github.com/spindlenet/spindle/engine"
)

// echo sends every received buffer back without copying it.
type echo struct{ engine.BaseHandler }

func (echo) OnData(c *engine.Conn, b engine.Buffer) bool {
	c.WriteBuffer(b) // the engine releases b once sent
	return true      // so the handler keeps it until then
}

// An echo server with one loop per CPU on the default backend.
func ExampleNew() {
	e, err := engine.New(nil, echo{})
	if err != nil {
		fmt.Println(err)
		return
	}
	ln, err := e.Listen("tcp", "127.0.0.1:0", nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("listening on", ln.Addr())
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	e.Run(ctx) // until ctx ends or Shutdown
}

// Blocking work runs on another goroutine; its result comes back to the
// connection's loop with Post.
func ExampleLoop_Post() {
	slow := func(req []byte) []byte { return append([]byte("done: "), req...) }
	h := &postHandler{work: slow}
	_ = h
}

type postHandler struct {
	engine.BaseHandler
	work func([]byte) []byte
}

func (h *postHandler) OnData(c *engine.Conn, b engine.Buffer) bool {
	req := append([]byte(nil), b.Bytes()...) // b is reused after OnData returns
	go func() {
		resp := h.work(req)
		c.Loop().Post(func() {
			if !c.Closed() {
				c.Write(resp)
			}
		})
	}()
	return false
}

// A client connection dialed from a loop, with a timeout.
func ExampleLoop_Dial() {
	e, err := engine.New(&engine.Config{CPUs: []int{0}}, engine.BaseHandler{})
	if err != nil {
		fmt.Println(err)
		return
	}
	l := e.Loops()[0]
	l.Post(func() {
		// OnOpen follows when connected, OnClose on failure or timeout.
		if _, err := l.Dial("tcp", "127.0.0.1:8080", time.Second); err != nil {
			fmt.Println(err)
		}
	})
}

// oneShot answers one request per connection and ends it with a lingering
// close: the client may have sent more (pipelined requests, a body not
// read), and a plain Close with bytes unread would reset the connection,
// possibly before the client has read the answer.
type oneShot struct{ engine.BaseHandler }

func (oneShot) OnData(c *engine.Conn, b engine.Buffer) bool {
	c.Write([]byte("HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok"))
	// FIN after the answer; what comes next is dropped, and c closes at
	// the client's FIN, after 256 KiB more, or 500 ms after the FIN.
	c.CloseLinger(500*time.Millisecond, 256<<10)
	return false
}

// The last response on a connection, then a lingering close.
func ExampleConn_CloseLinger() {
	e, err := engine.New(nil, oneShot{})
	if err != nil {
		fmt.Println(err)
		return
	}
	if _, err := e.Listen("tcp", "127.0.0.1:0", nil); err != nil {
		fmt.Println(err)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	e.Run(ctx)
}
