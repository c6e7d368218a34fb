package engine

import (
	"net"
	"strconv"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestAcceptErrorThatRepeatsBacksOff shuts a listener's socket down behind
// the engine's back (its Listener not closed), so that every accept on it
// fails with EINVAL, an error outside the shortages (descriptors, memory)
// that paused accepting: the loop backs off as for those, saying so once
// with the error and the address, instead of accepting again at once
// (epoll reports the socket ready again at once, uring re-armed its
// accept at once), which spun the loop at 100 % CPU. Once the socket
// listens again, the next accept after the pause takes a connection.
func TestAcceptErrorThatRepeatsBacksOff(t *testing.T) {
	for _, b := range testBackends {
		t.Run(string(b), func(t *testing.T) {
			var logs logLines
			cfg := testConfig(b)
			cfg.CPUs = []int{0}
			cfg.Logf = logs.logf
			e, ln := startListening(t, cfg, &echoHandler{}, "tcp", "127.0.0.1:0")
			l := e.Loops()[0]
			syncLoop(l) // the socket is accepted on
			fd := ln.fds[0]
			if err := unix.Shutdown(fd, unix.SHUT_RD); err != nil {
				t.Fatal(err)
			}
			// The first back-off, then 200 ms of them: when the loop sees
			// the failures is the scheduler's affair (an SQPOLL ring's
			// completions come from its SQ thread, on a CPU of its own
			// that CPU hogs may hold: a back-off looked for 20 ms after
			// the shutdown and 200 ms later found none, 0 waits).
			waitFor(t, "an accept back-off", func() bool { return l.Stats().AcceptBackoffs > 0 })
			w0 := l.Stats().Waits
			time.Sleep(200 * time.Millisecond)
			w1 := l.Stats().Waits
			s := l.Stats()
			t.Logf("%d waits in 200 ms of accepts failing, %d accept back-offs in all", w1-w0, s.AcceptBackoffs)
			if w1-w0 > 100 {
				t.Errorf("%d waits in 200 ms of accepts failing (%d back-offs in all): want a few, not a spinning loop", w1-w0, s.AcceptBackoffs)
			}
			if n := logs.count("accept on " + ln.Addr().String() + ": invalid argument"); n != 1 {
				t.Errorf("%d lines say the accept error and the address, want 1: %q", n, logs.all())
			}
			// Listening again (shut down, a socket bound to port 0 lets
			// its port go: the kernel picks another).
			if err := unix.Listen(fd, 16); err != nil {
				t.Fatal(err)
			}
			sa, err := unix.Getsockname(fd)
			if err != nil {
				t.Fatal(err)
			}
			c, err := net.DialTimeout("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(sa.(*unix.SockaddrInet4).Port)), 3*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			c.SetDeadline(time.Now().Add(3 * time.Second))
			if err := roundTrip(c, []byte("again")); err != nil {
				t.Errorf("echo once the socket listened again: %v", err)
			}
		})
	}
}
