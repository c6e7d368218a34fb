package engine

import (
	"net"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestAcceptRearmRefused runs the process out of descriptors while a
// connection waits to be accepted on an epoll loop, whose listening socket
// epoll then refuses to watch again when the back-off ends (ENOSPC, as
// past fs.epoll.max_user_watches, through listenerCtl): the loop says so
// and tries again after the next pause, and accepts the connection once
// epoll takes the socket back. The refusal was dropped: the socket was
// never watched again and kept its share of the connections (SO_REUSEPORT)
// in its backlog, never accepted, and nothing said why.
func TestAcceptRearmRefused(t *testing.T) {
	skipWithBatchWait(t, "epoll, epoll-busypoll")
	var target atomic.Int64 // the listening socket whose re-arm fails
	var refused atomic.Int64
	target.Store(-1)
	t.Cleanup(func() { listenerCtl = unix.EpollCtl }) // after the engines' cleanups
	listenerCtl = func(epfd, op, fd int, ev *unix.EpollEvent) error {
		if op == unix.EPOLL_CTL_ADD && int64(fd) == target.Load() {
			refused.Add(1)
			return unix.ENOSPC
		}
		return unix.EpollCtl(epfd, op, fd, ev)
	}
	for _, b := range []Backend{BackendEpoll, BackendEpollBusyPoll} {
		t.Run(string(b), func(t *testing.T) {
			var logs logLines
			cfg := testConfig(b)
			cfg.CPUs = []int{0}
			cfg.Logf = logs.logf
			e, ln := startListening(t, cfg, &echoHandler{}, "tcp", "127.0.0.1:0")
			l := e.Loops()[0]
			syncLoop(l) // the socket is watched
			ap := ln.Addr().(*net.TCPAddr).AddrPort()
			cfd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
			if err != nil {
				t.Fatal(err)
			}
			client := os.NewFile(uintptr(cfd), "client")
			defer client.Close()
			refused.Store(0)
			target.Store(int64(ln.fds[0]))
			exhaustFds(t, func() {
				if err := unix.Connect(cfd, &unix.SockaddrInet4{Addr: ap.Addr().As4(), Port: int(ap.Port())}); err != nil {
					t.Error(err)
				}
			}, func() uint64 { return 0 })
			waitFor(t, "a re-arm refused", func() bool { return refused.Load() > 0 })
			target.Store(-1)
			c, err := net.FileConn(client)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			c.SetDeadline(time.Now().Add(3 * time.Second))
			if err := roundTrip(c, []byte("after")); err != nil {
				t.Errorf("echo once epoll watched the socket again (%d re-arms refused): %v", refused.Load(), err)
			}
			if logs.count("watching") == 0 {
				t.Errorf("nothing said of the refused re-arm: %q", logs.all())
			}
		})
	}
}

// TestListenWatchRefused has epoll refuse to watch a new listener's socket
// (ENOSPC, as past fs.epoll.max_user_watches, through listenerCtl) on an
// epoll engine of one loop: the loop says so and tries again after a
// pause, and serves the listener once epoll takes the socket. The refusal
// was dropped and the socket closed: Listen had succeeded, and every
// connection was refused, nothing saying why. An accept that then runs
// out of descriptors is said too: the add's pauses are not an accept's
// back-off, which is said at its start.
func TestListenWatchRefused(t *testing.T) {
	skipWithBatchWait(t, "epoll, epoll-busypoll")
	var refusing atomic.Bool
	var refused, watched atomic.Int64
	t.Cleanup(func() { listenerCtl = unix.EpollCtl }) // after the engines' cleanups
	listenerCtl = func(epfd, op, fd int, ev *unix.EpollEvent) error {
		if op != unix.EPOLL_CTL_ADD {
			return unix.EpollCtl(epfd, op, fd, ev)
		}
		if refusing.Load() {
			refused.Add(1)
			return unix.ENOSPC
		}
		err := unix.EpollCtl(epfd, op, fd, ev)
		if err == nil {
			watched.Add(1)
		}
		return err
	}
	for _, b := range []Backend{BackendEpoll, BackendEpollBusyPoll} {
		t.Run(string(b), func(t *testing.T) {
			var logs logLines
			cfg := testConfig(b)
			cfg.CPUs = []int{0}
			cfg.Logf = logs.logf
			refused.Store(0)
			watched.Store(0)
			refusing.Store(true)
			_, ln := startListening(t, cfg, &echoHandler{}, "tcp", "127.0.0.1:0")
			waitFor(t, "the listener's watch refused", func() bool { return refused.Load() > 0 })
			refusing.Store(false)
			waitFor(t, "the listener watched", func() bool { return watched.Load() > 0 })
			if logs.count("watching") == 0 {
				t.Errorf("nothing said of the refused watch: %q", logs.all())
			}
			ap := ln.Addr().(*net.TCPAddr).AddrPort()
			cfd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
			if err != nil {
				t.Fatal(err)
			}
			client := os.NewFile(uintptr(cfd), "client")
			defer client.Close()
			exhaustFds(t, func() {
				if err := unix.Connect(cfd, &unix.SockaddrInet4{Addr: ap.Addr().As4(), Port: int(ap.Port())}); err != nil {
					t.Errorf("connect once epoll could watch the socket (%d watches refused): %v", refused.Load(), err)
				}
			}, func() uint64 { return 0 })
			if logs.count("accept on") == 0 {
				t.Errorf("nothing said of the accept out of descriptors: %q", logs.all())
			}
			c, err := net.FileConn(client)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			c.SetDeadline(time.Now().Add(3 * time.Second))
			if err := roundTrip(c, []byte("served")); err != nil {
				t.Errorf("echo once epoll could watch the socket and descriptors were free: %v", err)
			}
		})
	}
}
