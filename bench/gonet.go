package bench

import (
	"context"
	"errors"
	"io"
	"net"
	"sync"
	"time"
)

// goNetServer is the go-net arm: Go's net package with a goroutine per
// connection.
type goNetServer struct {
	ln    net.Listener
	cfg   ServerConfig
	mu    sync.Mutex
	conns map[net.Conn]struct{}
	wg    sync.WaitGroup
	quit  chan struct{} // closed by Close: ends the accept loop's back-off
	hook  func()        // tests: called before each reply is written
}

func startGoNet(ctx context.Context, cfg ServerConfig) (Server, error) {
	cfg = cfg.WithDefaults()
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", cfg.Addr)
	if err != nil {
		return nil, err
	}
	s := &goNetServer{ln: ln, cfg: cfg, conns: map[net.Conn]struct{}{}, quit: make(chan struct{})}
	s.wg.Go(s.accept)
	return s, nil
}

// Addr is the listening address. Any goroutine.
func (s *goNetServer) Addr() net.Addr { return s.ln.Addr() }

// accept accepts until the listener is closed. An accept that fails
// otherwise (EMFILE, ENFILE, ENOBUFS: out of descriptors or memory until
// connections close) is retried after a back-off of 5 ms doubling to 1 s,
// as net/http's Server does.
func (s *goNetServer) accept() {
	var delay time.Duration
	for {
		c, err := s.ln.Accept()
		if errors.Is(err, net.ErrClosed) {
			return
		}
		if err != nil {
			delay = min(max(2*delay, 5*time.Millisecond), time.Second)
			t := time.NewTimer(delay)
			select {
			case <-t.C:
			case <-s.quit:
				t.Stop()
				return
			}
			continue
		}
		delay = 0
		s.mu.Lock()
		if s.conns == nil {
			s.mu.Unlock()
			c.Close()
			return
		}
		s.conns[c] = struct{}{}
		s.mu.Unlock()
		s.wg.Go(func() { s.serve(c) })
	}
}

func (s *goNetServer) serve(c net.Conn) {
	defer func() {
		s.mu.Lock()
		delete(s.conns, c)
		s.mu.Unlock()
		c.Close()
	}()
	e := Echo{Compute: s.cfg.Compute, BodySize: s.cfg.BodySize}
	in := make([]byte, 0, 64<<10)
	var out []byte
	for {
		if len(in) == cap(in) {
			in = append(in, make([]byte, cap(in))...)[:len(in)]
		}
		n, err := c.Read(in[len(in):cap(in)])
		if n > 0 {
			in = in[:len(in)+n]
			done, o, perr := e.Process(in, out[:0])
			out = o
			if len(out) > 0 && s.hook != nil {
				s.hook()
			}
			if len(out) > 0 {
				if _, err := c.Write(out); err != nil {
					return
				}
			}
			if perr != nil {
				if e.HTTP() { // the last HTTP reply: FIN after it
					linger(c)
				}
				return
			}
			if done > 0 { // nothing consumed: no move of in onto itself
				in = in[:copy(in, in[done:])]
			}
		}
		if err != nil {
			return
		}
	}
}

// linger half-closes c after its last HTTP reply and drops what the
// client still sends until it closes, for at most LingerTimeout and
// LingerBytes (see LingerTimeout); the caller then closes c.
func linger(c net.Conn) {
	tc, ok := c.(*net.TCPConn)
	if !ok || tc.CloseWrite() != nil {
		return
	}
	tc.SetReadDeadline(time.Now().Add(LingerTimeout))
	io.CopyN(io.Discard, tc, LingerBytes)
}

// Close stops accepting, closes every connection and waits for their
// goroutines. Any goroutine, once.
func (s *goNetServer) Close() error {
	err := s.ln.Close()
	close(s.quit)
	s.mu.Lock()
	for c := range s.conns {
		c.Close()
	}
	s.conns = nil
	s.mu.Unlock()
	s.wg.Wait()
	if errors.Is(err, net.ErrClosed) {
		err = nil
	}
	return err
}
