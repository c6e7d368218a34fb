package proxy

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/spindlenet/spindle/engine"
)

// TestReloadAccessLogBounded: reloads that change a listener's routes
// (a route added and removed by service discovery, say) keep its access
// log: 300 of them leave no writer goroutine or file descriptor behind
// each, and every request's line is in the file, under its route.
func TestReloadAccessLogBounded(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		app := newHTTPUpstream(t, reloadHTTPServer("app"))
		path := t.TempDir() + "/access.log"
		cfgOf := func(i int) *Config {
			cfg := httpConfig(b, app.addr)
			cfg.Listeners[0].AccessLog = &AccessLogConfig{Path: path}
			cfg.Listeners[0].Routes = []RouteConfig{{Name: fmt.Sprint("r", i%2), PathPrefix: "/r/", Pool: "app"}}
			return cfg
		}
		p := startProxy(t, cfgOf(0))
		c := dial(t, p)
		br := bufio.NewReader(c)
		fds := func() int {
			ents, err := os.ReadDir("/proc/self/fd")
			if err != nil {
				t.Fatal(err)
			}
			return len(ents)
		}
		g0, f0 := runtime.NumGoroutine(), fds()
		const n = 300
		for i := 1; i <= n; i++ {
			mustReload(t, p, cfgOf(i))
			fmt.Fprintf(c, "GET /r/%d HTTP/1.1\r\nHost: x\r\n\r\n", i)
			c.SetReadDeadline(time.Now().Add(20 * time.Second))
			if _, body := readResponseFrom(t, c, br, "GET"); body != "app" {
				t.Fatalf("request %d: %q", i, body)
			}
		}
		if g, f := runtime.NumGoroutine()-g0, fds()-f0; g > 20 || f > 20 {
			t.Errorf("after %d reloads: %+d goroutines, %+d file descriptors", n, g, f)
		}
		waitFor(t, fmt.Sprint(n, " lines in the access log"), func() bool {
			data, _ := os.ReadFile(path)
			return bytes.Count(data, []byte("\n")) >= n
		})
		routes := map[string]string{}
		for _, m := range logLines(t, path) {
			routes[field(m, "target")] = field(m, "route")
		}
		for i := 1; i <= n; i++ {
			if got, want := routes[fmt.Sprint("/r/", i)], fmt.Sprint("r", i%2); got != want {
				t.Errorf("request %d: logged under route %q, want %q", i, got, want)
			}
		}
	})
}

// TestReloadAccessLogClosedWhenUnused: reloads that give a listener's
// access log a new path close the old log's file and end its writer once
// no client that could write to it is left: a kept-alive client holds
// the old log until its next request (which goes under the new
// listener, logged in the new file), and a listener a reload removes,
// with a tcp client open, keeps its log until that client goes. Of 50
// paths, one file stays open and one writer runs, and each request's
// line is in its path's file.
func TestReloadAccessLogClosedWhenUnused(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		app := newHTTPUpstream(t, reloadHTTPServer("app"))
		echo := newUpstream(t, nil)
		dir := t.TempDir()
		pathOf := func(i int) string { return fmt.Sprintf("%s/access%d.log", dir, i) }
		cfgOf := func(i int, tcp bool) *Config {
			cfg := httpConfig(b, app.addr)
			cfg.Engine.CPUs = []int{0, 1}
			cfg.Listeners[0].AccessLog = &AccessLogConfig{Path: pathOf(i)}
			if tcp {
				cfg.Pools = append(cfg.Pools, PoolConfig{Name: "echo", Servers: []ServerConfig{{Address: echo.addr}}})
				cfg.Listeners = append(cfg.Listeners, ListenerConfig{Name: "tcp", Listen: "127.0.0.1:0", Pool: "echo",
					ConnectTimeout: Duration(2 * time.Second), AccessLog: &AccessLogConfig{Path: dir + "/tcp.log"}})
			}
			return cfg
		}
		p := startProxy(t, cfgOf(0, true))
		c := dial(t, p)
		br := bufio.NewReader(c)
		get := func(i int) {
			t.Helper()
			fmt.Fprintf(c, "GET /r/%d HTTP/1.1\r\nHost: x\r\n\r\n", i)
			if _, body := readResponseFrom(t, c, br, "GET"); body != "app" {
				t.Fatalf("request %d: %q", i, body)
			}
		}
		tc, err := net.Dial("tcp", p.Addr("tcp").String())
		if err != nil {
			t.Fatal(err)
		}
		defer tc.Close()
		io.WriteString(tc, "x")
		if _, err := io.ReadFull(tc, make([]byte, 1)); err != nil {
			t.Fatal(err)
		}
		get(0)
		mustReload(t, p, cfgOf(1, false))
		time.Sleep(50 * time.Millisecond) // (time for a close that is not to come)
		if open := logsOpen(t, dir); len(open) != 3 {
			t.Errorf("after the first reload, logs open %v: want the old one (its client idle on it), the new one and the tcp listener's (its client open)", open)
		}
		tc.Close()
		get(1) // under the new listener: the old log has no client left
		waitFor(t, "access0.log and tcp.log closed", func() bool { return slices.Equal(logsOpen(t, dir), []string{"access1.log"}) })
		for i := 2; i < 50; i++ {
			mustReload(t, p, cfgOf(i, false))
			get(i)
		}
		waitFor(t, "one log open, one writer", func() bool {
			return slices.Equal(logsOpen(t, dir), []string{"access49.log"}) && logWriters() == 1
		})
		for i := range 49 {
			if lines := logLines(t, pathOf(i)); len(lines) != 1 || field(lines[0], "target") != fmt.Sprint("/r/", i) {
				t.Errorf("%s: %v, want request %d's line", pathOf(i), lines, i)
			}
		}
		if lines := logLines(t, dir+"/tcp.log"); len(lines) != 1 {
			t.Errorf("tcp.log: %v, want the tcp client's line", lines)
		}
	})
}

// logsOpen returns the names of the files in dir the process has open,
// sorted.
func logsOpen(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		if to, err := os.Readlink("/proc/self/fd/" + e.Name()); err == nil && filepath.Dir(to) == dir {
			names = append(names, filepath.Base(to))
		}
	}
	slices.Sort(names)
	return names
}

// logWriters counts the access log writer goroutines running.
func logWriters() int {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			return strings.Count(string(buf[:n]), "proxy.(*accessLog).write(")
		}
		buf = make([]byte, 2*len(buf))
	}
}

// TestReloadAccessLogH2StreamHolds: an HTTP/2 client's stream in flight
// across a reload that gives its listener's access log a new path keeps
// the old log open, though the connection's next stream goes under the
// new listener (logged in the new file): the old file closes once the
// stream ended, its line in it.
func TestReloadAccessLogH2StreamHolds(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		u, at, release := newHoldUpstream(t, "/held", "/quick")
		close(release["/quick"])
		dir := t.TempDir()
		cfgOf := func(i int) *Config {
			cfg := h2cConfig(b, u.addr)
			cfg.Listeners[0].AccessLog = &AccessLogConfig{Path: fmt.Sprintf("%s/access%d.log", dir, i)}
			return cfg
		}
		p := startProxy(t, cfgOf(0))
		hc, base := h2Client(t, p)
		held := make(chan []byte, 1)
		go func() {
			resp, err := hc.Get(base + "/held")
			if err != nil {
				held <- []byte(err.Error())
				return
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			held <- body
		}()
		waitFor(t, "/held at the server", at("/held"))
		mustReload(t, p, cfgOf(1))
		req, _ := http.NewRequest("GET", base+"/quick", nil)
		if _, body := do(t, hc, req); string(body) != "/quick" {
			t.Fatalf("/quick: %q", body)
		}
		time.Sleep(50 * time.Millisecond) // (time for a close that is not to come)
		if open := logsOpen(t, dir); !slices.Equal(open, []string{"access0.log", "access1.log"}) {
			t.Errorf("with /held in flight, logs open %v: want both", open)
		}
		close(release["/held"])
		if body := <-held; string(body) != "/held" {
			t.Fatalf("/held: %q", body)
		}
		waitFor(t, "access0.log closed", func() bool { return slices.Equal(logsOpen(t, dir), []string{"access1.log"}) })
		waitFor(t, "/quick's line written", func() bool { data, _ := os.ReadFile(dir + "/access1.log"); return len(data) > 0 })
		for i, target := range []string{"/held", "/quick"} {
			if lines := logLines(t, fmt.Sprintf("%s/access%d.log", dir, i)); len(lines) != 1 || field(lines[0], "target") != target {
				t.Errorf("access%d.log: %v, want %s's line", i, lines, target)
			}
		}
	})
}
