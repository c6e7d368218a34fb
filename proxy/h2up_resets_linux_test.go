package proxy

import (
	"errors"
	"net"
	"net/http"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/spindlenet/spindle/engine"
	"github.com/spindlenet/spindle/internal/h2"
	"github.com/spindlenet/spindle/internal/hpack"
)

// resetBoundUp is an h2c server on internal/h2's Server with its default
// rapid-reset bound (MaxEarlyResets 200): it answers nothing on /hang
// (each such request signals got), holds /held until release is closed
// (each signals held), answers /local 429 as its own (Server.Local, as a
// spindle proxy's answers are: they give no early reset back), and
// answers "ok" at once otherwise. calm counts
// the connections it ended for a connection error (past the bound:
// GOAWAY ENHANCE_YOUR_CALM).
type resetBoundUp struct {
	*upstream
	got, held chan struct{}
	release   chan struct{}
	calm      atomic.Int64
}

func newResetBoundUp(t *testing.T) *resetBoundUp {
	u := &resetBoundUp{got: make(chan struct{}, 1000), held: make(chan struct{}, 10), release: make(chan struct{})}
	u.upstream = newUpstream(t, u.serve)
	return u
}

func (u *resetBoundUp) serve(c net.Conn) {
	a := &resetBoundApp{u: u}
	s := h2.NewServer(a, nil)
	var tail []byte
	buf := make([]byte, 64<<10)
	for {
		if writePending(c, s) != nil {
			return
		}
		if s.Done() {
			return
		}
		c.SetReadDeadline(time.Now().Add(20 * time.Millisecond))
		n, err := c.Read(buf)
		if errors.Is(err, os.ErrDeadlineExceeded) {
			select {
			case <-u.release:
				for _, id := range a.held {
					a.answer(s, id)
				}
				a.held = a.held[:0]
			default:
			}
			continue
		}
		if err != nil {
			s.Close()
			return
		}
		if s.FeedTail(&tail, buf[:n]) != nil {
			u.calm.Add(1)
			c.Write(s.Pending())
			return
		}
	}
}

type resetBoundApp struct {
	u    *resetBoundUp
	held []uint32
}

func (a *resetBoundApp) OnRequest(s *h2.Server, id uint32, r *h2.Request, end bool) {
	switch string(r.Path) {
	case "/hang":
		a.u.got <- struct{}{}
	case "/held":
		a.held = append(a.held, id)
		a.u.held <- struct{}{}
	case "/local":
		s.Local(id)
		if s.WriteHeaders(id, 429, rawFields, false) == nil {
			s.WriteData(id, rawOK, true)
		}
	default:
		a.answer(s, id)
	}
}

func (a *resetBoundApp) answer(s *h2.Server, id uint32) {
	if s.WriteHeaders(id, 200, rawFields, false) == nil {
		s.WriteData(id, rawOK, true)
	}
}

func (a *resetBoundApp) OnData(s *h2.Server, id uint32, p []byte, end bool) { s.Consumed(id, len(p)) }
func (a *resetBoundApp) OnTrailers(*h2.Server, uint32, []hpack.Field)       {}
func (a *resetBoundApp) OnReset(*h2.Server, uint32, h2.ErrCode)             {}
func (a *resetBoundApp) OnWritable(*h2.Server, uint32)                      {}
func (a *resetBoundApp) OnGoAway(*h2.Server, h2.ErrCode, []byte)            {}

// resetRounds has a raw client of p send n requests for path /hang, one
// at a time, each reset (CANCEL) once it reached the server: each an
// early reset, for the proxy's bound of the client and for the server's.
func resetRounds(t *testing.T, p *Proxy, u *resetBoundUp, n int) {
	t.Helper()
	r := openRawH2(t, p)
	for i := range n {
		resetHang(t, r, u, uint32(2*i+1), i)
	}
}

// resetHang has r send a GET for /hang on stream id and reset it (CANCEL)
// once it reached u's server: an early reset. i is the round it is in.
func resetHang(t *testing.T, r *rawH2Conn, u *resetBoundUp, id uint32, i int) {
	t.Helper()
	r.get(id, "/hang")
	select {
	case <-u.got:
	case <-time.After(10 * time.Second):
		t.Fatalf("round %d: the request did not reach the server", i)
	}
	r.w(h2.AppendRSTStream(nil, id, h2.Cancel))
}

// get sends a GET for path on stream id, its request complete.
func (r *rawH2Conn) get(id uint32, path string) {
	r.w(r.headers(id, true, [2]string{":method", "GET"}, [2]string{":scheme", "http"}, [2]string{":authority", "x"}, [2]string{":path", path}))
}

// awaitStreamEnd reads r's frames until stream id ends, and fails t if a
// GOAWAY, a reset or a read error comes first; want says what the stream
// should have been answered, i the round it is in.
func awaitStreamEnd(t *testing.T, r *rawH2Conn, id uint32, i int, want string) {
	t.Helper()
	for {
		f, err := r.untilStream(id)
		if err != nil || f.Type == h2.FrameGoAway || f.Type == h2.FrameRSTStream {
			t.Fatalf("round %d: %v %v %v, want %s", i, f.Type, f.Code, err, want)
		}
		if f.Flags.Has(h2.FlagEndStream) {
			return
		}
	}
}

// holdRequest starts a GET for /held through c, waits until it reached
// u's server, which holds it until u.release is closed, and returns the
// channel its answer comes on.
func holdRequest(t *testing.T, c *http.Client, base string, u *resetBoundUp) <-chan string {
	t.Helper()
	held := getAsync(c, base+"/held")
	select {
	case <-u.held:
	case <-time.After(10 * time.Second):
		t.Fatal("the held request did not reach the server")
	}
	return held
}

// checkHeldCompletes releases u's held request (holdRequest's) and checks
// that it was answered 200 ok, that the server ended no connection past
// its rapid-reset bound, and that the proxy retired 2 of the 3
// connections it made to u.
func checkHeldCompletes(t *testing.T, p *Proxy, u *resetBoundUp, held <-chan string) {
	t.Helper()
	close(u.release)
	select {
	case got := <-held:
		if got != "200 ok" {
			t.Errorf("the request in flight beside the resets: %q, want 200 ok", got)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("the request in flight beside the resets got no answer")
	}
	if n := u.calm.Load(); n != 0 {
		t.Errorf("the server ended %d connections past its rapid-reset bound, want none", n)
	}
	if st := serverTotals(p, u.addr); st.H2ResetRetires != 2 || u.accepted.Load() != 3 {
		t.Errorf("%d connections retired of %d, want 2 of 3", st.H2ResetRetires, u.accepted.Load())
	}
}

// TestH2UpClientsResetsShareNoConnection: clients that each reset
// streams within the proxy's early-reset bound of a client (200), but
// together more than a server's (internal/h2's, the same 200), do not get
// the upstream connection they share ended by the server (GOAWAY
// ENHANCE_YOUR_CALM): the proxy retires a connection it reset half that
// many streams on, and the stream another client has in flight on it
// completes there, while new streams go to a fresh connection. Before, the
// proxy passed every reset on to the one connection, the server ended it
// past its bound, and the other client's request got 502.
func TestH2UpClientsResetsShareNoConnection(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		u := newResetBoundUp(t)
		p := startProxy(t, h2cPoolConfig(b, u.addr))
		c, base := h2Client(t, p)
		innocent := holdRequest(t, c, base, u)
		const clients, each = 3, 90 // 270 resets, each client's 90 within its bound
		for range clients {
			resetRounds(t, p, u, each)
		}
		// 100 early resets retire a connection: the first after the
		// 100th reset, the stream held on it finishing there; the second
		// at once, its last stream reset; the third carries 70.
		checkHeldCompletes(t, p, u, innocent)
		waitFor(t, "the retired connections' close", func() bool { return serverTotals(p, u.addr).H2Connections == 1 })
	})
}

// TestH2UpResetsGivenBackByCompletedStreams: a stream that completes
// gives an early reset back, as internal/h2's Server counts them, so a
// connection whose clients cancel some of their requests among completed
// ones is not retired: 150 resets, each followed by a completed request,
// leave the one connection in service.
func TestH2UpResetsGivenBackByCompletedStreams(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		u := newResetBoundUp(t)
		p := startProxy(t, h2cPoolConfig(b, u.addr))
		r := openRawH2(t, p)
		for i := range 150 {
			id := uint32(4*i + 1)
			resetHang(t, r, u, id, i)
			r.get(id+2, "/")
			awaitStreamEnd(t, r, id+2, i, "the response")
		}
		if st := serverTotals(p, u.addr); st.H2ResetRetires != 0 || u.accepted.Load() != 1 || u.calm.Load() != 0 {
			t.Errorf("%d connections retired of %d, %d ended by the server; want 0 of 1, none", st.H2ResetRetires, u.accepted.Load(), u.calm.Load())
		}
	})
}

// TestH2UpErrorAnswersGiveNoResetBack: a client that puts a request the
// server answers as its own error at no cost (429 here, Server.Local, as
// a spindle proxy's answers are) between its resets stays within the
// proxy's bound of a client (each answered stream gives it an early reset
// back there) but not within the server's, which gives none back: the
// proxy gives none back for a response of status 400 or above either,
// and retires the connection before the server's bound, the request
// another client has in flight on it completing. Before, each such answer
// gave one back, the connection's count stayed level, and the server
// ended it past 200 resets with the other request on it (502).
func TestH2UpErrorAnswersGiveNoResetBack(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		u := newResetBoundUp(t)
		p := startProxy(t, h2cPoolConfig(b, u.addr))
		c, base := h2Client(t, p)
		innocent := holdRequest(t, c, base, u)
		r := openRawH2(t, p)
		const rounds = 250
		for i := range rounds {
			id := uint32(4*i + 1)
			resetHang(t, r, u, id, i)
			r.get(id+2, "/local")
			awaitStreamEnd(t, r, id+2, i, "the 429")
		}
		checkHeldCompletes(t, p, u, innocent)
	})
}
