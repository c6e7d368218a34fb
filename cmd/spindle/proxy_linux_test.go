package main

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// goServer serves each connection to a loopback listener with serve
// until the test ends, and returns its address.
func goServer(t *testing.T, serve func(net.Conn)) string {
	t.Helper()
	up, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { up.Close() })
	go func() {
		for {
			c, err := up.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				serve(c)
			}()
		}
	}()
	return up.Addr().String()
}

func echoConn(c net.Conn) { io.Copy(struct{ io.Writer }{c}, struct{ io.Reader }{c}) }

// proxyConfig is a config file for `spindle proxy`: listener web in front
// of server; fields are more of the listener's ("access_log: {path: x}").
func proxyConfig(server string, fields ...string) []byte {
	return []byte(fmt.Sprintf(`engine: {backend: epoll, cpus: [0]}
listeners: [{name: web, listen: "127.0.0.1:0", pool: app%s}]
pools: [{name: app, servers: [%q]}]
`, strings.Join(append([]string{""}, fields...), ", "), server))
}

// startProxyCmd runs `spindle proxy -config` with -drain drain in front of
// a Go echo server until the test ends, and returns the listener's address
// and a channel with the command's exit. fields are more of the
// listener's (proxyConfig).
func startProxyCmd(t *testing.T, drain string, fields ...string) (*exec.Cmd, string, <-chan error) {
	t.Helper()
	cfg := filepath.Join(t.TempDir(), "proxy.yaml")
	os.WriteFile(cfg, proxyConfig(goServer(t, echoConn), fields...), 0o644)
	cmd, addr, _, done := runProxyCmd(t, cfg, "-drain", drain)
	return cmd, addr, done
}

// runProxyCmd runs `spindle proxy -config cfg` with args until the test
// ends, and returns the command, listener web's address, the lines it
// writes to stderr after the listener's (a full channel drops them), and
// a channel with its exit.
func runProxyCmd(t *testing.T, cfg string, args ...string) (*exec.Cmd, string, <-chan string, <-chan error) {
	t.Helper()
	cmd := spindleCmd(append([]string{"proxy", "-config", cfg}, args...)...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := startSignallable(cmd); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	lines := make(chan string, 64)
	var addr string
	sc := bufio.NewScanner(stderr)
	for sc.Scan() {
		if a, ok := strings.CutPrefix(sc.Text(), "spindle proxy: listener web on "); ok {
			addr, _, _ = strings.Cut(a, ",")
			break
		}
	}
	go func() {
		for sc.Scan() {
			select {
			case lines <- sc.Text():
			default:
			}
		}
		io.Copy(io.Discard, stderr)
		done <- cmd.Wait()
	}()
	if addr == "" {
		cmd.Process.Kill()
		t.Fatalf("no listener line: %v", <-done)
	}
	t.Cleanup(func() { cmd.Process.Kill() })
	return cmd, addr, lines, done
}

// TestProxyRun runs `spindle proxy -config` in front of a Go echo server,
// forwards one connection, and stops it with SIGTERM while a second one is
// open: it drains for -drain, closes that connection, and exits 0.
func TestProxyRun(t *testing.T) {
	cmd, addr, done := startProxyCmd(t, "300ms")
	roundTrip := func(c net.Conn, msg string) { echoed(t, c, msg) }
	c1, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	roundTrip(c1, "one")
	c1.Close()
	c2, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	roundTrip(c2, "two")
	t0 := time.Now()
	terminate(t, cmd, done)
	if el := time.Since(t0); el < 300*time.Millisecond {
		t.Errorf("exited %v after SIGTERM with a connection open, before the 300ms drain", el)
	}
	c2.SetReadDeadline(time.Now().Add(5 * time.Second))
	if n, err := c2.Read(make([]byte, 1)); n != 0 || err == nil {
		t.Errorf("open connection after the drain: read %d, %v; want it closed", n, err)
	}
}

// terminate sends cmd SIGTERM and waits for it to exit 0.
func terminate(t *testing.T, cmd *exec.Cmd, done <-chan error) {
	t.Helper()
	cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("spindle proxy after SIGTERM: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("spindle proxy still running 10s after SIGTERM")
	}
}

func echoed(t *testing.T, c net.Conn, msg string) {
	t.Helper()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	io.WriteString(c, msg)
	got := make([]byte, len(msg))
	if _, err := io.ReadFull(c, got); err != nil || string(got) != msg {
		t.Fatalf("echo %q: got %q, %v", msg, got, err)
	}
}

// TestProxySecondSignal: a second SIGINT or SIGTERM during the drain ends
// it at once, as in HAProxy and Envoy, rather than being swallowed while
// the drain runs its course.
func TestProxySecondSignal(t *testing.T) {
	cmd, addr, done := startProxyCmd(t, "60s")
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	echoed(t, c, "open")
	cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-done:
		t.Fatalf("spindle proxy exited (%v) at the first signal with a connection open and a 60s drain", err)
	case <-time.After(300 * time.Millisecond):
	}
	t0 := time.Now()
	cmd.Process.Signal(syscall.SIGINT)
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("spindle proxy after a second signal: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("spindle proxy still draining 10s after a second signal")
	}
	t.Logf("exited %v after the second signal", time.Since(t0))
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if n, err := c.Read(make([]byte, 1)); n != 0 || err == nil {
		t.Errorf("open connection after the second signal: read %d, %v; want it closed", n, err)
	}
}

// TestProxyReopenLogs: SIGUSR1 has `spindle proxy` reopen its access logs
// (logrotate's "postrotate kill -USR1"): after the file is moved away, the
// next connection's line goes to a new file of its name.
func TestProxyReopenLogs(t *testing.T) {
	path := filepath.Join(t.TempDir(), "access.log")
	cmd, addr, _ := startProxyCmd(t, "1s", fmt.Sprintf("access_log: {path: %q, format: text}", path))
	conn := func(msg string) {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		echoed(t, c, msg)
		c.Close()
	}
	lines := func(p string) int {
		data, _ := os.ReadFile(p)
		return strings.Count(string(data), "\n")
	}
	wait := func(what string, ok func() bool) {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); !ok(); time.Sleep(5 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s", what)
			}
		}
	}
	conn("one")
	wait("the first line", func() bool { return lines(path) == 1 })
	if err := os.Rename(path, path+".1"); err != nil {
		t.Fatal(err)
	}
	cmd.Process.Signal(syscall.SIGUSR1)
	wait("the reopened file", func() bool { _, err := os.Stat(path); return err == nil })
	conn("two")
	wait("the second line, in the new file", func() bool { return lines(path) == 1 })
	if n := lines(path + ".1"); n != 1 {
		t.Errorf("%d lines in the moved file, want 1", n)
	}
}
