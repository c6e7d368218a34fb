package bench

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// handshakeSlot is what one slot counted, read once its thread is done.
type handshakeSlot struct {
	hist    *Histogram
	replies uint64 // connections whose reply was verified in the window
	// conns and resumed are every connection that completed its handshake
	// (warm-up and window), and those of them that resumed a session.
	conns, resumed   int
	serverBytes      int64 // read by the connections up to their replies
	versions, suites []string
	alpns            []string
	// answered is the connections begun in the window (each completed:
	// one that fails fails the run).
	answered uint64
	// perMS counts the replies verified in each millisecond from the
	// run's origin on, warm-up and window and after (replyTimes); one
	// after the last millisecond is counted in it.
	perMS []uint64
}

// handshakeIOTimeout bounds a connection's connect, handshake and
// exchange, as loadHandshakeTimeout the load generator's handshakes.
const handshakeIOTimeout = loadHandshakeTimeout

// runHandshakes runs a handshake load: h.slots threads, each opening a
// connection to h.addr, completing its TLS handshake, sending one request
// and verifying its reply, closing it first (closeFirst) and opening the
// next, from the start until the end of the window (warm-up,
// then window); a connection begun in the window and still open at its
// end is waited for. The result is a LoadResult as RunLoad's (Hist: the
// connect-to-reply times of the connections begun in the window; Replies:
// the replies verified in it; the client CPU the whole process's,
// RUSAGE_SELF, over the window; times: when every reply came, so that a
// counter read off the window's edges is divided by the replies between
// its reads) and what the connections' TLS agreed, with the resumed ones
// counted. Any connection that fails fails the run.
// The caller has pinned the process to the client CPUs (RunProxy).
func runHandshakes(ctx context.Context, h handshakeLoad) (*LoadResult, *ProxyTLSResult, error) {
	ta, err := net.ResolveTCPAddr("tcp4", h.addr)
	if err != nil {
		return nil, nil, err
	}
	sa := &unix.SockaddrInet4{Port: ta.Port}
	copy(sa.Addr[:], ta.IP.To4())
	cfg, err := h.framing.withDefaults()
	if err != nil {
		return nil, nil, err
	}
	var stop atomic.Bool
	ctxStop := context.AfterFunc(ctx, func() { stop.Store(true) })
	defer ctxStop()
	origin := time.Now()
	start := origin.Add(h.warmup)
	end := start.Add(h.window)
	var cpu [2]unix.Rusage
	edges := make(chan error, 1)
	done := make(chan struct{})
	go func() {
		for i, t := range []time.Time{start, end} {
			if !waitUntil(done, t) {
				edges <- errStopped
				return
			}
			if err := unix.Getrusage(unix.RUSAGE_SELF, &cpu[i]); err != nil {
				edges <- os.NewSyscallError("getrusage", err)
				return
			}
		}
		edges <- nil
	}()
	if h.Window != nil {
		h.Window(start, end)
	}
	slots := make([]handshakeSlot, h.slots)
	// The milliseconds whose replies the slots count: replies come until
	// the connections begun before the window's end are done, a second
	// more is room for them.
	perMS := (h.warmup+h.window+time.Second)/time.Millisecond + 1
	errs := make([]error, h.slots)
	var wg sync.WaitGroup
	for i := range slots {
		wg.Go(func() {
			if testClientThread != nil {
				testClientThread()
			}
			// The thread is pinned and dies with the goroutine: it is
			// not unlocked, so no other goroutine runs on its mask.
			runtime.LockOSThread()
			if err := pinThread(h.cpus); err != nil {
				errs[i] = err
			} else {
				// Connect writes the address into its sockaddr: a copy each.
				sa := *sa
				slots[i].perMS = make([]uint64, perMS)
				errs[i] = slots[i].run(uint32(i), &sa, h.tls, newLoadFraming(cfg), origin, start, end, &stop)
			}
			if errs[i] != nil {
				stop.Store(true)
			}
		})
	}
	wg.Wait()
	err = errors.Join(errs...)
	if err == nil {
		err = ctx.Err()
	}
	if err == nil {
		// The slots ran past the window's end: the second read comes
		// (done closed first could be taken for a stop).
		err = <-edges
	}
	close(done)
	if err != nil {
		return nil, nil, err
	}
	res := &LoadResult{Hist: NewHistogram(), Window: h.window, Threads: h.slots, CPUs: clientCPUCount(h.slots, h.cpus),
		ClientUser: time.Duration(unix.TimevalToNsec(cpu[1].Utime) - unix.TimevalToNsec(cpu[0].Utime)),
		ClientSys:  time.Duration(unix.TimevalToNsec(cpu[1].Stime) - unix.TimevalToNsec(cpu[0].Stime)),
		times:      replyTimes{origin: origin, perMS: make([]uint64, perMS)}}
	lt := &ProxyTLSResult{}
	var versions, suites, alpns []string
	for _, s := range slots {
		res.Hist.Merge(s.hist)
		res.Replies += s.replies
		for i, n := range s.perMS {
			res.times.perMS[i] += n
		}
		res.Answered += s.answered
		res.Sent += s.answered
		lt.Handshakes += s.conns
		lt.Resumed += s.resumed
		lt.ServerBytes += float64(s.serverBytes)
		for _, v := range s.versions {
			versions = appendNew(versions, v)
		}
		for _, v := range s.suites {
			suites = appendNew(suites, v)
		}
		for _, v := range s.alpns {
			alpns = appendNew(alpns, v)
		}
	}
	if lt.Handshakes > 0 {
		lt.ServerBytes /= float64(lt.Handshakes)
	}
	lt.Tickets = tickets(h.tls)
	lt.Version, lt.CipherSuite, lt.ALPN = strings.Join(versions, ", "), strings.Join(suites, ", "), strings.Join(alpns, ", ")
	return res, lt, nil
}

// run is slot conn's loop, on its pinned thread: a connection after the
// other until end, or until stop; each reply is counted in s.perMS by its
// millisecond from origin.
func (s *handshakeSlot) run(conn uint32, sa unix.Sockaddr, cfg *tls.Config, f loadFraming, origin, start, end time.Time, stop *atomic.Bool) error {
	s.hist = NewHistogram()
	var req, scratch []byte
	for seq := uint64(1); !stop.Load(); seq++ {
		t0 := time.Now()
		if !t0.Before(end) {
			return nil
		}
		req = f.appendRequest(req[:0], conn, seq)
		// t1 is when the reply was verified: the close that follows
		// (closeFirst, a round trip more through the proxy) is not in
		// the connect-to-reply latency.
		state, t1, err := s.once(sa, cfg, f, req, conn, seq, &scratch, stop)
		if err != nil {
			return fmt.Errorf("slot %d connection %d: %w", conn, seq, err)
		}
		s.conns++
		if state.DidResume {
			s.resumed++
		}
		s.versions = appendNew(s.versions, tls.VersionName(state.Version))
		s.suites = appendNew(s.suites, tls.CipherSuiteName(state.CipherSuite))
		s.alpns = appendNew(s.alpns, state.NegotiatedProtocol)
		s.perMS[min(max(t1.Sub(origin), 0)/time.Millisecond, time.Duration(len(s.perMS)-1))]++
		if !t1.Before(start) && t1.Before(end) {
			s.replies++
		}
		if !t0.Before(start) {
			s.answered++
			s.hist.Record(t1.Sub(t0))
		}
	}
	return nil
}

// once makes one connection to sa: connect, the TLS handshake with cfg,
// request req (seq of conn) and its reply verified, then close_notify and
// close. It returns the connection's TLS state and when its reply was
// verified.
func (s *handshakeSlot) once(sa unix.Sockaddr, cfg *tls.Config, f loadFraming, req []byte, conn uint32, seq uint64, scratch *[]byte, stop *atomic.Bool) (tls.ConnectionState, time.Time, error) {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return tls.ConnectionState{}, time.Time{}, os.NewSyscallError("socket", err)
	}
	defer unix.Close(fd)
	if err := unix.SetsockoptInt(fd, unix.IPPROTO_TCP, unix.TCP_NODELAY, 1); err != nil {
		return tls.ConnectionState{}, time.Time{}, os.NewSyscallError("setsockopt TCP_NODELAY", err)
	}
	// The transport blocks in polls until the deadline (loadTransport's
	// handshake mode), for the whole connection.
	tr := &loadTransport{fd: fd, stop: stop, deadline: time.Now().Add(handshakeIOTimeout)}
	if err := unix.Connect(fd, sa); err != unix.EINPROGRESS && err != nil {
		return tls.ConnectionState{}, time.Time{}, os.NewSyscallError("connect", err)
	} else if err == unix.EINPROGRESS {
		if err := tr.wait(unix.POLLOUT); err != nil {
			return tls.ConnectionState{}, time.Time{}, fmt.Errorf("connect: %w", err)
		}
		soerr, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_ERROR)
		if err != nil {
			return tls.ConnectionState{}, time.Time{}, os.NewSyscallError("getsockopt", err)
		}
		if soerr != 0 {
			return tls.ConnectionState{}, time.Time{}, os.NewSyscallError("connect", unix.Errno(soerr))
		}
	}
	cc := &countingTransport{loadTransport: tr}
	c := tls.Client(cc, cfg)
	if err := c.Handshake(); err != nil {
		return tls.ConnectionState{}, time.Time{}, fmt.Errorf("handshake: %w", err)
	}
	if _, err := c.Write(req); err != nil {
		return tls.ConnectionState{}, time.Time{}, fmt.Errorf("request: %w", err)
	}
	var buf [4096]byte
	var reply []byte
	for {
		n, err := f.replyLen(reply)
		if err != nil {
			return tls.ConnectionState{}, time.Time{}, err
		}
		if n > 0 && len(reply) >= n {
			if len(reply) > n {
				return tls.ConnectionState{}, time.Time{}, fmt.Errorf("%w: %d bytes after the reply", ErrMismatch, len(reply)-n)
			}
			if *scratch, err = f.verify(reply, conn, seq, *scratch); err != nil {
				return tls.ConnectionState{}, time.Time{}, err
			}
			break
		}
		k, err := c.Read(buf[:])
		if k == 0 && err != nil {
			return tls.ConnectionState{}, time.Time{}, fmt.Errorf("after %d bytes of the reply: %w", len(reply), err)
		}
		reply = append(reply, buf[:k]...)
	}
	replied := time.Now()
	s.serverBytes += cc.in
	state := c.ConnectionState()
	return state, replied, closeFirst(c, tr)
}

// countingTransport is a loadTransport that counts the bytes it read.
type countingTransport struct {
	*loadTransport
	in int64
}

func (t *countingTransport) Read(p []byte) (int, error) {
	n, err := t.loadTransport.Read(p)
	t.in += int64(n)
	return n, err
}

// closeFirst ends the connection from the client's side: close_notify
// and the FIN (shutdown), then what the server sends until its end (its
// close_notify, its FIN) read and dropped, so that the close that
// follows sends no reset: the client closed first, and the connection's
// TIME_WAIT is on its side. A server that resets the connection instead
// of ending it is no error.
func closeFirst(c *tls.Conn, tr *loadTransport) error {
	// Corked, the close_notify waits for the FIN and goes in its segment:
	// a server that answered a close_notify come alone with its own FIN
	// could send that before the client's came, and both ends of a
	// simultaneous close keep a TIME_WAIT.
	if err := unix.SetsockoptInt(tr.fd, unix.IPPROTO_TCP, unix.TCP_CORK, 1); err != nil {
		return os.NewSyscallError("setsockopt TCP_CORK", err)
	}
	if err := c.CloseWrite(); err != nil {
		return fmt.Errorf("close_notify: %w", err)
	}
	if err := unix.Shutdown(tr.fd, unix.SHUT_WR); err != nil {
		return os.NewSyscallError("shutdown", err)
	}
	var buf [512]byte
	for {
		_, err := tr.Read(buf[:])
		switch {
		case err == io.EOF || errors.Is(err, unix.ECONNRESET):
			return nil
		case err != nil:
			return fmt.Errorf("waiting for the server's end: %w", err)
		}
	}
}
