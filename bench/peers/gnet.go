package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/panjf2000/gnet/v2"
	"golang.org/x/sys/unix"

	"github.com/spindlenet/spindle/bench"
)

// gnetArm is gnet v2 serving the bench protocols: cfg.Loops event loops on
// epoll, each on a locked OS thread.
var gnetArm = bench.Arm{
	Name:    "gnet",
	Summary: "gnet v2: event loops on epoll, one per loop thread (peer binary from bench/peers)",
	Start:   startGnet,
	Peer:    true,
	Order:   10,
}

// gnetServer runs one gnet engine.
type gnetServer struct {
	gnet.BuiltinEventEngine
	cfg    bench.ServerConfig
	eng    gnet.Engine
	addr   net.Addr
	booted chan error
	done   chan error
}

// gnetConn is one connection's protocol state, owned by its event loop.
type gnetConn struct {
	echo bench.Echo
	out  []byte
	// After the last HTTP reply: what comes is dropped until the client
	// closes, bench.LingerBytes or bench.LingerTimeout (linger).
	linger  *time.Timer
	drained int
}

func startGnet(ctx context.Context, cfg bench.ServerConfig) (bench.Server, error) {
	cfg = cfg.WithDefaults()
	s := &gnetServer{cfg: cfg, booted: make(chan error, 1), done: make(chan error, 1)}
	go func() {
		err := gnet.Run(s, "tcp://"+cfg.Addr,
			gnet.WithNumEventLoop(cfg.Loops),
			gnet.WithMulticore(cfg.Loops > 1),
			gnet.WithLockOSThread(true),
			gnet.WithTCPNoDelay(gnet.TCPNoDelay),
			gnet.WithLogger(quiet{}),
		)
		s.booted <- err // in case Run failed before OnBoot
		s.done <- err
	}()
	select {
	case err := <-s.booted:
		if err != nil {
			return nil, err
		}
	case <-time.After(10 * time.Second):
		return nil, errors.New("gnet did not boot within 10s")
	}
	return s, nil
}

// OnBoot learns the bound address from a duplicate of the listener. Called by gnet on its boot goroutine.
func (s *gnetServer) OnBoot(eng gnet.Engine) gnet.Action {
	s.eng = eng
	fd, err := eng.Dup()
	if err == nil {
		var sa unix.Sockaddr
		sa, err = unix.Getsockname(fd)
		unix.Close(fd)
		if err == nil {
			switch a := sa.(type) {
			case *unix.SockaddrInet4:
				s.addr = &net.TCPAddr{IP: net.IP(a.Addr[:]), Port: a.Port}
			case *unix.SockaddrInet6:
				s.addr = &net.TCPAddr{IP: net.IP(a.Addr[:]), Port: a.Port}
			default:
				err = fmt.Errorf("gnet listener has address %T", sa)
			}
		}
	}
	s.booted <- err
	return gnet.None
}

// OnOpen attaches the protocol state. Event-loop goroutine.
func (s *gnetServer) OnOpen(c gnet.Conn) ([]byte, gnet.Action) {
	c.SetContext(&gnetConn{echo: bench.Echo{Compute: s.cfg.Compute, BodySize: s.cfg.BodySize}})
	return nil, gnet.None
}

// OnTraffic answers the complete requests buffered on c, and closes c
// after a malformed one or an HTTP request that does not keep it alive:
// an HTTP connection with a lingering close (bench.LingerTimeout) where
// the reply is all written, else at once (gnet writes what it still holds
// for c before closing it, as far as the socket takes it without
// blocking). Event-loop goroutine.
func (s *gnetServer) OnTraffic(c gnet.Conn) gnet.Action {
	st := c.Context().(*gnetConn)
	if st.linger != nil {
		st.drained += c.InboundBuffered()
		if _, err := c.Discard(-1); err != nil || st.drained > bench.LingerBytes {
			return gnet.Close
		}
		return gnet.None
	}
	in, err := c.Peek(-1)
	if err != nil {
		return gnet.Close
	}
	n, out, perr := st.echo.Process(in, st.out[:0])
	st.out = out
	// Discard(0) would drop everything buffered (gnet treats n <= 0 as
	// "all"): only discard what was consumed.
	if n > 0 {
		if _, err := c.Discard(n); err != nil {
			return gnet.Close
		}
	}
	if len(out) > 0 {
		if _, err := c.Write(out); err != nil {
			return gnet.Close
		}
	}
	if perr != nil {
		if st.echo.HTTP() && c.OutboundBuffered() == 0 && unix.Shutdown(c.Fd(), unix.SHUT_WR) == nil {
			// FIN after the reply, then linger: gnet has no half-close.
			st.linger = time.AfterFunc(bench.LingerTimeout, func() { c.Close() })
			return s.OnTraffic(c) // drop what is buffered after the request
		}
		return gnet.Close
	}
	return gnet.None
}

// OnClose stops a lingering close's timer. Event-loop goroutine.
func (s *gnetServer) OnClose(c gnet.Conn, err error) gnet.Action {
	if st, _ := c.Context().(*gnetConn); st != nil && st.linger != nil {
		st.linger.Stop()
	}
	return gnet.None
}

// Addr is the listening address. Any goroutine.
func (s *gnetServer) Addr() net.Addr { return s.addr }

// Close stops the gnet engine and waits for Run to return. Any goroutine,
// once.
func (s *gnetServer) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := s.eng.Stop(ctx); err != nil {
		return err
	}
	return <-s.done
}

// quiet drops gnet's log lines (the harness reads the child's stderr only
// on failure).
type quiet struct{}

// Debugf drops the message. Any goroutine.
func (quiet) Debugf(string, ...any) {}

// Infof drops the message. Any goroutine.
func (quiet) Infof(string, ...any) {}

// Warnf drops the message. Any goroutine.
func (quiet) Warnf(string, ...any) {}

// Errorf drops the message. Any goroutine.
func (quiet) Errorf(string, ...any) {}

// Fatalf drops the message. Any goroutine.
func (quiet) Fatalf(string, ...any) {}
