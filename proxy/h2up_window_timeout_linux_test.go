package proxy

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/spindlenet/spindle/engine"
	"github.com/spindlenet/spindle/internal/h2"
	"github.com/spindlenet/spindle/internal/hpack"
)

// windowApp takes one request's body without returning it to the
// proxy's window until told (open), its stream window 4 bytes
// (windowH2Up), and does not answer it.
type windowApp struct {
	id     uint32
	got    int  // body bytes received
	opened bool // received bytes go back to the window at once
	ended  bool // the body's end came
}

func (a *windowApp) OnRequest(s *h2.Server, id uint32, r *h2.Request, end bool) {
	a.id, a.ended = id, end
}

func (a *windowApp) OnData(s *h2.Server, id uint32, p []byte, end bool) {
	a.got += len(p)
	if a.opened {
		s.Consumed(id, len(p))
	}
	a.ended = a.ended || end
}

func (a *windowApp) OnTrailers(s *h2.Server, id uint32, fields []hpack.Field) { a.ended = true }
func (a *windowApp) OnReset(*h2.Server, uint32, h2.ErrCode)                   {}
func (a *windowApp) OnWritable(*h2.Server, uint32)                            {}
func (a *windowApp) OnGoAway(*h2.Server, h2.ErrCode, []byte)                  {}

// open returns what the stream received to its window, and what comes
// after as it comes.
func (a *windowApp) open(s *h2.Server) []byte {
	a.opened = true
	s.Consumed(a.id, a.got)
	return nil
}

// windowH2Up starts an HTTP/2 server of one connection whose streams
// have a receive window of 4 bytes (windowApp); tell runs f on its
// goroutine with its app and writes the frames f returns.
func windowH2Up(t *testing.T) (up *upstream, tell func(f func(*windowApp, *h2.Server) []byte)) {
	told := make(chan func(*h2.Server) []byte)
	a := &windowApp{}
	up = newUpstream(t, func(c net.Conn) {
		serveH2Told(c, a, &h2.Config{InitialWindowSize: 4}, told)
	})
	return up, func(f func(*windowApp, *h2.Server) []byte) {
		told <- func(s *h2.Server) []byte { return f(a, s) }
	}
}

// TestH2UpPerTryTimeoutNotMovedByWindow: per_try_timeout runs from a
// try's start at an h2c server, moved on by the request body's reads
// from the client, not by the body's going to the server as the server
// opens its window: a body the client sent whole at once, 4 bytes of it
// taken by the server's window, the rest taken 800 ms in, not answered,
// gets 504 at about 1 s (per_try_timeout 1 s, response_timeout 5 s),
// before 1 s from the window's opening, from an HTTP/2 client and an
// HTTP/1.1 one, whatever the body's framing. An HTTP/1.1 client's
// chunked body had its try's timeout start again as each chunk was
// parsed once the window opened: the server's answer at 1.5 s came
// first. The 504 late by 800 ms, where a loaded machine held the test up
// for as long (stallWatch), is tried again: the server answered at 1.5 s
// and the 504 was bounded to 1.5 s, which two CPU hogs beside -race
// passed.
func TestH2UpPerTryTimeoutNotMovedByWindow(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		for _, tc := range []struct{ name, head, body string }{
			{"h2", "", "startmidend"},
			{"http1/chunked", "Transfer-Encoding: chunked", "5\r\nstart\r\n3\r\nmid\r\n3\r\nend\r\n0\r\n\r\n"},
			{"http1/length", "Content-Length: 11", "startmidend"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				untilCalm(t, func() (string, string) { return perTryNotMovedByWindow(t, b, tc.head, tc.body) })
			})
		}
	})
}

// perTryNotMovedByWindow is a try of TestH2UpPerTryTimeoutNotMovedByWindow
// for a client sending head (an HTTP/1.1 request's framing field, "" for
// an HTTP/2 client) and body; it returns untilCalm's fault and pause.
func perTryNotMovedByWindow(t *testing.T, b engine.Backend, head, body string) (fault, paused string) {
	up, tell := windowH2Up(t)
	cfg := h2cPoolConfig(b, up.addr)
	cfg.Listeners[0].ResponseTimeout = Duration(5 * time.Second)
	cfg.Listeners[0].Routes = []RouteConfig{{Name: "up", PathPrefix: "/", Pool: "app",
		Retry: &RetryConfig{On: []string{"reset"}, PerTryTimeout: Duration(time.Second)}}}
	p := startProxy(t, cfg)
	type result struct {
		status int
		err    error
		at     time.Time
	}
	res := make(chan result, 1)
	stalls := stallWatch()
	t0 := time.Now()
	c := dial(t, p)
	defer c.Close()
	if head == "" {
		r := new(rawStream)
		cl := h2.NewClient(r, nil)
		id, err := cl.Request(&h2.Request{Method: []byte("POST"), Scheme: []byte("http"), Authority: []byte("x"), Path: []byte("/up")}, false)
		if err != nil {
			t.Fatal(err)
		}
		cl.WriteData(id, []byte(body), true)
		// (One write: the client sends the whole body at once.)
		if _, err := c.Write(cl.Pending()); err != nil {
			t.Fatal(err)
		}
		cl.Written(len(cl.Pending()))
		go func() {
			c.SetReadDeadline(time.Now().Add(10 * time.Second))
			var tail []byte
			buf := make([]byte, 64<<10)
			for !r.reset && !(r.status != 0 && r.end) {
				n, err := c.Read(buf)
				if n > 0 && cl.FeedTail(&tail, buf[:n]) != nil {
					err = errors.New("connection error")
				}
				if err != nil {
					res <- result{0, err, time.Now()}
					return
				}
				if out := cl.Pending(); len(out) > 0 {
					c.Write(out)
					cl.Written(len(out))
				}
			}
			res <- result{r.status, nil, time.Now()}
		}()
	} else {
		// (One write: the client sends the whole body at once.)
		if _, err := io.WriteString(c, "POST /up HTTP/1.1\r\nHost: x\r\n"+head+"\r\n\r\n"+body); err != nil {
			t.Fatal(err)
		}
		go func() {
			c.SetReadDeadline(time.Now().Add(10 * time.Second))
			resp, err := http.ReadResponse(bufio.NewReader(c), nil)
			if err != nil {
				res <- result{0, err, time.Now()}
				return
			}
			resp.Body.Close()
			res <- result{resp.StatusCode, nil, time.Now()}
		}()
	}
	waitFor(t, "the stream at the server", func() bool { return serverTotals(p, up.addr).H2Streams == 1 })
	// (The try started between t0 and tS: a loaded machine may take a
	// while to connect.)
	tS := time.Now()
	time.Sleep(time.Until(tS.Add(800 * time.Millisecond)))
	opened := time.Now() // (the window opens after)
	tell((*windowApp).open)
	r := <-res
	most := stalls()
	switch {
	case r.err != nil:
		fault = fmt.Sprintf("the request: %v after %v, want 504", r.err, r.at.Sub(t0))
	case r.status != 504 || r.at.Sub(t0) < 900*time.Millisecond:
		fault = fmt.Sprintf("the request whose body the server's window took 800 ms in, not answered: %d after %v; want 504 at about 1 s", r.status, r.at.Sub(t0))
	case !r.at.Before(opened.Add(time.Second)):
		// (The try's timeout moved by the window's opening: 504 at
		// per_try_timeout from there at the earliest.)
		fault = fmt.Sprintf("the request whose body the server's window took 800 ms in, not answered: 504 after %v (%v from the stream's start at the server), %v from the window's opening; want it at about 1 s, before 1 s from the opening",
			r.at.Sub(t0), r.at.Sub(tS), r.at.Sub(opened))
		if most >= 700*time.Millisecond {
			return fault, fmt.Sprintf("the process was kept from running for %v", most)
		}
	}
	ended := make(chan bool, 1)
	tell(func(a *windowApp, _ *h2.Server) []byte { ended <- a.ended; return nil })
	if !<-ended && fault == "" {
		fault = "the body's end did not reach the server once its window opened"
	}
	return fault, ""
}
