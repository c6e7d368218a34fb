package engine

import (
	"crypto/tls"
	"net"
	"testing"
	"time"
)

// TestPausedResetDeliversHeld: data that arrives while the handler has
// paused reading, followed by the peer's reset, is delivered once the
// handler resumes, and then the connection ends with the reset's error
// (PauseRead's doc), on a plain and a TLS connection, on every backend.
// The loop is held until the kernel has taken the data and the reset, so
// that a uring receive still armed (the pause is lazy) brings both in one
// wait: the data held, and then the receive's ECONNRESET.
//
// On the uring backends a TLS connection, whose data held while paused is
// kept in its transport (not Conn.held), ended at the receive's reset
// with that data dropped.
func TestPausedResetDeliversHeld(t *testing.T) {
	for _, b := range testBackends {
		for _, withTLS := range []bool{false, true} {
			name := string(b) + "/plain"
			if withTLS {
				name = string(b) + "/tls"
			}
			t.Run(name, func(t *testing.T) {
				type end struct {
					got    string
					err    error
					resume bool // ResumeRead had been called
				}
				pausedc := make(chan *Conn, 1)
				ended := make(chan end, 1)
				var got []byte   // loop goroutine
				var resumed bool // loop goroutine
				h := &BaseHandlerFunc{
					data: func(c *Conn, b Buffer) bool {
						got = append(got, b.Bytes()...)
						if len(got) == len("first") {
							c.PauseRead()
							pausedc <- c
						}
						return false
					},
					closed: func(c *Conn, err error) { ended <- end{string(got), err, resumed} },
				}
				cfg := testConfig(b)
				cfg.CloseTimeout = time.Minute
				var addr string
				if withTLS {
					_, addr = startTLSEngine(t, cfg, h, &ListenConfig{TLS: serverTLS()})
				} else {
					_, addr = startEngine(t, cfg, h)
				}
				raw, err := net.Dial("tcp", addr)
				if err != nil {
					t.Fatal(err)
				}
				defer raw.Close()
				var w interface{ Write([]byte) (int, error) } = raw
				if withTLS {
					tc := tls.Client(raw, clientTLS(0))
					if err := tc.Handshake(); err != nil {
						t.Fatal(err)
					}
					w = tc
				}
				if _, err := w.Write([]byte("first")); err != nil {
					t.Fatal(err)
				}
				c := awaitConn(t, pausedc, "no data")
				fdc := make(chan int, 1)
				c.Loop().Post(func() { fdc <- c.Fd() })
				fd := <-fdc
				release := make(chan struct{})
				released := false
				defer func() {
					if !released {
						close(release)
					}
				}()
				held := make(chan struct{})
				c.Loop().Post(func() { close(held); <-release })
				<-held
				if _, err := w.Write([]byte("second")); err != nil {
					t.Fatal(err)
				}
				raw.(*net.TCPConn).SetLinger(0)
				raw.Close()
				waitFor(t, "the reset to reach the loop's socket", func() bool { return tcpClosed(fd) })
				close(release)
				released = true
				// The loop handles what the kernel has for the paused
				// connection: uring's receive ends (its data held, or
				// cancelled), epoll's event has it no longer watched.
				epoll := b == BackendEpoll || b == BackendEpollBusyPoll
				waitFor(t, "the loop to see the paused connection's socket", func() bool {
					ok := make(chan bool, 1)
					c.Loop().Post(func() { ok <- c.Closed() || c.k.recv == 0 && (!epoll || c.k.events == 0) })
					return <-ok
				})
				// Kept, paused, it must not wake the loop: epoll's
				// EPOLLHUP is level-triggered.
				waits := func() uint64 {
					n := make(chan uint64, 1)
					c.Loop().Post(func() { n <- c.Loop().Stats().Waits })
					return <-n
				}
				w0 := waits()
				time.Sleep(200 * time.Millisecond)
				if n := waits() - w0; n > 50 {
					t.Errorf("the loop waited %d times in 200ms while the reset connection sat paused", n)
				}
				c.Loop().Post(func() {
					resumed = true
					c.ResumeRead()
				})
				var e end
				select {
				case e = <-ended:
				case <-time.After(10 * time.Second):
					t.Fatal("the reset connection did not end")
				}
				if e.got != "firstsecond" || !e.resume || !isWriteReset(e.err) {
					t.Errorf("ended (%v, resumed %v) with %q delivered, want %q delivered after the resume and the reset's error", e.err, e.resume, e.got, "firstsecond")
				}
			})
		}
	}
}
