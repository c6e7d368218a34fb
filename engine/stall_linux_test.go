package engine

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestStopStallSaid: a loop that cannot exit because the kernel has not
// ended one of its requests says so, once, after stopStall, naming what is
// in flight, and the engine a second later names the loops not exited; the
// loop exits, and Shutdown returns, as soon as the request ends. The
// request is a poll on a pipe no one writes to, counted as the loop's own
// (as a cancel is).
func TestStopStallSaid(t *testing.T) {
	defer func(d time.Duration) { stopStall = d }(stopStall)
	stopStall = 50 * time.Millisecond
	for _, b := range testBackends {
		if b == BackendEpoll || b == BackendEpollBusyPoll {
			continue // nothing of epoll's is in flight in the kernel
		}
		t.Run(string(b), func(t *testing.T) {
			lines := make(chan string, 16)
			cfg := testConfig(b)
			cfg.Logf = func(f string, a ...any) {
				select {
				case lines <- fmt.Sprintf(f, a...):
				default:
				}
			}
			e, _, done := listenAndRun(t, cfg, &echoHandler{})
			var p [2]int
			if err := unix.Pipe2(p[:], unix.O_CLOEXEC|unix.O_NONBLOCK); err != nil {
				t.Fatal(err)
			}
			defer unix.Close(p[0])
			defer unix.Close(p[1])
			l := e.Loops()[0]
			armed := make(chan bool, 1)
			l.Post(func() {
				ub, ok := l.be.(*uringBackend)
				if ok {
					ub.sqe().PrepPollAdd(p[0], unix.POLLIN, false, udata(opCancel, 0, 0))
					ub.inflight++
				}
				armed <- ok
			})
			if !<-armed {
				t.Skipf("backend %s fell back to epoll: io_uring unavailable", b)
			}
			ctx, cancel := context.WithCancel(context.Background())
			cancel() // no drain: the loops stop at once
			shut := make(chan error, 1)
			go func() { shut <- e.Shutdown(ctx) }()

			// The loop says what it waits for (after stall) and the engine
			// which loops have not exited (after stall + 1 s): in either
			// order, as a loaded host may hold the loop up past the
			// engine's line. Shutdown must not return meanwhile.
			want := "engine: loop 0 (CPU "
			want2 := "engine: loops [0] have not exited "
			var said, said2 string
			for said == "" || said2 == "" {
				select {
				case line := <-lines:
					switch {
					case strings.HasPrefix(line, want) && said == "":
						said = line
					case strings.HasPrefix(line, want2) && said2 == "":
						said2 = line
					}
				case <-shut:
					t.Fatal("Shutdown returned with a request of loop 0 in flight")
				case <-time.After(20 * time.Second):
					t.Fatalf("20s after Shutdown: the loop said %q, the engine %q; want both", said, said2)
				}
			}
			t.Logf("said: %s", said)
			for _, part := range []string{"has been stopping for", "0 connections open", "1 io_uring requests in flight", "0 accepts", "1 cancels or ring messages"} {
				if !strings.Contains(said, part) {
					t.Errorf("said %q; want it to contain %q", said, part)
				}
			}
			unix.Write(p[1], []byte{1}) // the poll ends
			select {
			case <-shut:
			case <-time.After(20 * time.Second):
				t.Fatal("Shutdown did not return 20s after the last request ended")
			}
			if err := <-done; err != nil {
				t.Fatalf("Run: %v", err)
			}
			// Run has returned: every line has been logged.
			for len(lines) > 0 {
				if line := <-lines; strings.HasPrefix(line, want) || strings.HasPrefix(line, want2) {
					t.Errorf("said twice: %q", line)
				}
			}
		})
	}
}
