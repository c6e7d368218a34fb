package engine

import (
	"crypto/tls"
	"net"
	"sync/atomic"
	"testing"
	"time"
)

// TestTLSWriteFailureInHandshakeBounded: a TLS connection whose write
// meets the peer's reset during its handshake, the handshake then
// succeeding with what came before the reset (the client's Finished and
// a record of data), is kept as any whose write failed (Conn.peerReset),
// and CloseTimeout bounds it though the handshake's end stopped the
// handshake's timer: its handler, pausing it in OnOpen and never
// resuming, has it ended with the reset's error. Reached on epoll: the
// server's session ticket (TLS 1.3, a client certificate asked for: sent
// after the client's certificate) is written with the reset in the socket
// and not read yet; on the uring backends a receive may take the reset
// first, the handshake then failing (OnClose alone), which the test
// accepts.
func TestTLSWriteFailureInHandshakeBounded(t *testing.T) {
	for _, b := range testBackends {
		t.Run(string(b), func(t *testing.T) {
			var opened atomic.Bool
			ended := make(chan error, 1)
			h := &BaseHandlerFunc{
				open: func(c *Conn) {
					opened.Store(true)
					c.PauseRead() // and never resumed
				},
				closed: func(c *Conn, err error) { ended <- err },
			}
			cfg := testConfig(b)
			cfg.CPUs = []int{0}
			cfg.CloseTimeout = 300 * time.Millisecond
			// The client's Finished and its 1 KiB record fill the
			// handshake's input (pauseTLS): the socket's end is not read
			// before the handshake ends.
			cfg.WriteHighWater = 512
			cfg.ReadPastHighWater = true
			var loop atomic.Pointer[Loop]
			heldA, releaseA := make(chan struct{}), make(chan struct{})
			scfg := serverTLS()
			scfg.ClientAuth = tls.RequestClientCert
			scfg.VerifyConnection = func(tls.ConnectionState) error {
				// Hold the loop: the session ticket, written next, is
				// posted behind it.
				loop.Load().Post(func() { close(heldA); <-releaseA })
				<-heldA
				return nil
			}
			e, addr := startTLSEngine(t, cfg, h, &ListenConfig{TLS: scfg})
			l := e.Loops()[0]
			loop.Store(l)
			raw, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer raw.Close()
			sc := &stashConn{Conn: raw}
			ccfg := clientTLS(tls.VersionTLS13)
			ccfg.ClientSessionCache = tls.NewLRUClientSessionCache(1) // or no ticket is sent
			cc := tls.Client(sc, ccfg)
			if err := cc.Handshake(); err != nil {
				t.Fatal(err)
			}
			if _, err := cc.Write(make([]byte, 1024)); err != nil {
				t.Fatal(err)
			}
			released := false
			defer func() {
				if !released {
					close(releaseA)
				}
			}()
			select {
			case <-heldA:
			case <-time.After(10 * time.Second):
				t.Fatal("the server's handshake did not verify the client's certificate")
			}
			waitFor(t, "the session ticket's write posted", func() bool {
				l.mu.Lock()
				defer l.mu.Unlock()
				return len(l.posted) > 0
			})
			heldB, releaseB := make(chan struct{}), make(chan struct{})
			fd := -1
			l.Post(func() {
				for _, c := range l.conns {
					if c != nil && c.state == stateOpen {
						fd = c.fd
					}
				}
				close(heldB)
				<-releaseB
			})
			close(releaseA)
			released = true
			<-heldB // the ticket queued, not written
			if _, err := raw.Write(sc.stash); err != nil {
				close(releaseB)
				t.Fatal(err)
			}
			raw.(*net.TCPConn).SetLinger(0)
			raw.Close()
			if fd < 0 {
				close(releaseB)
				t.Fatal("no open connection on the loop")
			}
			waitFor(t, "the reset to reach the server's socket", func() bool { return tcpClosed(fd) })
			close(releaseB)
			select {
			case err := <-ended:
				if opened.Load() && !isWriteReset(err) {
					t.Errorf("OnClose(%v) of a connection opened after its write met the reset, want the reset's error", err)
				}
				if !opened.Load() {
					t.Logf("the handshake failed (%v): the reset came first", err)
				}
			case <-time.After(5 * time.Second):
				t.Fatalf("a connection whose write met the reset in its handshake, paused in OnOpen (opened %v), did not end 5 s after (CloseTimeout %v)", opened.Load(), cfg.CloseTimeout)
			}
		})
	}
}

// stashConn writes the first Write (a ClientHello) and, of the second
// (the client's last flight), all records but the last; it keeps that
// record and any later Write in stash for the test to send.
type stashConn struct {
	net.Conn
	writes int
	stash  []byte
}

func (s *stashConn) Write(p []byte) (int, error) {
	s.writes++
	switch s.writes {
	case 1:
		return s.Conn.Write(p)
	case 2:
		last := 0
		for off := 0; off+5 <= len(p); off += 5 + (int(p[off+3])<<8 | int(p[off+4])) {
			last = off
		}
		s.stash = append(s.stash, p[last:]...)
		if _, err := s.Conn.Write(p[:last]); err != nil {
			return 0, err
		}
		return len(p), nil
	}
	s.stash = append(s.stash, p...)
	return len(p), nil
}
