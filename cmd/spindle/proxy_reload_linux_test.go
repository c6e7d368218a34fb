package main

import (
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestProxyReload: SIGHUP makes `spindle proxy` read its config file again
// and apply it: after the file names another server, new connections go
// to it, while one open across the reload goes on to the first; a file
// that does not load is refused with one line and changes nothing.
func TestProxyReload(t *testing.T) {
	first := goServer(t, echoConn)
	second := goServer(t, func(c net.Conn) {
		io.WriteString(c, "second:")
		echoConn(c)
	})
	cfg := filepath.Join(t.TempDir(), "proxy.yaml")
	if err := os.WriteFile(cfg, proxyConfig(first), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd, addr, lines, done := runProxyCmd(t, cfg, "-drain", "1s")
	dial := func() net.Conn {
		t.Helper()
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	open := dial()
	echoed(t, open, "first")
	reload := func(want string) {
		t.Helper()
		if err := cmd.Process.Signal(syscall.SIGHUP); err != nil {
			t.Fatal(err)
		}
		for {
			select {
			case l := <-lines:
				if !strings.HasPrefix(l, "spindle proxy: reload") {
					continue // the engine's start-up lines
				}
				if !strings.HasPrefix(l, want) {
					t.Fatalf("after SIGHUP: %q, want a line beginning %q", l, want)
				}
				return
			case err := <-done:
				t.Fatalf("spindle proxy exited at SIGHUP: %v", err)
			case <-time.After(10 * time.Second):
				t.Fatal("no line after SIGHUP")
			}
		}
	}

	if err := os.WriteFile(cfg, proxyConfig(second), 0o644); err != nil {
		t.Fatal(err)
	}
	reload("spindle proxy: reloaded " + cfg + ": listeners web on " + addr)
	fromSecond := func() {
		t.Helper()
		c := dial()
		got := make([]byte, len("second:"))
		c.SetReadDeadline(time.Now().Add(10 * time.Second))
		if _, err := io.ReadFull(c, got); err != nil || string(got) != "second:" {
			t.Fatalf("a new connection after the reload: %q, %v; want the second server's greeting", got, err)
		}
	}
	fromSecond()
	echoed(t, open, "still first")

	if err := os.WriteFile(cfg, []byte("listeners: [}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	reload("spindle proxy: reload failed, the config in force stays: ")
	fromSecond()

	terminate(t, cmd, done)
}
