package engine

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestUnixListenerCloseAcceptsNoMore connects to a Unix listener (a path
// and an abstract name) while its loops are busy, then closes it: the
// connection waiting in the backlog (and, on the abstract name, one made
// after Close) must not reach OnOpen once Close has returned ("Close
// stops accepting"), as on TCP, where Close shuts the sockets down and the
// kernel resets what waits in the accept queue. The loops accepted it and
// handed it to the handler after Close: OnOpen for a connection of a
// listener the program had closed. Close, which waits for the loops to
// close their sockets, runs beside the held loops: the connections come
// once it has begun.
func TestUnixListenerCloseAcceptsNoMore(t *testing.T) {
	for _, b := range testBackends {
		for _, kind := range []string{"path", "abstract"} {
			t.Run(string(b)+"/"+kind, func(t *testing.T) {
				name := filepath.Join(t.TempDir(), "s")
				if kind == "abstract" {
					name = fmt.Sprintf("@spindle-review4-%d-%d", os.Getpid(), time.Now().UnixNano())
				}
				var opened atomic.Int64
				h := &BaseHandlerFunc{open: func(c *Conn) { opened.Add(1) }}
				e, ln := startListening(t, testConfig(b), h, "unix", name)
				var holds []chan struct{}
				for _, l := range e.Loops() {
					syncLoop(l) // the listener is added
					held, hold := make(chan struct{}), make(chan struct{})
					holds = append(holds, hold)
					l.Post(func() {
						close(held)
						<-hold
					})
					<-held
				}
				c, err := net.Dial("unix", name) // in the backlog: no loop is free
				if err != nil {
					for _, hold := range holds {
						close(hold)
					}
					t.Fatal(err)
				}
				defer c.Close()
				closed := make(chan error, 1)
				go func() { closed <- ln.Close() }()
				waitFor(t, "Close to begin", ln.closed.Load)
				if kind == "abstract" {
					// The name stays bound until the loops close their
					// sockets: a connection made after Close began is no
					// more to be opened.
					if c2, err := net.Dial("unix", name); err == nil {
						defer c2.Close()
					}
				}
				for _, hold := range holds {
					close(hold)
				}
				if err := <-closed; err != nil {
					t.Fatal(err)
				}
				for _, l := range e.Loops() {
					syncLoop(l) // what the loops accepted before is handled
				}
				if n := opened.Load(); n != 0 {
					t.Errorf("%d connections opened on the listener after its Close returned", n)
				}
				c.SetReadDeadline(time.Now().Add(time.Second))
				if _, err := c.Read(make([]byte, 1)); err != io.EOF && !errors.Is(err, unix.ECONNRESET) {
					t.Errorf("client of a closed listener: read %v, want EOF or a reset", err)
				}
			})
		}
	}
}
