package engine

import (
	"crypto/tls"
	"errors"
	"net"
	"net/netip"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// renegDialer writes "hello" at OnOpen and records what comes back.
type renegDialer struct {
	BaseHandler
	opened chan *Conn
	closed chan error
	got    atomic.Int64
}

func (h *renegDialer) OnOpen(c *Conn) {
	c.Write([]byte("hello\n"))
	h.opened <- c
}
func (h *renegDialer) OnData(c *Conn, b Buffer) bool { h.got.Add(int64(b.Len())); return false }
func (h *renegDialer) OnEOF(c *Conn)                 { c.Close() }
func (h *renegDialer) OnClose(c *Conn, err error)    { h.closed <- err }

// TestDialTLSRenegotiation: a DialTLS connection whose config allows
// renegotiation (tls.RenegotiateOnceAsClient, as legacy servers need) to an
// OpenSSL TLS 1.2 server that asks for it (s_server's "r"). crypto/tls runs
// the new handshake inside Read, on the loop, where the transport has no
// ServerHello yet: the connection must either renegotiate and go on, or end
// with an error; it must not wedge with its writes failing.
func TestDialTLSRenegotiation(t *testing.T) {
	bin, err := exec.LookPath("openssl")
	if err != nil {
		t.Skip("openssl not installed")
	}
	dir := t.TempDir()
	key, crt := filepath.Join(dir, "k.pem"), filepath.Join(dir, "c.pem")
	if out, err := exec.Command(bin, "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256",
		"-nodes", "-subj", "/CN=localhost", "-days", "1", "-keyout", key, "-out", crt).CombinedOutput(); err != nil {
		t.Fatalf("openssl req: %v\n%s", err, out)
	}
	// Port 0: s_server binds a port of the kernel's choice and says which
	// ("ACCEPT 127.0.0.1:port"). A port picked by a listener of the test's
	// and closed could be another process's by the time s_server bound it.
	cmd := exec.Command(bin, "s_server", "-accept", "127.0.0.1:0", "-cert", crt, "-key", key, "-tls1_2")
	in, _ := cmd.StdinPipe()
	var out lockedBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	waitOut := func(w string) bool {
		for i := 0; i < 500; i++ {
			if strings.Contains(out.String(), w) {
				return true
			}
			time.Sleep(10 * time.Millisecond)
		}
		return false
	}
	var addr string
	for i := 0; ; i++ {
		_, line, _ := strings.Cut(out.String(), "ACCEPT ")
		if a, _, ok := strings.Cut(line, "\n"); ok {
			addr = a
			break
		}
		if i == 500 {
			t.Fatalf("s_server did not start\n%s", out.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	if _, err := netip.ParseAddrPort(addr); err != nil {
		t.Fatalf("s_server's ACCEPT line: %v\n%s", err, out.String())
	}
	for _, b := range []Backend{BackendURing} {
		t.Run(string(b), func(t *testing.T) {
			h := &renegDialer{opened: make(chan *Conn, 1), closed: make(chan error, 1)}
			e := newEngine(t, testConfig(b), h)
			runEngine(t, e)
			l := e.Loops()[0]
			cfg := &tls.Config{InsecureSkipVerify: true, Renegotiation: tls.RenegotiateOnceAsClient}
			l.Post(func() {
				if _, err := l.DialTLS("tcp", addr, 10*time.Second, cfg); err != nil {
					h.closed <- err
				}
			})
			var c *Conn
			select {
			case c = <-h.opened:
			case err := <-h.closed:
				t.Fatalf("OnClose before OnOpen: %v\n%s", err, out.String())
			case <-time.After(10 * time.Second):
				t.Fatalf("no OnOpen\n%s", out.String())
			}
			if !waitOut("hello") {
				t.Fatalf("s_server did not get hello\n%s", out.String())
			}
			in.Write([]byte("r\n")) // renegotiate
			// s_server's own print-out of it is stdio-buffered: wait.
			time.Sleep(time.Second)
			werr := make(chan error, 1)
			l.Post(func() {
				_, err := c.Write([]byte("after\n"))
				werr <- err
			})
			err := <-werr
			select {
			case cerr := <-h.closed:
				t.Logf("closed with %v (write: %v)", cerr, err)
				return
			case <-time.After(3 * time.Second):
			}
			if err != nil {
				var ne net.Error
				t.Errorf("connection open, neither renegotiated nor closed 3.5 s after the server's HelloRequest; Write: %v (net.Error temporary: %v)", err, errors.As(err, &ne))
			} else if !waitOut("after") {
				t.Errorf("write after renegotiation did not arrive\n%s", out.String())
			}
			l.Post(func() { c.Reset() })
			<-h.closed
		})
	}
}
