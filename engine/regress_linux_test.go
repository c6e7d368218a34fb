// Regression tests for lifecycle and ownership bugs found by reviewing the
// engine (2026-11-30): each failed before its fix.

package engine

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/spindlenet/spindle/internal/testnet"
)

// TestResumeInsideHeldDelivery pauses a connection in its first OnData, so
// that what its multishot receive had already taken is held, then resumes
// it; an OnData of the held data pauses and resumes again, which delivers
// the rest from inside that OnData (ResumeRead allows it). Every byte must
// arrive once and in order: the nested delivery used to deliver entries
// twice, release their buffers twice and then panic on its slice bounds.
// Only multishot receives hold data: the uring backends, but uring-sqpoll
// only with the receive limit (single-shot without), and not epoll, which
// stops reading at once.
func TestResumeInsideHeldDelivery(t *testing.T) {
	for _, b := range testBackends {
		if !strings.HasPrefix(string(b), "uring") || b == BackendURingSQPoll && !recvLimitUsable() {
			continue
		}
		t.Run(string(b), func(t *testing.T) {
			var (
				mu    sync.Mutex
				got   []byte
				conn  atomic.Pointer[Conn]
				phase int // on the connection's loop: 0 first OnData, 1 paused, 2 resumed, 3 nested done
			)
			h := &BaseHandlerFunc{data: func(c *Conn, buf Buffer) bool {
				mu.Lock()
				got = append(got, buf.Bytes()...)
				mu.Unlock()
				switch phase {
				case 0:
					phase = 1
					c.PauseRead()
					conn.Store(c)
				case 2:
					phase = 3
					c.PauseRead()
					c.ResumeRead()
				}
				return false
			}}
			cfg := testConfig(b)
			cfg.ReadBufferSize = 512
			_, addr := startEngine(t, cfg, h)
			c := mustDial(t, "tcp", addr)
			want := pattern(7, 8<<10)
			if _, err := c.Write(want); err != nil {
				t.Fatal(err)
			}
			// Wait, on the connection's loop, until data is held.
			var l *Loop
			waitFor(t, "received data to be held", func() bool {
				c := conn.Load()
				if c == nil {
					return false
				}
				l = c.Loop()
				res := make(chan int)
				l.Post(func() { res <- len(c.held) })
				return <-res >= 2
			})
			done := make(chan struct{})
			l.Post(func() {
				phase = 2
				conn.Load().ResumeRead()
				close(done)
			})
			<-done
			waitFor(t, "every byte", func() bool {
				mu.Lock()
				defer mu.Unlock()
				return len(got) >= len(want)
			})
			time.Sleep(20 * time.Millisecond) // anything delivered twice
			mu.Lock()
			defer mu.Unlock()
			if !bytes.Equal(got, want) {
				t.Fatalf("received %d bytes, want the %d sent, in order", len(got), len(want))
			}
		})
	}
}

// TestWriteBufferOtherLoop hands WriteBuffer on loop 1 a buffer kept on
// loop 0: it must fail and give the buffer back on loop 0's goroutine (the
// race detector watches loop 0's receive ring), and loop 0 must go on
// receiving.
func TestWriteBufferOtherLoop(t *testing.T) {
	if runtime.NumCPU() < 2 {
		t.Skip("needs 2 CPUs for two loops")
	}
	peer := goEchoServer(t)
	for _, b := range testBackends {
		t.Run(string(b), func(t *testing.T) {
			opened := make(chan *Conn, 2)
			kept := make(chan Buffer, 1)
			var reads atomic.Int64
			h := &BaseHandlerFunc{
				open: func(c *Conn) { opened <- c },
				data: func(c *Conn, buf Buffer) bool {
					if reads.Add(1) == 1 {
						kept <- buf
						return true
					}
					return false
				},
			}
			cfg := testConfig(b)
			cfg.CPUs = []int{0, 1}
			e, _ := startEngine(t, cfg, h)
			l0, l1 := e.Loops()[0], e.Loops()[1]
			l0.Post(func() { l0.Dial("tcp", peer, time.Second) })
			a := <-opened
			l1.Post(func() { l1.Dial("tcp", peer, time.Second) })
			other := <-opened
			l0.Post(func() { a.Write([]byte("kept")) })
			buf := <-kept
			errc := make(chan error)
			l1.Post(func() { errc <- other.WriteBuffer(buf) })
			if err := <-errc; err == nil {
				t.Fatal("WriteBuffer of another loop's buffer succeeded")
			}
			for range 20 {
				l0.Post(func() { a.Write([]byte("again")) })
			}
			waitFor(t, "loop 0 to receive again", func() bool { return reads.Load() >= 2 })
			l0.Post(func() { a.Close() })
			l1.Post(func() { other.Close() })
		})
	}
}

// TestListenWhileStopping listens and closes listeners while the engine
// stops under them (its context cancelled): whether or not a loop took a
// listener's socket before it exited, no socket may stay open.
func TestListenWhileStopping(t *testing.T) {
	before := openFdCount(t)
	for i := range 30 {
		e := newEngine(t, testConfig(BackendURing), &echoHandler{})
		ctx, cancel := context.WithCancel(context.Background())
		ran := make(chan error, 1)
		go func() { ran <- e.Run(ctx) }()
		go func() {
			time.Sleep(time.Duration(i%5) * 100 * time.Microsecond)
			cancel()
		}()
		for {
			ln, err := e.Listen("tcp", "127.0.0.1:0", nil)
			if err != nil {
				break // the engine is done
			}
			ln.Close()
			if _, err := e.Listen("tcp", "127.0.0.1:0", nil); err != nil {
				break
			}
		}
		if err := <-ran; err != nil {
			t.Fatal(err)
		}
	}
	if after := openFdCount(t); after != before {
		t.Errorf("%d fds open before, %d after", before, after)
	}
}

func openFdCount(t *testing.T) int {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(ents)
}

// TestPostToFailedMsgRing makes a loop-to-loop MSG_RING fail (the target's
// ring fd swapped for an eventfd's, as when the number is reused after the
// ring closed): the posted function must still run, the target woken
// through its eventfd, and the failure counted.
func TestPostToFailedMsgRing(t *testing.T) {
	if runtime.NumCPU() < 2 {
		t.Skip("needs 2 CPUs for two loops")
	}
	efd := notARing(t)
	for _, b := range testBackends {
		if !b.isURing() {
			continue // no MSG_RING
		}
		t.Run(string(b), func(t *testing.T) {
			cfg := testConfig(b)
			cfg.CPUs = []int{0, 1}
			e, _ := startEngine(t, cfg, &echoHandler{})
			src, dst := e.Loops()[0], e.Loops()[1]
			ringFd := dst.ringFd.Load()
			defer dst.ringFd.Store(ringFd)
			// dst asleep, its eventfd drained: only the fallback can wake
			// it.
			waitFor(t, "dst to sleep", func() bool {
				before := dst.Stats().Waits
				syncLoop(dst)
				time.Sleep(20 * time.Millisecond)
				return dst.Stats().Waits-before == 1
			})
			dst.ringFd.Store(int32(efd))
			ran := make(chan struct{})
			src.Post(func() { src.PostTo(dst, func() { close(ran) }) })
			select {
			case <-ran:
			case <-time.After(5 * time.Second):
				t.Fatal("the function posted with a failing MSG_RING did not run")
			}
			if n := src.Stats().MsgRingErrs; n != 1 {
				t.Errorf("%d MSG_RING failures counted, want 1", n)
			}
		})
	}
}

// TestSlotGenerationWraps serves a connection whose slot has been reused
// about 2^32 times (set up directly): the epoll backend put the whole
// generation in its event data, where 0xfffffffe and 0xffffffff read as
// the wake-up and listener markers, so the connection was never served and
// the loop spun.
func TestSlotGenerationWraps(t *testing.T) {
	for _, b := range testBackends {
		for _, gen := range []uint32{0xfffffffe, 0xffffffff, 0} {
			t.Run(fmt.Sprintf("%s/gen=%#x", b, gen), func(t *testing.T) {
				cfg := testConfig(b)
				cfg.CPUs = []int{0}
				e, addr := startEngine(t, cfg, &echoHandler{})
				l := e.Loops()[0]
				ready := make(chan struct{})
				l.Post(func() {
					// A free slot 0 whose next connection gets gen.
					if len(l.conns) == 0 {
						l.conns = append(l.conns, nil)
						l.slotGen = append(l.slotGen, gen-1)
						l.queuePos = append(l.queuePos, 0)
						l.free = append(l.free, 0)
					}
					close(ready)
				})
				<-ready
				c := mustDial(t, "tcp", addr)
				c.SetDeadline(time.Now().Add(2 * time.Second))
				if err := roundTrip(c, []byte("ping")); err != nil {
					t.Errorf("echo on a connection of generation %#x: %v", gen, err)
				}
			})
		}
	}
}

// TestDialUnixBacklogFull dials a Unix socket whose listener never accepts
// and whose backlog is full: connect says EAGAIN and gives up, and Dial
// must fail, not report the connection open (OnOpen) and then fail its
// first read.
func TestDialUnixBacklogFull(t *testing.T) {
	path := filepath.Join(t.TempDir(), "full.sock")
	lfd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(lfd)
	if err := unix.Bind(lfd, &unix.SockaddrUnix{Name: path}); err != nil {
		t.Fatal(err)
	}
	if err := unix.Listen(lfd, 0); err != nil {
		t.Fatal(err)
	}
	for i := 0; ; i++ { // fill the backlog
		fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			t.Fatal(err)
		}
		err = unix.Connect(fd, &unix.SockaddrUnix{Name: path})
		if err == unix.EAGAIN {
			unix.Close(fd)
			break
		}
		defer unix.Close(fd)
		if err != nil || i == 100 {
			t.Fatalf("filling the backlog: connect %d: %v", i, err)
		}
	}
	for _, b := range testBackends {
		t.Run(string(b), func(t *testing.T) {
			opened := make(chan *Conn, 1)
			e, _ := startEngine(t, testConfig(b), &BaseHandlerFunc{open: func(c *Conn) { opened <- c }})
			l := e.Loops()[0]
			dialed := make(chan error, 1)
			l.Post(func() {
				_, err := l.Dial("unix", path, 500*time.Millisecond)
				dialed <- err
			})
			if err := <-dialed; err == nil {
				t.Error("Dial to a Unix listener with a full backlog succeeded")
			}
			select {
			case <-opened:
				t.Error("OnOpen for a connect the kernel gave up")
			case <-time.After(50 * time.Millisecond):
			}
		})
	}
}

// TestAcceptBackoff runs the process out of descriptors while a connection
// waits to be accepted: the loop must back off (Stats.AcceptBackoffs)
// instead of retrying the failing accept in a tight loop (the epoll
// backend's level-triggered listener, and the uring backends' re-armed
// accept, spun), and accept the connection once descriptors are free. The
// listener is added to the loop only once descriptors have run out: an
// io_uring accept takes the descriptor limit in force when it is armed.
func TestAcceptBackoff(t *testing.T) {
	for _, b := range testBackends {
		t.Run(string(b), func(t *testing.T) {
			cfg := testConfig(b)
			cfg.CPUs = []int{0}
			e, _ := startEngine(t, cfg, &echoHandler{})
			l := e.Loops()[0]
			release := make(chan struct{})
			blocked := make(chan struct{})
			l.Post(func() { close(blocked); <-release }) // holds the listener's add back
			<-blocked
			ln, err := e.Listen("tcp", "127.0.0.1:0", nil)
			if err != nil {
				close(release)
				t.Fatal(err)
			}
			defer ln.Close()
			ap := ln.Addr().(*net.TCPAddr).AddrPort()
			cfd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
			if err != nil {
				close(release)
				t.Fatal(err)
			}
			client := os.NewFile(uintptr(cfd), "client")
			defer client.Close()
			w0, w1 := exhaustFds(t, func() {
				close(release)
				if err := unix.Connect(cfd, &unix.SockaddrInet4{Addr: ap.Addr().As4(), Port: int(ap.Port())}); err != nil {
					t.Error(err)
				}
			}, func() uint64 { return l.Stats().Waits })
			s := l.Stats()
			t.Logf("%d waits in 200 ms out of descriptors, %d accept back-offs in all", w1-w0, s.AcceptBackoffs)
			if w1-w0 > 200 || s.AcceptBackoffs == 0 {
				t.Errorf("%d waits and %d back-offs in 200 ms out of descriptors: want a few of each", w1-w0, s.AcceptBackoffs)
			}
			c, err := net.FileConn(client)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			c.SetDeadline(time.Now().Add(3 * time.Second))
			if err := roundTrip(c, []byte("after")); err != nil {
				t.Errorf("echo once descriptors were free again: %v", err)
			}
		})
	}
}

// exhaustFds lowers RLIMIT_NOFILE to the descriptors open and fills the
// gaps below it, runs then, waits 200 ms and puts everything back. It
// returns count() before and after the 200 ms.
func exhaustFds(t *testing.T, then func(), count func() uint64) (before, after uint64) {
	err := withFreeFds(0, func() error {
		then()
		time.Sleep(20 * time.Millisecond)
		before = count()
		time.Sleep(200 * time.Millisecond)
		after = count()
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return before, after
}

// TestRelistenSteering closes a listener and listens again on its address
// while both loops are busy, so that neither has closed its old socket yet
// (as on any reload from a loop goroutine, where Close does not wait for
// the loops): the new sockets must form a reuseport group of their own,
// in which steering holds. Before, they joined the old group after the
// old sockets, the steering program indexed the wrong ones, and every
// connection went to the other CPU's loop.
func TestRelistenSteering(t *testing.T) {
	if runtime.NumCPU() < 2 {
		t.Skip("steering needs 2 CPUs")
	}
	for _, b := range testBackends {
		t.Run(string(b), func(t *testing.T) {
			served := make(chan int, 16)
			h := &BaseHandlerFunc{data: func(c *Conn, buf Buffer) bool {
				served <- c.Loop().CPU()
				c.Write(buf.Bytes())
				return false
			}}
			cfg := testConfig(b)
			cfg.CPUs = []int{0, 1}
			e, _ := startEngine(t, cfg, h)
			old, err := e.Listen("tcp", "127.0.0.1:0", nil)
			if err != nil {
				t.Fatal(err)
			}
			addr := old.Addr().String()
			var release []chan struct{}
			closed := make(chan struct{})
			for i := range e.Loops() {
				l := e.Loops()[len(e.Loops())-1-i] // loop 0 last: it closes
				syncLoop(l)                        // the old listener is added
				hold := make(chan struct{})
				release = append(release, hold)
				l.Post(func() {
					if l.ID() == 0 {
						old.Close() // the removals wait behind the holds
						close(closed)
					}
					<-hold
				})
			}
			slices.Reverse(release)
			<-closed
			ln, err := e.Listen("tcp", addr, nil)
			// Loop 0 first: had the new sockets joined the old group,
			// closing its old socket would move loop 1's new one into its
			// place.
			for i, hold := range release {
				close(hold)
				for range 2 { // the removal, then the close after the cancel
					syncLoop(e.Loops()[i])
				}
			}
			if err != nil {
				t.Fatal(err)
			}
			defer ln.Close()
			for _, cpu := range []int{0, 1, 1, 0} {
				if err := dialFromCPU(cpu, addr); err != nil {
					t.Fatal(err)
				}
				if got := <-served; got != cpu {
					t.Errorf("a connection from CPU %d was served by the loop on CPU %d", cpu, got)
				}
			}
		})
	}
}

// dialFromCPU connects to addr from a thread pinned to cpu (so that the
// SYN is processed there, on loopback) and echoes one byte.
func dialFromCPU(cpu int, addr string) error {
	return fromCPU(cpu, func() error {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			return err
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(3 * time.Second))
		return roundTrip(c, []byte("x"))
	})
}

// fromCPU runs f on a goroutine whose thread is pinned to cpu, and returns
// its error.
func fromCPU(cpu int, f func() error) error {
	res := make(chan error, 1)
	go func() {
		// The thread exits with the goroutine (no Unlock), taking its
		// changed affinity with it.
		runtime.LockOSThread()
		var set unix.CPUSet
		set.Set(cpu)
		if err := unix.SchedSetaffinity(0, &set); err != nil {
			res <- err
			return
		}
		res <- f()
	}()
	return <-res
}

// TestAfterFuncFarOff schedules timers too far off to add to the clock
// (math.MaxInt64, a common "never") and beyond epoll_wait's int
// milliseconds (30 days): neither may run now (the first overflowed to the
// past and ran at once), and a near timer after them still runs on time.
func TestAfterFuncFarOff(t *testing.T) {
	for _, b := range testBackends {
		t.Run(string(b), func(t *testing.T) {
			e, _ := startEngine(t, testConfig(b), &echoHandler{})
			l := e.Loops()[0]
			var ran atomic.Int32
			near := make(chan struct{})
			timers := make(chan [2]Timer, 1)
			l.Post(func() {
				timers <- [2]Timer{
					l.AfterFunc(math.MaxInt64, func() { ran.Add(1) }),
					l.AfterFunc(30*24*time.Hour, func() { ran.Add(1) }),
				}
				l.AfterFunc(20*time.Millisecond, func() { close(near) })
			})
			far := <-timers
			select {
			case <-near:
			case <-time.After(5 * time.Second):
				t.Fatal("a 20 ms timer set after far-off ones did not run")
			}
			if n := ran.Load(); n != 0 {
				t.Errorf("%d far-off timers ran", n)
			}
			stopped := make(chan bool, 2)
			l.Post(func() { stopped <- far[0].Stop(); stopped <- far[1].Stop() })
			//lint:ignore SA4000 two receives, one per timer
			if !<-stopped || !<-stopped {
				t.Error("far-off timers were no longer pending")
			}
		})
	}
}

// TestPostToOtherEngine posts from a loop of one engine to a loop of
// another, whose ring fd is swapped for an eventfd's so that a MSG_RING
// would fail: the function must run. A failed MSG_RING's completion names
// its target by index in the sender's engine, which here would have woken
// the sender's own loop 0 instead; across engines PostTo wakes through the
// target's eventfd.
func TestPostToOtherEngine(t *testing.T) {
	if runtime.NumCPU() < 2 {
		t.Skip("needs 2 CPUs for two loops")
	}
	efd := notARing(t)
	for _, b := range testBackends {
		t.Run(string(b), func(t *testing.T) {
			ca, cb := testConfig(b), testConfig(b)
			ca.CPUs, cb.CPUs = []int{0}, []int{1}
			ea, _ := startEngine(t, ca, &echoHandler{})
			eb, _ := startEngine(t, cb, &echoHandler{})
			src, dst := ea.Loops()[0], eb.Loops()[0]
			syncLoop(dst)
			ringFd := dst.ringFd.Load()
			defer dst.ringFd.Store(ringFd)
			if ringFd >= 0 {
				dst.ringFd.Store(int32(efd))
			}
			ran := make(chan struct{})
			src.Post(func() { src.PostTo(dst, func() { close(ran) }) })
			select {
			case <-ran:
			case <-time.After(5 * time.Second):
				t.Fatal("a function posted to another engine's loop did not run")
			}
		})
	}
}

// notARing returns an open fd that is not an io_uring (an eventfd), for a
// loop's ring fd to be swapped with so that a MSG_RING to it fails; it is
// closed when t ends.
func notARing(t *testing.T) int {
	efd, err := unix.Eventfd(0, unix.EFD_CLOEXEC)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(efd) })
	return efd
}

// syncLoop posts an empty function to l and waits for it to run: what was
// posted to l before has run too.
func syncLoop(l *Loop) {
	synced := make(chan struct{})
	l.Post(func() { close(synced) })
	<-synced
}

// TestTimerRearmedInThePast has a timer function set itself again with a
// negative duration (a deadline already past, as time.Until gives) until a
// posted function tells it to stop. The loop must get to that function: a
// timer set from a timer function runs at the earliest in the next
// iteration. Before, the loop ran such timers in the same pass for as long
// as their time lay in the past (an hour for -time.Hour), serving no posted
// function, timer or connection meanwhile; here the timer gives up (see
// pastTimerRuns) so that the test fails instead of hanging.
func TestTimerRearmedInThePast(t *testing.T) {
	for _, b := range testBackends {
		t.Run(string(b), func(t *testing.T) {
			e, _ := startEngine(t, testConfig(b), &echoHandler{})
			l := e.Loops()[0]
			if runs := pastTimerRuns(l, func(stop func()) { l.Post(stop) }); runs > 3 {
				t.Errorf("the timer ran %d times before a function posted with it", runs)
			}
		})
	}
}

// pastTimerRuns sets, on l, a timer function that sets itself again an
// hour in the past (a deadline already past, as time.Until gives) until
// stop has run, which it hands to schedule, and returns how many times the
// timer function ran. It gives up after 2 s or 10,000 runs, so that a loop
// that never gets to stop fails the test instead of hanging.
func pastTimerRuns(l *Loop, schedule func(stop func())) int {
	res := make(chan int, 1)
	l.Post(func() {
		stop, runs := false, 0
		giveUp := time.Now().Add(2 * time.Second)
		var f func()
		f = func() {
			runs++
			if stop || runs == 10000 || time.Now().After(giveUp) {
				res <- runs
				return
			}
			l.AfterFunc(-time.Hour, f)
		}
		l.AfterFunc(-time.Hour, f)
		schedule(func() { stop = true })
	})
	return <-res
}

// TestListenTCP6OnlyIPv6 listens on the "tcp6" wildcard: as in package net,
// and as Listen's doc says (dual-stack for "tcp"), it serves IPv6 alone, so
// an IPv4 connection is refused. Listen made every IPv6 socket dual-stack
// (IPV6_V6ONLY 0), so this one accepted IPv4 connections too.
//
// The IPv4 port of the listener's number is held by the test, bound and
// not listening: an IPv6-only socket leaves that port to IPv4 sockets, and
// another program's listener that took it (CI runs other packages' tests
// beside this one) made the IPv4 dial connect. Held, it refuses; and a
// dual-stack listener could not bind beside it (EADDRINUSE), every try.
func TestListenTCP6OnlyIPv6(t *testing.T) {
	for _, b := range testBackends {
		t.Run(string(b), func(t *testing.T) {
			e := newEngine(t, testConfig(b), &echoHandler{})
			var ln *Listener
			for try := 1; ln == nil; try++ {
				port := holdIPv4Port(t)
				l, err := e.Listen("tcp6", net.JoinHostPort("::", strconv.Itoa(port)), nil)
				switch {
				case errors.Is(err, unix.EAFNOSUPPORT):
					t.Skip("no IPv6 here")
				case errors.Is(err, unix.EADDRINUSE) && try < 5:
					continue // taken on IPv6 by another program
				case errors.Is(err, unix.EADDRINUSE):
					t.Fatalf("a tcp6 listener could not bind beside an IPv4 socket on its port, 5 ports tried (dual-stack?): %v", err)
				case err != nil:
					t.Fatal(err)
				}
				ln = l
			}
			runEngine(t, e)
			port := strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
			if c, err := net.Dial("tcp4", net.JoinHostPort("127.0.0.1", port)); err == nil {
				c.Close()
				t.Error("a tcp6 listener accepted an IPv4 connection")
			} else if !errors.Is(err, unix.ECONNREFUSED) {
				t.Errorf("IPv4 dial to a tcp6 listener: %v, want ECONNREFUSED", err)
			}
			c := mustDial(t, "tcp6", net.JoinHostPort("::1", port))
			if err := roundTrip(c, []byte("x")); err != nil {
				t.Error(err)
			}
		})
	}
}

// holdIPv4Port binds an IPv4 TCP socket to 127.0.0.1 on a port the kernel
// picks, without listening, for the test's life, and returns the port: a
// connection to it is refused, whatever else runs on the host.
func holdIPv4Port(t *testing.T) int {
	t.Helper()
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	if err := unix.Bind(fd, &unix.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatal(err)
	}
	sa, err := unix.Getsockname(fd)
	if err != nil {
		t.Fatal(err)
	}
	return sa.(*unix.SockaddrInet4).Port
}

// linkLocal returns an IPv6 link-local address of this host with its zone,
// or skips the test.
func linkLocal(t *testing.T) netip.Addr {
	t.Helper()
	ifs, err := net.Interfaces()
	if err != nil {
		t.Fatal(err)
	}
	for _, ifi := range ifs {
		if ifi.Flags&net.FlagUp == 0 {
			continue
		}
		addrs, _ := ifi.Addrs()
		for _, a := range addrs {
			if n, ok := a.(*net.IPNet); ok {
				if ip, ok := netip.AddrFromSlice(n.IP); ok && ip.Is6() && ip.IsLinkLocalUnicast() {
					return ip.WithZone(ifi.Name)
				}
			}
		}
	}
	t.Skip("no interface with an IPv6 link-local address")
	return netip.Addr{}
}

// TestLinkLocalZone listens on and dials an IPv6 link-local address with
// its zone ("[fe80::1%eth0]:port"), which the kernel takes only with the
// interface's index as the socket address's scope id: both dropped the
// zone and failed with EINVAL. Addresses the engine reports keep the zone,
// so that the listener's can be dialed. Where no interface has a
// link-local address only the resolution is checked.
//
// The engines list the host's interfaces once each (their zone caches),
// however many connections they make: every link-local connection listed
// them two or three times on its loop thread (its two addresses, its dial).
func TestLinkLocalZone(t *testing.T) {
	// The zone by name and by number, on the loopback interface every
	// network namespace has; an unknown one is an error.
	lo, err := net.InterfaceByName("lo")
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range []string{"[fe80::1%lo]:80", "[fe80::1%" + strconv.Itoa(lo.Index) + "]:80"} {
		sa, _, err := sockaddr(&zoneCache{}, "tcp6", a)
		if err != nil {
			t.Fatalf("%s: %v", a, err)
		}
		if id := sa.(*unix.SockaddrInet6).ZoneId; id != uint32(lo.Index) {
			t.Errorf("%s: scope id %d, want lo's index %d", a, id, lo.Index)
		}
	}
	if _, _, err := sockaddr(&zoneCache{}, "tcp6", "[fe80::1%no-such-if0]:80"); err == nil {
		t.Error("an unknown zone was taken")
	}
	ll := linkLocal(t)
	dumps := countInterfaceDumps(t)
	for _, b := range testBackends {
		t.Run(string(b), func(t *testing.T) {
			dumps.Store(0)
			_, ln := startListening(t, testConfig(b), &echoHandler{}, "tcp6", netip.AddrPortFrom(ll, 0).String())
			addr := ln.Addr().(*net.TCPAddr).AddrPort().String()
			if want := netip.AddrPortFrom(ll, uint16(ln.Addr().(*net.TCPAddr).Port)).String(); addr != want {
				t.Errorf("listener address %s, want %s", addr, want)
			}
			res := make(chan error, 1)
			h := &BaseHandlerFunc{
				open: func(c *Conn) { c.Write([]byte("hi")) },
				data: func(c *Conn, buf Buffer) bool {
					if string(buf.Bytes()) != "hi" {
						res <- fmt.Errorf("echo %q", buf.Bytes())
					} else {
						res <- nil
					}
					c.Close()
					return false
				},
				closed: func(c *Conn, err error) {
					if err != nil {
						res <- err
					}
				},
			}
			d := newEngine(t, testConfig(b), h)
			runEngine(t, d)
			l := d.Loops()[0]
			const conns = 4
			for range conns {
				l.Post(func() {
					if _, err := l.Dial("tcp6", addr, 5*time.Second); err != nil {
						res <- err
					}
				})
				if err := <-res; err != nil {
					t.Fatalf("dial %s: %v", addr, err)
				}
			}
			// One for each engine: the listener's address, then the
			// dials and both ends' addresses from the caches.
			if n := dumps.Load(); n != 2 {
				t.Errorf("%d link-local connections listed the interfaces %d times, want 2 (once per engine)", conns, n)
			}
		})
	}
}

// countInterfaceDumps counts the zone caches' interface dumps until the
// test ends, with dumps trusted for as long as it runs.
func countInterfaceDumps(t *testing.T) *atomic.Int64 {
	var n atomic.Int64
	old, oldAge := interfaces, zoneCacheAge
	interfaces = func() ([]net.Interface, error) {
		n.Add(1)
		return old()
	}
	zoneCacheAge = math.MaxInt64
	t.Cleanup(func() { interfaces, zoneCacheAge = old, oldAge })
	return &n
}

// TestAbstractUnixListenerClose listens on an abstract Unix socket
// ("@name", no file) with a file of that name in the working directory:
// Listener.Close must leave the file alone, as package net does. It
// removed it, taking the address for a path.
func TestAbstractUnixListenerClose(t *testing.T) {
	t.Chdir(t.TempDir())
	name := fmt.Sprintf("@spindle-test-%d", os.Getpid())
	if err := os.WriteFile(name, []byte("keep"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, b := range testBackends {
		t.Run(string(b), func(t *testing.T) {
			_, ln := startListening(t, testConfig(b), &echoHandler{}, "unix", name)
			c, err := net.Dial("unix", name)
			if err != nil {
				t.Fatal(err)
			}
			err = roundTrip(c, []byte("abstract"))
			c.Close()
			if err != nil {
				t.Fatal(err)
			}
			if err := ln.Close(); err != nil {
				t.Fatal(err)
			}
			if _, err := os.Stat(name); err != nil {
				t.Fatalf("Listener.Close of abstract socket %s removed the file of that name: %v", name, err)
			}
		})
	}
}

// TestWriteBeforeOpen writes to and half-closes a dialed connection right
// after Dial, before OnOpen: as for any Conn that is not closed, Write and
// CloseWrite queue, and the queue goes out once connected; past the
// high-water mark reading starts paused, and resumes as the queue drains.
// Both returned net.ErrClosed, though the connection was not closed.
func TestWriteBeforeOpen(t *testing.T) {
	peer := goEchoServer(t)
	for _, b := range testBackends {
		t.Run(string(b), func(t *testing.T) {
			var mu sync.Mutex
			var got []byte
			eof := make(chan struct{})
			h := &BaseHandlerFunc{data: func(c *Conn, buf Buffer) bool {
				mu.Lock()
				got = append(got, buf.Bytes()...)
				mu.Unlock()
				return false
			}}
			eh := &eofHandler{BaseHandlerFunc: h, eof: eof}
			cfg := testConfig(b)
			cfg.WriteHighWater = 64 << 10
			e, _ := startEngine(t, cfg, eh)
			l := e.Loops()[0]
			big := pattern(3, 256<<10)
			want := "queued before open" + string(big)
			errc := make(chan error, 1)
			l.Post(func() {
				c, err := l.Dial("tcp", peer, 5*time.Second)
				if err == nil {
					_, err = c.Writev([][]byte{[]byte("queued "), []byte("before open"), big})
				}
				if err == nil {
					err = c.CloseWrite()
				}
				errc <- err
			})
			if err := <-errc; err != nil {
				t.Fatalf("writing before OnOpen: %v", err)
			}
			select {
			case <-eof:
			case <-time.After(10 * time.Second):
				t.Fatal("no EOF from the echo peer")
			}
			mu.Lock()
			defer mu.Unlock()
			if string(got) != want {
				t.Errorf("echo of %d bytes differs from the %d written", len(got), len(want))
			}
		})
	}
}

// eofHandler closes on EOF and says so on eof.
type eofHandler struct {
	*BaseHandlerFunc
	eof chan struct{}
}

func (h *eofHandler) OnEOF(c *Conn) {
	close(h.eof)
	c.Close()
}

// TestShutdownWithZCSendsUnread stops an engine past its Shutdown deadline
// while its connections have SEND_ZC data their peers do not read. A
// SEND_ZC's notification comes only once the kernel frees the data, which
// here waits on the peer (on loopback it sits in the peer's receive
// queue; elsewhere in the closed socket's send queue until acknowledged),
// so a loop that waits for every notification before it exits hung Run
// for as long as the peers lived. The loop exits without them: the kernel
// holds the pages it sends from (the registered buffer) until then. The
// epoll backends, without SEND_ZC, run it as the plain case.
func TestShutdownWithZCSendsUnread(t *testing.T) {
	for _, b := range testBackends {
		t.Run(string(b), func(t *testing.T) {
			cfg := testConfig(b)
			var zc zcLog
			cfg.SendZCThreshold, cfg.Logf = 512, zc.logf
			cfg.ReadBufferSize = 64 << 10
			cfg.WriteHighWater = 64 << 20 // reading stays armed
			h := &BaseHandlerFunc{open: func(c *Conn) {
				buf := make([]byte, 64<<10)
				for i := 0; i < 128; i++ {
					c.Write(buf)
				}
			}}
			e, addr, done := listenAndRun(t, cfg, h)
			for i := 0; i < 5; i++ {
				c, err := net.Dial("tcp", addr)
				if err != nil {
					t.Fatal(err)
				}
				defer c.Close() // after Run returned: the peers never read the rest
				c.SetReadDeadline(time.Now().Add(10 * time.Second))
				if _, err := io.ReadFull(c, make([]byte, 256<<10)); err != nil {
					t.Fatal(err)
				}
			}
			if b.isURing() && e.Stats().ZCSends == 0 {
				zc.skipShortOfLockedMemory(t)
				t.Fatal("no SEND_ZC sent")
			}
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
			defer cancel()
			shut := make(chan error, 1)
			go func() { shut <- e.Shutdown(ctx) }()
			select {
			case err := <-done:
				if err != nil {
					t.Error(err)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("Run did not return after Shutdown while peers held SEND_ZC data")
			}
			if err := <-shut; !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("Shutdown: %v, want the deadline", err)
			}
		})
	}
}

// TestPostAfterStop posts to the loops of a stopped engine, as a producer
// goroutine that outlives it would: the functions can never run and must
// not pile up in the loop's queue (they did, without bound, with all they
// referenced).
func TestPostAfterStop(t *testing.T) {
	for _, b := range testBackends {
		t.Run(string(b), func(t *testing.T) {
			e := newEngine(t, testConfig(b), &echoHandler{})
			stop := runUntilStopped(t, e)
			l := e.Loops()[0]
			syncLoop(l)
			if err := stop(); err != nil {
				t.Fatal(err)
			}
			for i := 0; i < 1000; i++ {
				big := make([]byte, 1<<10)
				l.Post(func() { _ = big })
			}
			l.mu.Lock()
			n := len(l.posted)
			l.mu.Unlock()
			if n != 0 {
				t.Errorf("%d functions queued on a loop that has exited", n)
			}
		})
	}
}

// TestFdAfterClose reads Conn.Fd in OnClose, where the socket is already
// closed and its number free for the next file the process opens (here a
// socket OnClose opens itself): Fd must not name that file. It returned
// the old number, so a getsockopt there (TCP_INFO at close, say) read
// another socket.
func TestFdAfterClose(t *testing.T) {
	for _, b := range testBackends {
		t.Run(string(b), func(t *testing.T) {
			res := make(chan string, 1)
			h := &BaseHandlerFunc{closed: func(c *Conn, err error) {
				s, serr := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
				if serr == nil {
					defer unix.Close(s)
				}
				if fd := c.Fd(); fd >= 0 {
					msg := fmt.Sprintf("Fd() = %d in OnClose", fd)
					if fd == s {
						msg += ", the socket OnClose just opened"
					}
					res <- msg
					return
				}
				res <- ""
			}}
			_, addr := startEngine(t, testConfig(b), h)
			c, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			c.Close()
			if msg := <-res; msg != "" {
				t.Error(msg)
			}
		})
	}
}

// TestDialTCP6MappedIPv4 dials "tcp6" to an IPv4-mapped address
// ([::ffff:127.0.0.1]), which is IPv4: as in package net, and as for a
// plain IPv4 address, "tcp6" refuses it. Dial connected over IPv4 (to an
// IPv4-only listener here).
func TestDialTCP6MappedIPv4(t *testing.T) {
	gl, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer gl.Close()
	port := gl.Addr().(*net.TCPAddr).Port
	for _, b := range testBackends {
		t.Run(string(b), func(t *testing.T) {
			res := make(chan error, 1)
			h := &BaseHandlerFunc{
				open: func(c *Conn) { res <- nil; c.Close() },
				closed: func(c *Conn, err error) {
					if err != nil {
						res <- err
					}
				},
			}
			e, _ := startEngine(t, testConfig(b), h)
			l := e.Loops()[0]
			l.Post(func() {
				if _, err := l.Dial("tcp6", net.JoinHostPort("::ffff:127.0.0.1", strconv.Itoa(port)), time.Second); err != nil {
					res <- err
				}
			})
			if err := <-res; err == nil {
				t.Error(`Dial("tcp6") of an IPv4-mapped address connected over IPv4`)
			} else if !strings.Contains(err.Error(), "IPv4 address for tcp6") {
				t.Errorf("Dial: %v, want the IPv4 address refused", err)
			}
		})
	}
}

// TestTimersSetInThePastRunInOrder sets timers from a timer function with
// past deadlines (negative durations, ten timers each), which wait for the
// next iteration (52d615f): they run in the order of their deadlines, and
// those with equal deadlines in the order set. That iteration ran them in
// no particular order: it took them all for due just after the pass.
func TestTimersSetInThePastRunInOrder(t *testing.T) {
	for _, b := range testBackends {
		t.Run(string(b), func(t *testing.T) {
			e, _ := startEngine(t, testConfig(b), &echoHandler{})
			l := e.Loops()[0]
			const n = 100
			d := func(i int) time.Duration { return -time.Duration(i%10+1) * time.Hour }
			res := make(chan []int, 1)
			l.Post(func() {
				var order []int
				l.AfterFunc(0, func() {
					for i := range n {
						l.AfterFunc(d(i), func() {
							if order = append(order, i); len(order) == n {
								res <- order
							}
						})
					}
				})
			})
			order := <-res
			want := make([]int, n)
			for i := range want {
				want[i] = i
			}
			// Earliest deadline (most negative d) first; a stable sort
			// keeps the order set among equal ones.
			sort.SliceStable(want, func(a, b int) bool { return d(want[a]) < d(want[b]) })
			if fmt.Sprint(order) != fmt.Sprint(want) {
				t.Errorf("timers ran in order %v, want %v", order, want)
			}
		})
	}
}

// TestUnixListenAutobind listens on "unix" with an empty address, which
// the kernel binds to a free abstract name: Listener.Addr reports that
// name (as it reports the port chosen for port 0), and it can be dialed.
// It reported the empty address asked for.
func TestUnixListenAutobind(t *testing.T) {
	for _, b := range testBackends {
		t.Run(string(b), func(t *testing.T) {
			_, ln := startListening(t, testConfig(b), &echoHandler{}, "unix", "")
			name := ln.Addr().String()
			if !strings.HasPrefix(name, "@") || len(name) < 2 {
				t.Fatalf("Listener.Addr %q, want the abstract name the kernel chose", name)
			}
			c := mustDial(t, "unix", name)
			if err := roundTrip(c, []byte("autobind")); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestUnixListenFailureRemovesFile makes a "unix" Listen fail after it has
// bound its path: with one descriptor left, the socket takes it and its
// duplicate for the second loop fails (EMFILE). The failed Listen must
// remove the socket file it created, or every later Listen on the path
// fails with EADDRINUSE; it left it.
func TestUnixListenFailureRemovesFile(t *testing.T) {
	if runtime.NumCPU() < 2 {
		t.Skip("needs 2 loops, whose second duplicates the listening socket")
	}
	for _, b := range testBackends {
		t.Run(string(b), func(t *testing.T) {
			cfg := testConfig(b)
			cfg.CPUs = []int{0, 1}
			e := newEngine(t, cfg, &echoHandler{})
			defer e.Shutdown(context.Background())
			path := filepath.Join(t.TempDir(), "s")
			if err := withOneFd(func() error { _, err := e.Listen("unix", path, nil); return err }); err == nil {
				t.Fatal("Listen succeeded with one descriptor free")
			} else if !errors.Is(err, unix.EMFILE) {
				t.Fatalf("Listen with one descriptor free: %v, want EMFILE", err)
			}
			if _, err := os.Stat(path); err == nil {
				t.Errorf("the failed Listen left %s behind", path)
			}
			ln, err := e.Listen("unix", path, nil)
			if err != nil {
				t.Fatalf("Listen again: %v", err)
			}
			ln.Close()
		})
	}
}

// withOneFd runs f with exactly one descriptor free below RLIMIT_NOFILE,
// then restores the limit.
func withOneFd(f func() error) error { return withFreeFds(1, f) }

// withFreeFds runs f with exactly free descriptors free below
// RLIMIT_NOFILE (the limit lowered, the rest filled), then closes the
// fillers and restores the limit.
func withFreeFds(free int, f func() error) error {
	var old unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &old); err != nil {
		return err
	}
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return err
	}
	top := 0
	for _, ent := range ents {
		if n, err := strconv.Atoi(ent.Name()); err == nil {
			top = max(top, n)
		}
	}
	lim := old
	lim.Cur = uint64(top + 1 + free)
	if err := unix.Setrlimit(unix.RLIMIT_NOFILE, &lim); err != nil {
		return err
	}
	defer unix.Setrlimit(unix.RLIMIT_NOFILE, &old)
	var fill []int
	defer func() {
		for _, fd := range fill {
			unix.Close(fd)
		}
	}()
	for {
		fd, err := unix.Dup(0)
		if err != nil {
			break
		}
		fill = append(fill, fd)
	}
	if len(fill) < free {
		return errors.New("no descriptor to free")
	}
	for _, fd := range fill[len(fill)-free:] {
		unix.Close(fd)
	}
	fill = fill[:len(fill)-free]
	return f()
}

// TestRunContextClosesListeners: an engine stopped through Run's context
// closes its listeners as Shutdown does, so that a Unix listener's socket
// file goes with it. It was left on disk (a later Listen on that path then
// failed with EADDRINUSE), and the listener reported itself open.
func TestRunContextClosesListeners(t *testing.T) {
	for _, b := range testBackends {
		t.Run(string(b), func(t *testing.T) {
			e := newEngine(t, testConfig(b), &echoHandler{})
			path := filepath.Join(t.TempDir(), "s")
			ln, err := e.Listen("unix", path, nil)
			if err != nil {
				e.Shutdown(context.Background())
				t.Fatal(err)
			}
			stop := runUntilStopped(t, e)
			c, err := net.Dial("unix", path)
			if err != nil {
				t.Fatal(err)
			}
			c.Close()
			if err := stop(); err != nil {
				t.Fatal(err)
			}
			if _, err := os.Stat(path); err == nil {
				t.Errorf("Run stopped by its context left %s behind", path)
			}
			if err := ln.Close(); !errors.Is(err, net.ErrClosed) {
				t.Errorf("Close after Run stopped: %v, want net.ErrClosed (closed with the engine)", err)
			}
		})
	}
}

// closeErrHandler is an echoHandler that keeps the errors OnClose gets.
type closeErrHandler struct {
	echoHandler
	mu   sync.Mutex
	errs []error
}

func (h *closeErrHandler) OnClose(c *Conn, err error) {
	h.mu.Lock()
	h.errs = append(h.errs, err)
	h.mu.Unlock()
	h.echoHandler.OnClose(c, err)
}

// TestResetErrorSameOnEveryBackend: a connection reset mid-stream closes
// with a *net.OpError named as package net names it ("read" or "write"),
// with the connection's network and addresses, on every backend. The uring
// backends said "recv" and "send" where epoll said "read" and "write", and
// no backend gave the addresses (Net was "tcp" for Unix connections too).
func TestResetErrorSameOnEveryBackend(t *testing.T) {
	for _, b := range testBackends {
		t.Run(string(b), func(t *testing.T) {
			h := &closeErrHandler{}
			_, addr := startEngine(t, testConfig(b), h)
			c, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			client := c.LocalAddr().String()
			// An echo first: a reset before the engine accepted the
			// connection leaves no address to read (getpeername fails
			// once the socket is reset), which under load happened.
			c.SetDeadline(time.Now().Add(10 * time.Second))
			if _, err := c.Write([]byte{1}); err != nil {
				t.Fatal(err)
			}
			if _, err := io.ReadFull(c, make([]byte, 1)); err != nil {
				t.Fatal(err)
			}
			c.SetDeadline(time.Time{})
			resetMidStream(c)
			waitFor(t, "OnClose for the reset connection", func() bool { return h.closes.Load() == 1 })
			h.mu.Lock()
			got := h.errs[0]
			h.mu.Unlock()
			var oe *net.OpError
			switch {
			case !errors.As(got, &oe):
				t.Fatalf("OnClose got %v (%T), want a *net.OpError", got, got)
			case oe.Op != "read" && oe.Op != "write", oe.Net != "tcp":
				t.Errorf("OnClose got Op %q Net %q (%v), want read or write on tcp", oe.Op, oe.Net, got)
			case oe.Addr == nil || oe.Addr.String() != client:
				t.Errorf("OnClose got Addr %v, want the peer %s", oe.Addr, client)
			case oe.Source == nil || oe.Source.String() != addr:
				t.Errorf("OnClose got Source %v, want %s", oe.Source, addr)
			}
		})
	}
}

// TestTimerInThePastStarvesNoOther sets a timer whose function keeps
// setting itself an hour in the past, and a timer due now: the second must
// run within an iteration or two. runExpired stopped at the first timer its
// own pass set, and the one set in the past, earlier than every other, was
// always first: the other due timers (dial timeouts among them) never ran.
func TestTimerInThePastStarvesNoOther(t *testing.T) {
	for _, b := range testBackends {
		t.Run(string(b), func(t *testing.T) {
			e, _ := startEngine(t, testConfig(b), &echoHandler{})
			l := e.Loops()[0]
			if runs := pastTimerRuns(l, func(stop func()) { l.AfterFunc(0, stop) }); runs > 3 {
				t.Errorf("a timer due now waited for %d runs of one set in the past", runs)
			}
		})
	}
}

// TestDialErrorNamesAddress dials a port nobody listens on: the error,
// from Dial or in OnClose, names the address dialed, as package net's
// ("dial tcp 127.0.0.1:port: connect: connection refused"). It named none:
// the connection's addresses are known only once it is open.
func TestDialErrorNamesAddress(t *testing.T) {
	target := testnet.RefusedAddr(t)
	for _, b := range testBackends {
		t.Run(string(b), func(t *testing.T) {
			h := &closeErrHandler{}
			e, _ := startEngine(t, testConfig(b), h)
			res := make(chan error, 1)
			e.Loops()[0].Post(func() {
				_, err := e.Loops()[0].Dial("tcp", target, 0)
				res <- err // nil: the error comes in OnClose
			})
			got := <-res
			if got == nil {
				waitFor(t, "OnClose for the refused dial", func() bool { return h.closes.Load() == 1 })
				h.mu.Lock()
				got = h.errs[0]
				h.mu.Unlock()
			}
			wantOpErrorAddr(t, "dial to a closed port", got, unix.ECONNREFUSED, target)
		})
	}
}

// TestShutdownFromAnotherEnginesLoop calls one engine's Shutdown from a
// Handler callback of another engine, whose loop must not wait there for the
// first's drain: Shutdown treated only its own engine's loops as loops, so it
// waited on the caller's loop until its context ended (the drain's
// connection is never closed here), holding every connection of that loop
// for as long, and two engines whose handlers shut each other down waited
// for each other. Now it drains in a goroutine and returns nil at once, as
// on its own loop, and the caller's loop serves on meanwhile.
func TestShutdownFromAnotherEnginesLoop(t *testing.T) {
	for _, b := range testBackends {
		t.Run(string(b), func(t *testing.T) {
			stop := func(e *Engine) {
				t.Cleanup(func() {
					ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
					defer cancel()
					e.Shutdown(ctx)
				})
			}
			other, otherAddr, otherDone := listenAndRun(t, testConfig(b), &echoHandler{})
			stop(other)
			held := mustDial(t, "tcp", otherAddr) // open until the drain's deadline
			if err := roundTrip(held, []byte("open")); err != nil {
				t.Fatal(err)
			}
			returned := make(chan error, 1)
			h := &echoHandler{onData: func(c *Conn, buf Buffer) {
				if string(buf.Bytes()) == "quit" {
					ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
					defer cancel()
					returned <- other.Shutdown(ctx)
				}
			}}
			e, addr, _ := listenAndRun(t, testConfig(b), h)
			stop(e)
			served := mustDial(t, "tcp", addr)
			if _, err := mustDial(t, "tcp", addr).Write([]byte("quit")); err != nil {
				t.Fatal(err)
			}
			if err := <-returned; err != nil {
				t.Fatalf("another engine's Shutdown from a handler: %v, want nil at once (it waited on this loop for its drain)", err)
			}
			// This loop serves while the other engine drains.
			if err := roundTrip(served, []byte("during")); err != nil {
				t.Error(err)
			}
			if err := <-otherDone; err != nil {
				t.Errorf("the engine shut down from another's loop: Run: %v", err)
			}
		})
	}
}

// TestShutdownWithoutRunFromAnotherEnginesLoop: Shutdown of an engine never
// run, called on another engine's loop goroutine, released what New made
// only in the goroutine it left to drain (f5ebad5), after returning nil: a
// Run called after it could start the engine and serve until that
// goroutine stopped it, where a Run after Shutdown fails, and the loops'
// eventfds were still open as it returned. Here five times, each on the
// serving engine's loop: Shutdown, then Left of the unrun engine's loop
// (closed: it will never run) and Run (an error).
func TestShutdownWithoutRunFromAnotherEnginesLoop(t *testing.T) {
	serving := newEngine(t, testConfig(BackendEpoll), &echoHandler{})
	runEngine(t, serving)
	for i := range 5 {
		e := newEngine(t, testConfig(BackendEpoll), &echoHandler{})
		if _, err := e.Listen("tcp", "127.0.0.1:0", nil); err != nil {
			t.Fatal(err)
		}
		got := make(chan string, 1)
		serving.Loops()[0].Post(func() {
			if err := e.Shutdown(context.Background()); err != nil {
				got <- fmt.Sprintf("Shutdown: %v", err)
				return
			}
			left := "closed"
			select {
			case <-e.Loops()[0].Left():
			default:
				left = "open"
			}
			got <- fmt.Sprintf("Left %s, Run %v", left, e.Run(context.Background()))
		})
		want := "Left closed, Run engine: Run called twice or after Shutdown"
		if s := <-got; s != want {
			t.Fatalf("try %d: on another engine's loop, Shutdown of an engine never run, then %q; want %q", i, s, want)
		}
	}
}

// TestShutdownFromHandler calls Shutdown from a Handler callback, on a loop
// goroutine, which Shutdown's doc allows (any goroutine), as package net's
// users do: with a context.WithTimeout whose cancel is deferred. It cannot
// wait there for its own loop to exit: it must return, and the engine stop
// (it deadlocked: Shutdown waited for the loop that was running it). With
// time left, the connections still open must drain, not be closed at once:
// Shutdown runs on in a goroutine there (8aa346b), and the cancel, due as
// soon as the handler returned, ended its wait before it began (every
// connection got OnClose with ErrClosed). With the deadline passed already,
// the engine stops at once and closes them with ErrClosed.
func TestShutdownFromHandler(t *testing.T) {
	for _, b := range testBackends {
		for _, tc := range []struct {
			name    string
			timeout time.Duration
		}{{"drain", 20 * time.Second}, {"deadline passed", -time.Second}} {
			t.Run(string(b)+"/"+tc.name, func(t *testing.T) {
				returned := make(chan error, 1)
				var eng atomic.Pointer[Engine]
				h := &closeErrHandler{echoHandler: echoHandler{onData: func(c *Conn, buf Buffer) {
					if string(buf.Bytes()) == "quit" {
						ctx, cancel := context.WithTimeout(context.Background(), tc.timeout)
						defer cancel()
						returned <- eng.Load().Shutdown(ctx)
					}
				}}}
				e, addr, done := listenAndRun(t, testConfig(b), h)
				eng.Store(e)
				stay := mustDial(t, "tcp", addr)
				if err := roundTrip(stay, []byte("before")); err != nil {
					t.Fatal(err)
				}
				quit := mustDial(t, "tcp", addr)
				if _, err := quit.Write([]byte("quit")); err != nil {
					t.Fatal(err)
				}
				if err := <-returned; err != nil {
					t.Errorf("Shutdown from a handler: %v", err)
				}
				if tc.timeout < 0 {
					// Stopped at once, closing both connections.
					if err := <-done; err != nil {
						t.Error(err)
					}
					h.mu.Lock()
					defer h.mu.Unlock()
					if len(h.errs) != 2 || !errors.Is(h.errs[0], ErrClosed) || !errors.Is(h.errs[1], ErrClosed) {
						t.Errorf("OnClose got %v, want ErrClosed for both connections", h.errs)
					}
					return
				}
				// Draining: the open connection is served until its peer
				// closes it, and the engine has not stopped meanwhile.
				if err := roundTrip(stay, []byte("during")); err != nil {
					t.Errorf("a connection open at Shutdown: %v", err)
				}
				if e.stopped.Load() {
					t.Error("the engine stopped with a connection open, within Shutdown's 20 s")
				}
				stay.Close()
				quit.Close()
				if err := <-done; err != nil {
					t.Error(err)
				}
				h.mu.Lock()
				defer h.mu.Unlock()
				for _, err := range h.errs {
					if errors.Is(err, ErrClosed) {
						t.Errorf("OnClose got %v: a connection was closed by Shutdown, not drained", err)
					}
				}
			})
		}
	}
}
