package bench

import (
	"crypto/tls"
	"io"
	"net"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// loadTLS is a load connection's TLS (LoadConfig.TLS): crypto/tls's client
// over tr, a transport the client thread owns. The handshake runs in the
// thread's set-up, tr reading and writing the socket itself (blocking in
// polls); from then on the thread's loop feeds tr what it reads from the
// socket (read) and writes to the socket what crypto/tls wrote to tr
// (flush), and a Read that finds nothing fed returns errTLSWouldBlock,
// which crypto/tls does not keep (a temporary net.Error, as the engine's
// transport).
type loadTLS struct {
	conn  *tls.Conn
	tr    loadTransport
	state tls.ConnectionState
}

// loadTransport is the net.Conn of a load connection's crypto/tls.
type loadTransport struct {
	fd   int
	stop *atomic.Bool
	// deadline bounds the handshake.
	deadline time.Time
	// live: the handshake is done; Read gives in, Write appends to out.
	live bool
	in   []byte // ciphertext read from the socket, not yet given to crypto/tls
	raw  []byte // the socket's read buffer, in's array
	out  []byte // ciphertext crypto/tls wrote, not yet on the socket
	eof  bool   // the socket read its end
}

// loadHandshakeTimeout bounds a load connection's TLS handshake.
const loadHandshakeTimeout = 10 * time.Second

// errTLSWouldBlock is what a live transport's Read returns when it holds
// nothing: crypto/tls returns it from Read without keeping it.
var errTLSWouldBlock net.Error = tlsWouldBlock{}

type tlsWouldBlock struct{}

func (tlsWouldBlock) Error() string   { return "bench: load: no TLS input read yet" }
func (tlsWouldBlock) Timeout() bool   { return false }
func (tlsWouldBlock) Temporary() bool { return true }

// handshakeTLS makes the connected non-blocking socket fd a TLS client
// with cfg and runs its handshake, waiting on the socket in polls of at
// most 100 ms so that a stopped run ends it, for up to
// loadHandshakeTimeout.
func handshakeTLS(fd int, cfg *tls.Config, stop *atomic.Bool) (*loadTLS, error) {
	l := &loadTLS{tr: loadTransport{fd: fd, stop: stop, deadline: time.Now().Add(loadHandshakeTimeout), raw: make([]byte, 64<<10)}}
	l.conn = tls.Client(&l.tr, cfg)
	if err := l.conn.Handshake(); err != nil {
		return nil, err
	}
	l.tr.live = true
	l.state = l.conn.ConnectionState()
	return l, nil
}

// wait polls the socket for events until it has one, the run is stopped
// or the handshake's deadline passes.
func (t *loadTransport) wait(events int16) error {
	for !t.stop.Load() {
		if time.Now().After(t.deadline) {
			return os.ErrDeadlineExceeded
		}
		pfd := []unix.PollFd{{Fd: int32(t.fd), Events: events}}
		n, err := unix.Poll(pfd, 100)
		if err == unix.EINTR || err == nil && n == 0 {
			continue
		}
		if err != nil {
			return os.NewSyscallError("poll", err)
		}
		return nil
	}
	return errStopped
}

// Read gives crypto/tls ciphertext: in the handshake from the socket,
// waiting for some; once live what the loop read (in), errTLSWouldBlock
// when there is none.
func (t *loadTransport) Read(p []byte) (int, error) {
	if t.live {
		switch {
		case len(t.in) > 0:
			n := copy(p, t.in)
			t.in = t.in[n:]
			return n, nil
		case t.eof:
			return 0, io.EOF
		}
		return 0, errTLSWouldBlock
	}
	for {
		n, err := unix.Read(t.fd, p)
		switch {
		case err == unix.EAGAIN:
			if err := t.wait(unix.POLLIN); err != nil {
				return 0, err
			}
		case err == unix.EINTR:
		case err != nil:
			return 0, os.NewSyscallError("read", err)
		case n == 0:
			return 0, io.EOF
		default:
			return n, nil
		}
	}
}

// Write takes what crypto/tls writes: in the handshake to the socket,
// waiting while it is full; once live onto out, which flush writes.
func (t *loadTransport) Write(p []byte) (int, error) {
	if t.live {
		t.out = append(t.out, p...)
		return len(p), nil
	}
	done := 0
	for done < len(p) {
		n, err := unix.Write(t.fd, p[done:])
		switch {
		case err == unix.EAGAIN:
			if err := t.wait(unix.POLLOUT); err != nil {
				return done, err
			}
		case err == unix.EINTR:
		case err != nil:
			return done, os.NewSyscallError("write", err)
		default:
			done += n
		}
	}
	return done, nil
}

// Close does nothing: the socket is the client thread's to close.
func (t *loadTransport) Close() error                     { return nil }
func (t *loadTransport) LocalAddr() net.Addr              { return &net.TCPAddr{} }
func (t *loadTransport) RemoteAddr() net.Addr             { return &net.TCPAddr{} }
func (t *loadTransport) SetDeadline(time.Time) error      { return nil }
func (t *loadTransport) SetReadDeadline(time.Time) error  { return nil }
func (t *loadTransport) SetWriteDeadline(time.Time) error { return nil }

// read decrypts into p what the connection received, reading the socket
// whenever crypto/tls has used all it was given: unix.EAGAIN (or EINTR)
// when the socket has nothing more, 0 bytes and no error when the server
// ended the stream (close_notify, or its FIN at a record boundary).
func (l *loadTLS) read(p []byte) (int, error) {
	for {
		n, err := l.conn.Read(p)
		switch {
		case n > 0:
			return n, nil
		case err == io.EOF:
			return 0, nil
		case err != errTLSWouldBlock:
			return 0, err
		}
		m, err := unix.Read(l.tr.fd, l.tr.raw)
		switch {
		case err == unix.EAGAIN || err == unix.EINTR:
			return 0, err
		case err != nil:
			return 0, os.NewSyscallError("read", err)
		case m == 0:
			l.tr.eof = true
		default:
			l.tr.in = l.tr.raw[:m]
		}
	}
}

// flush encrypts c's queued plaintext (all of it: TLS is closed loop only,
// where the socket's backlog is bounded by the requests in flight) onto
// the transport's out and writes out to the socket, as far as it takes.
func (l *loadTLS) flush(c *loadConn) error {
	if q := c.queued(); q > 0 {
		if _, err := l.conn.Write(c.wbuf[c.woff:]); err != nil {
			return err
		}
		c.woff += q
		c.written += uint64(q)
	}
	done, err := writeAvail(c.fd, l.tr.out)
	l.tr.out = l.tr.out[:copy(l.tr.out, l.tr.out[done:])]
	return err
}

// tlsAgreed sums up the TLS state of every connection of threads.
func tlsAgreed(threads []*loadThread) *LoadTLS {
	var versions, suites, alpns []string
	lt := &LoadTLS{}
	for _, t := range threads {
		for _, c := range t.conns {
			if c.tls == nil {
				continue
			}
			lt.Handshakes++
			versions = appendNew(versions, tls.VersionName(c.tls.state.Version))
			suites = appendNew(suites, tls.CipherSuiteName(c.tls.state.CipherSuite))
			alpns = appendNew(alpns, c.tls.state.NegotiatedProtocol)
		}
	}
	lt.Version, lt.CipherSuite, lt.ALPN = strings.Join(versions, ", "), strings.Join(suites, ", "), strings.Join(alpns, ", ")
	return lt
}
