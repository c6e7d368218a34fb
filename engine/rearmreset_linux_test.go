package engine

import (
	"bytes"
	"io"
	"net"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// rearmHandler is BaseHandlerFunc with OnWritable.
type rearmHandler struct {
	BaseHandlerFunc
	writable func(c *Conn)
}

func (h *rearmHandler) OnWritable(c *Conn) {
	if h.writable != nil {
		h.writable(c)
	}
}

// TestRearmAfterPeerReset: a uring connection whose receive is armed again
// after the peer's reset, on a socket holding more than one multishot issue
// takes (33 receives, docs/KERNEL-QUIRKS.md), without a write of its own
// meeting the reset, delivers all the peer sent and ends with the reset's
// error. On Linux 6.18 a multishot receive armed so posts the data and
// never the end: the connection would be kept until CloseTimeout (a minute
// here). Each case arms on one of the engine's paths, the socket holding a
// 48 KiB tail over 1 KiB buffers:
//
//   - resume: ResumeRead after PauseRead, the receive cancelled by the lazy
//     pause before the tail came;
//   - highwater: the WriteHighWater pause lifted by the SEND's completion,
//     the loop held in OnWritable until the tail and the reset are in (the
//     queue sent whole: no write meets the reset);
//   - nobufs: the re-arm of a receive that ended with ENOBUFS, the handler
//     holding every buffer of the loop's ring, given back after the reset;
//   - limit (6.17's receive limit): the re-arm of a receive that ended at
//     its byte limit (WriteHighWater 64 KiB: 64 buffers), the loop held in
//     the OnData of its last buffer until the tail and the reset are in.
func TestRearmAfterPeerReset(t *testing.T) {
	for _, b := range testBackends {
		if b != BackendURing && b != BackendURingNAPI && b != BackendURingSQPoll {
			continue
		}
		for _, path := range []string{"resume", "highwater", "nobufs", "limit"} {
			t.Run(string(b)+"/"+path, func(t *testing.T) { rearmAfterReset(t, b, path) })
		}
	}
}

func rearmAfterReset(t *testing.T, b Backend, path string) {
	const bufSize = 1 << 10
	if path == "limit" && (testNoRecvLimit || !recvLimitUsable()) {
		t.Skip("no receive limit (SPINDLE_TEST_NO_RECV_LIMIT, or a kernel before 6.17): no receive ends at a byte count")
	}
	type end struct {
		got []byte
		err error
	}
	cfg := testConfig(b)
	cfg.ReadBufferSize = bufSize
	cfg.CloseTimeout = time.Minute
	head := []byte("first")
	headLen := len(head)
	switch path {
	case "highwater":
		cfg.WriteHighWater = bufSize
	case "nobufs":
		cfg.ReadBuffers = 64
		head = bytes.Repeat([]byte("h"), 64*bufSize)
	case "limit":
		cfg.WriteHighWater = 64 * bufSize
		head = bytes.Repeat([]byte("h"), 64*bufSize)
	}
	tail := make([]byte, 48*bufSize)
	for i := range tail {
		tail[i] = byte('a' + i%26)
	}

	connc := make(chan *Conn, 1)
	ended := make(chan end, 1)
	release := make(chan struct{})
	released := false
	defer func() {
		if !released {
			close(release)
		}
	}()
	blocked := make(chan int, 1) // the loop held: c.k.recv then
	var got []byte               // loop goroutine
	var kept []Buffer            // loop goroutine (nobufs)
	giveBack := false            // loop goroutine (nobufs)
	held := false                // loop goroutine
	fdc := make(chan int, 1)
	h := &rearmHandler{}
	h.data = func(c *Conn, buf Buffer) bool {
		if len(got) == 0 {
			fdc <- c.Fd() // before the limit case holds the loop
		}
		got = append(got, buf.Bytes()...)
		switch path {
		case "resume", "highwater":
			if len(got) == headLen && !held {
				held = true
				c.PauseRead()
				connc <- c
			}
		case "nobufs":
			select {
			case connc <- c:
			default:
			}
			if !giveBack {
				kept = append(kept, buf)
				return true
			}
		case "limit":
			select {
			case connc <- c:
			default:
			}
			if len(got) == len(head) && !held {
				held = true
				blocked <- int(c.k.recv)
				<-release
			}
		}
		return false
	}
	wrote := false // loop goroutine
	h.writable = func(c *Conn) {
		if path == "highwater" && !wrote {
			wrote = true
			blocked <- int(c.k.recv)
			<-release
		}
	}
	h.closed = func(c *Conn, err error) { ended <- end{append([]byte(nil), got...), err} }
	_, addr := startEngine(t, cfg, h)
	peer, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer peer.Close()
	if _, err := peer.Write(head); err != nil {
		t.Fatal(err)
	}
	c := awaitConn(t, connc, "no data")
	onLoop := func(f func()) {
		done := make(chan struct{})
		c.Loop().Post(func() { f(); close(done) })
		<-done
	}
	fd := <-fdc
	want := append([]byte(nil), head...)

	switch path {
	case "resume", "highwater":
		// A completion while paused cancels the receive (the pause is
		// lazy): "second" is held, or, a single-shot receive not armed
		// again while paused (SQPOLL without the limit), unread.
		if _, err := peer.Write([]byte("second")); err != nil {
			t.Fatal(err)
		}
		want = append(want, "second"...)
		waitFor(t, "the paused connection's receive to end", func() bool {
			var ok bool
			onLoop(func() { ok = c.k.recv == 0 && len(c.held)+c.unread() > 0 })
			return ok
		})
	case "nobufs":
		if _, err := peer.Write(tail); err != nil {
			t.Fatal(err)
		}
		want = append(want, tail...)
		waitFor(t, "the receive to find the ring empty (ENOBUFS)", func() bool {
			var ok bool
			onLoop(func() { ok = c.k.recv == 0 && len(got)+c.unread() == len(want) })
			return ok
		})
	}

	if path == "highwater" {
		// Written whole into the socket, the queue at the mark pauses
		// c; its SEND's completion lifts the pause (the user's undone
		// first), delivers "second", arms the receive and calls
		// OnWritable, which holds the loop before it submits that.
		reply := bytes.Repeat([]byte("r"), bufSize)
		c.Loop().Post(func() {
			c.Write(reply)
			c.ResumeRead()
		})
		select {
		case <-blocked:
		case <-time.After(10 * time.Second):
			t.Fatal("no OnWritable")
		}
		peer.SetReadDeadline(time.Now().Add(10 * time.Second))
		if _, err := io.ReadFull(peer, make([]byte, len(reply))); err != nil {
			t.Fatalf("reading the reply: %v", err)
		}
	}
	if path == "limit" {
		select {
		case r := <-blocked:
			if r != 0 {
				t.Fatalf("setup: the receive had not ended at its limit when OnData had %d bytes", len(head))
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("setup: OnData never had %d bytes", len(head))
		}
	}
	if path != "nobufs" {
		if _, err := peer.Write(tail); err != nil {
			t.Fatal(err)
		}
		want = append(want, tail...)
	}
	peer.(*net.TCPConn).SetLinger(0)
	peer.Close()
	waitFor(t, "the reset to reach the loop's socket", func() bool { return tcpClosed(fd) })
	if n, _ := unix.IoctlGetInt(fd, unix.SIOCINQ); n <= 33*bufSize {
		t.Fatalf("setup: %d bytes unread at the reset, want more than 33 buffers (%d)", n, 33*bufSize)
	}
	switch path {
	case "resume":
		c.Loop().Post(c.ResumeRead)
	case "highwater", "limit":
		close(release)
		released = true
	case "nobufs":
		c.Loop().Post(func() {
			giveBack = true
			for _, k := range kept {
				k.Release()
			}
			kept = nil
		})
	}
	var e end
	select {
	case e = <-ended:
	case <-time.After(5 * time.Second):
		var recv uint8
		var n, unread int
		onLoop(func() { n, recv, unread = len(got), c.k.recv, c.unread() })
		t.Fatalf("no OnClose 5 s after the receive was armed again on the reset socket (%d of %d bytes delivered, receive state %d, %d unread)",
			n, len(want), recv, unread)
	}
	if !bytes.Equal(e.got, want) || !isWriteReset(e.err) {
		t.Errorf("ended (%v) with %d bytes delivered (equal %v), want the %d sent and the reset's error", e.err, len(e.got), bytes.Equal(e.got, want), len(want))
	}
}
