package main

import (
	"context"
	"io"
	"net"
	"os"
	"os/signal"
	"runtime"
	"syscall"
	"testing"
	"time"

	"github.com/spindlenet/spindle/engine"
	"github.com/spindlenet/spindle/internal/mainproc"
)

func TestMain(m *testing.M) {
	mainproc.Run(main, "-addr", "127.0.0.1:0")
	os.Exit(m.Run())
}

// TestEcho runs the example on every backend, echoes a message over a few
// connections, and stops it as a signal would.
func TestEcho(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the engine runs on Linux only")
	}
	for _, b := range engine.Backends {
		t.Run(string(b), func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			addrc := make(chan net.Addr, 1)
			done := make(chan error, 1)
			go func() { done <- run(ctx, "127.0.0.1:0", &engine.Config{Backend: b}, func(a net.Addr) { addrc <- a }) }()
			var addr net.Addr
			select {
			case addr = <-addrc:
			case err := <-done:
				t.Fatalf("run: %v", err)
			}
			for i := 0; i < 5; i++ {
				c, err := net.Dial("tcp", addr.String())
				if err != nil {
					t.Fatal(err)
				}
				c.SetDeadline(time.Now().Add(10 * time.Second))
				msg := []byte("hello, echo")
				c.Write(msg)
				got := make([]byte, len(msg))
				if _, err := io.ReadFull(c, got); err != nil || string(got) != string(msg) {
					t.Fatalf("echoed %q, %v; want %q", got, err, msg)
				}
				c.Close()
			}
			cancel()
			if err := <-done; err != nil {
				t.Errorf("run after the stop: %v", err)
			}
		})
	}
}

// TestSecondSignalEndsAtOnce: SIGTERM starts the stop, which gives an open
// connection up to 5 seconds; a second SIGTERM ends the process at once, by
// the signal's default action. The second signal was caught and dropped,
// and the process waited out the 5 seconds.
func TestSecondSignalEndsAtOnce(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the engine runs on Linux only")
	}
	if signal.Ignored(syscall.SIGTERM) {
		t.Skip("SIGTERM is ignored in this process, and would be in the child")
	}
	p := mainproc.Start(t)
	c, err := net.Dial("tcp", p.Stdout("echo: listening on "))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	msg := []byte("open")
	c.Write(msg)
	if _, err := io.ReadFull(c, msg); err != nil {
		t.Fatal(err)
	}
	p.Signal(syscall.SIGTERM)
	p.Stderr("echo: stopping")
	p.Signal(syscall.SIGTERM)
	p.KilledBy(syscall.SIGTERM, 30*time.Second)
}
