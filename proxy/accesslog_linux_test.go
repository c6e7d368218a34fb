package proxy

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/spindlenet/spindle/engine"
)

// logLines reads the log at path as JSON lines, failing on any line that
// does not parse.
func logLines(t testing.TB, path string) []map[string]any {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []map[string]any
	for _, ln := range bytes.SplitAfter(data, []byte("\n")) {
		if len(ln) == 0 {
			continue
		}
		if ln[len(ln)-1] != '\n' {
			continue // being written
		}
		var m map[string]any
		if err := json.Unmarshal(ln, &m); err != nil {
			t.Fatalf("log line %q: %v", ln, err)
		}
		out = append(out, m)
	}
	return out
}

// waitLine waits for a line of the log at path for which match holds, and
// returns it.
func waitLine(t *testing.T, path, what string, match func(map[string]any) bool) map[string]any {
	t.Helper()
	var got map[string]any
	waitFor(t, what, func() bool {
		for _, m := range logLines(t, path) {
			if match(m) {
				got = m
				return true
			}
		}
		return false
	})
	return got
}

// field is m[k] as fmt prints it ("200", "true", "GET").
func field(m map[string]any, k string) string {
	v, ok := m[k]
	if !ok {
		return "<missing>"
	}
	return fmt.Sprint(v)
}

// checkFields checks m's fields against want (as fmt prints them).
func checkFields(t *testing.T, m map[string]any, want map[string]string) {
	t.Helper()
	for k, v := range want {
		if got := field(m, k); got != v {
			t.Errorf("%s = %s, want %s (line %v)", k, got, v, m)
		}
	}
}

// TestAccessLogHTTP: each exchange gets a JSON line with its fields:
// normal ones on a new and a reused connection, proxy-made 400, 502 and
// 504, a hostile target, a client reset mid-exchange; the per-route
// counters count each request on its route.
func TestAccessLogHTTP(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		arrived := make(chan struct{}, 4)
		u := newHTTPUpstream(t, func(w http.ResponseWriter, r *http.Request) {
			switch {
			case strings.HasPrefix(r.URL.Path, "/slow"):
				arrived <- struct{}{}
				select {
				case <-time.After(5 * time.Second):
				case <-r.Context().Done():
				}
			case r.Method == "POST" && len(r.TransferEncoding) == 0:
				w.WriteHeader(400) // want it chunked
			default:
				body, _ := io.ReadAll(r.Body)
				fmt.Fprintf(w, "got %d", len(body))
			}
		})
		path := filepath.Join(t.TempDir(), "access.log")
		cfg := httpConfig(b, u.addr)
		cfg.Pools = append(cfg.Pools, PoolConfig{Name: "dead", Servers: Servers(deadAddr(t))})
		l := &cfg.Listeners[0]
		l.Routes = []RouteConfig{{Name: "api", PathPrefix: "/api/", Pool: "app"}, {PathPrefix: "/dead/", Pool: "dead"}}
		l.ResponseTimeout = Duration(500 * time.Millisecond)
		l.AccessLog = &AccessLogConfig{Path: path}
		p := startProxy(t, cfg)
		c, base := client(t, p)

		get(t, c, base+"/api/x?q=1")
		second, _ := get(t, c, base+"/api/y")
		// (A reader of unknown length: the body goes chunked; req_bytes
		// counts its data.)
		resp, err := c.Post(base+"/other", "text/plain", struct{ io.Reader }{strings.NewReader("abcd")})
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if second.StatusCode != 200 || resp.StatusCode != 200 {
			t.Fatalf("statuses %d %d", second.StatusCode, resp.StatusCode)
		}
		byTarget := func(target string) func(map[string]any) bool {
			return func(m map[string]any) bool { return m["target"] == target }
		}
		m := waitLine(t, path, "/api/x's line", byTarget("/api/x?q=1"))
		checkFields(t, m, map[string]string{"listener": "web", "method": "GET", "host": p.Addr("web").String(), "proto": "HTTP/1.1",
			"status": "200", "req_bytes": "0", "resp_bytes": "5", "route": "api", "server": u.addr, "source": "upstream", "reused": "false", "term": "-"})
		if ts, err := time.Parse(time.RFC3339Nano, field(m, "time")); err != nil || time.Since(ts) > time.Minute {
			t.Errorf("time %v: %v", m["time"], err)
		}
		if cl, ok := m["client"].(string); !ok || !strings.HasPrefix(cl, "127.0.0.1:") {
			t.Errorf("client %v", m["client"])
		}
		if d, ok := m["duration_us"].(float64); !ok || d < 0 || d > 10e6 {
			t.Errorf("duration_us %v", m["duration_us"])
		}
		checkFields(t, waitLine(t, path, "/api/y's line", byTarget("/api/y")), map[string]string{"reused": "true", "route": "api"})
		checkFields(t, waitLine(t, path, "the POST's line", byTarget("/other")), map[string]string{"method": "POST", "req_bytes": "4", "route": "default"})

		// Proxy-made: 502 (no server connects), 504, 400 (dot-segments),
		// and a hostile target (quotes and backslashes pass internal/h1).
		resp, _ = get(t, c, base+"/dead/x")
		if resp.StatusCode != 502 {
			t.Fatalf("dead: %d", resp.StatusCode)
		}
		checkFields(t, waitLine(t, path, "the 502's line", byTarget("/dead/x")), map[string]string{"status": "502", "source": "proxy", "server": "-",
			"reused": "<nil>", "term": "SC", "route": "/dead/"})
		resp, _ = get(t, c, base+"/slow/504")
		<-arrived
		if resp.StatusCode != 504 {
			t.Fatalf("slow: %d", resp.StatusCode)
		}
		m = waitLine(t, path, "the 504's line", byTarget("/slow/504"))
		checkFields(t, m, map[string]string{"status": "504", "source": "proxy", "server": u.addr, "term": "ST"})
		if d, _ := m["duration_us"].(float64); d < 400e3 {
			t.Errorf("504 after %vµs, want about response_timeout (500ms)", d)
		}
		raw := dial(t, p)
		io.WriteString(raw, "GET /a/../b HTTP/1.1\r\nHost: x\r\n\r\n")
		readResponse(t, raw, "GET")
		checkFields(t, waitLine(t, path, "the 400's line", byTarget("/a/../b")), map[string]string{"status": "400", "source": "proxy", "term": "PR", "route": "<nil>"})
		hostile := `/q"u\ote?"x"=\\`
		raw = dial(t, p)
		io.WriteString(raw, "GET "+hostile+" HTTP/1.1\r\nHost: x\r\n\r\n")
		readResponse(t, raw, "GET")
		waitLine(t, path, "the hostile target's line", byTarget(hostile))

		// A client reset while the server takes its time.
		raw = dial(t, p)
		io.WriteString(raw, "GET /slow/reset HTTP/1.1\r\nHost: x\r\n\r\n")
		<-arrived
		raw.SetLinger(0)
		raw.Close()
		checkFields(t, waitLine(t, path, "the reset's line", byTarget("/slow/reset")), map[string]string{"status": "0", "source": "-", "term": "CD", "server": u.addr})

		got := scrape(t, p)
		for k, v := range map[string]float64{
			`spindle_proxy_http_route_requests_total{listener="web",route="api"}`:                                    2,
			`spindle_proxy_http_route_requests_total{listener="web",route="/dead/"}`:                                 1,
			`spindle_proxy_http_route_requests_total{listener="web",route="default"}`:                                4, // /other, /slow twice, hostile
			`spindle_proxy_http_route_responses_total{listener="web",route="api",class="2xx",source="upstream"}`:     2,
			`spindle_proxy_http_route_responses_total{listener="web",route="/dead/",class="5xx",source="proxy"}`:     1,
			`spindle_proxy_http_route_responses_total{listener="web",route="default",class="5xx",source="proxy"}`:    1,
			`spindle_proxy_http_route_responses_total{listener="web",route="default",class="2xx",source="upstream"}`: 2,
			`spindle_proxy_listener_http_requests_total{listener="web"}`:                                             8,
			`spindle_proxy_access_log_dropped_total{listener="web"}`:                                                 0,
		} {
			if got[k] != v {
				t.Errorf("%s = %v, want %v", k, got[k], v)
			}
		}
	})
}

// TestAccessLogTCP: a connection's line (text format, its fields in
// their order), one whose servers all refuse, and one the client resets.
func TestAccessLogTCP(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		u := newUpstream(t, nil)
		dir := t.TempDir()
		path := filepath.Join(dir, "tcp.log")
		cfg := testConfig(b, u.addr)
		cfg.Listeners[0].AccessLog = &AccessLogConfig{Path: path, Format: AccessLogText}
		cfg.Listeners = append(cfg.Listeners, ListenerConfig{Name: "dead", Listen: "127.0.0.1:0", Pool: "dead",
			AccessLog: &AccessLogConfig{Path: filepath.Join(dir, "dead.log")}})
		cfg.Pools = append(cfg.Pools, PoolConfig{Name: "dead", Servers: Servers(deadAddr(t))})
		p := startProxy(t, cfg)

		c := dial(t, p)
		if err := roundTrip(c, "hello"); err != nil {
			t.Fatal(err)
		}
		io.WriteString(c, "abc")
		c.CloseWrite()
		if got, err := io.ReadAll(c); err != nil || string(got) != "abc" {
			t.Fatalf("read %q, %v", got, err)
		}
		local := c.LocalAddr().String()
		c.Close()
		var line string
		waitFor(t, "the connection's line", func() bool {
			data, _ := os.ReadFile(path)
			line = string(data)
			return strings.HasSuffix(line, "\n")
		})
		f := strings.Fields(line)
		if len(f) != 9 {
			t.Fatalf("line %q: %d fields, want 9", line, len(f))
		}
		if _, err := time.Parse(time.RFC3339Nano, f[0]); err != nil {
			t.Error(err)
		}
		if want := []string{`"web"`, local, u.addr, "8", "8"}; strings.Join(f[1:6], " ") != strings.Join(want, " ") || f[7] != "-" {
			t.Errorf("line %q, want fields 1-5 %q and term -", line, want)
		}

		dc, err := net.Dial("tcp", p.Addr("dead").String())
		if err != nil {
			t.Fatal(err)
		}
		if err := closedByProxy(dc); err != nil {
			t.Error(err)
		}
		dc.Close()
		checkFields(t, waitLine(t, filepath.Join(dir, "dead.log"), "the refused connection's line", func(map[string]any) bool { return true }),
			map[string]string{"listener": "dead", "server": "-", "client_bytes": "0", "server_bytes": "0", "term": "SC"})

		cfg.Listeners[0].AccessLog.Format = AccessLogJSON // (read by nobody now: the proxy has its own)
		rc := dial(t, p)
		if err := roundTrip(rc, "x"); err != nil {
			t.Fatal(err)
		}
		rc.SetLinger(0)
		rc.Close()
		waitFor(t, "the reset connection's line", func() bool {
			data, _ := os.ReadFile(path)
			lines := strings.Split(strings.TrimSpace(string(data)), "\n")
			return len(lines) == 2 && strings.HasSuffix(lines[1], " CD 0")
		})
	})
}

// TestAccessLogBlockedWriter: a log nobody reads (a FIFO whose reader
// reads nothing) stalls the writer, not the proxy: requests are all
// answered, the lines past the bound dropped and counted, and Run still
// returns, after logCloseWait.
func TestAccessLogBlockedWriter(t *testing.T) {
	path := filepath.Join(t.TempDir(), "fifo")
	if err := syscall.Mkfifo(path, 0o600); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	r, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	chunk, chunks, wait := logChunk, logMaxChunks, logCloseWait
	t.Cleanup(func() { logChunk, logMaxChunks, logCloseWait = chunk, chunks, wait })
	logChunk, logMaxChunks, logCloseWait = 16<<10, 2, 300*time.Millisecond

	u := newUpstream(t, rawHTTPServer)
	cfg := httpConfig(engine.BackendEpoll, u.addr)
	cfg.Listeners[0].AccessLog = &AccessLogConfig{Path: path}
	p, stop := runProxy(t, cfg)
	t.Cleanup(func() { stop() })
	c := dial(t, p)
	c.SetDeadline(time.Now().Add(time.Minute))
	br := bufio.NewReader(c)
	// 64 KiB of pipe and 32 KiB of buffers hold about 400 lines.
	const n = 1500
	for i := range n {
		fmt.Fprintf(c, "GET /%d HTTP/1.1\r\nHost: x\r\n\r\n", i)
		if _, body := readResponseFrom(t, c, br, "GET"); body != "ok" {
			t.Fatalf("request %d: %q", i, body)
		}
	}
	dropped := p.Totals().Listeners[0].AccessLogDropped
	if dropped == 0 || dropped > n {
		t.Errorf("%d lines dropped of %d, want some", dropped, n)
	}
	t.Logf("%d of %d lines dropped", dropped, n)
	start := time.Now()
	if err := stop(); err != nil {
		t.Error(err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("Run took %v to return", d)
	}
}

// TestAccessLogShutdownFlush: lines still in the loops' buffers (the timer
// far off) are written before Run returns.
func TestAccessLogShutdownFlush(t *testing.T) {
	every := logFlushEvery
	t.Cleanup(func() { logFlushEvery = every })
	logFlushEvery = time.Hour
	u := newHTTPUpstream(t, func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })
	path := filepath.Join(t.TempDir(), "access.log")
	cfg := httpConfig(engine.BackendEpoll, u.addr)
	cfg.Listeners[0].AccessLog = &AccessLogConfig{Path: path, Format: AccessLogText}
	p, stop := runProxy(t, cfg)
	t.Cleanup(func() { stop() })
	c, base := client(t, p)
	for i := range 5 {
		get(t, c, fmt.Sprintf("%s/%d", base, i))
	}
	time.Sleep(50 * time.Millisecond)
	if data, _ := os.ReadFile(path); len(data) != 0 {
		t.Fatalf("written before the stop: %q", data)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
	if len(lines) != 5 {
		t.Fatalf("%d lines after Run, want 5: %q", len(lines), data)
	}
	for i, ln := range lines {
		f := strings.Fields(ln)
		// time "listener" client "method" "host" "target" proto status
		// req_bytes resp_bytes "route" server source duration_us reused term
		// queue_us retries
		if len(f) != 18 || f[3] != `"GET"` || f[5] != fmt.Sprintf(`"/%d"`, i) || f[6] != "HTTP/1.1" || f[7] != "200" || f[9] != "2" ||
			f[10] != `"default"` || f[11] != u.addr || f[12] != "upstream" || f[15] != "-" {
			t.Errorf("line %d: %q", i, ln)
		}
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o640 {
		t.Errorf("log file mode: %v, %v", fi.Mode(), err)
	}
}

// TestAccessLogAllocs: TestHTTPAllocs with an access log: a logged request
// allocates nothing either.
func TestAccessLogAllocs(t *testing.T) {
	path := filepath.Join(t.TempDir(), "access.log")
	httpAllocs(t, engine.BackendEpoll, func(cfg *Config) {
		cfg.Listeners[0].AccessLog = &AccessLogConfig{Path: path}
	})
	if n := len(logLines(t, path)); n < 2000 {
		t.Errorf("%d lines logged, want all", n)
	}
}

// TestReopenLogs: after the log file is moved away, ReopenLogs has the
// lines go to a new file of its name; the moved one keeps the lines
// before. After Run, ReopenLogs opens nothing (TestMain counts fds).
func TestReopenLogs(t *testing.T) {
	u := newUpstream(t, nil)
	dir := t.TempDir()
	path := filepath.Join(dir, "tcp.log")
	cfg := testConfig(engine.BackendEpoll, u.addr)
	cfg.Listeners[0].AccessLog = &AccessLogConfig{Path: path}
	p, stop := runProxy(t, cfg)
	t.Cleanup(func() { stop() })
	conn := func(msg string) {
		c := dial(t, p)
		if err := roundTrip(c, msg); err != nil {
			t.Fatal(err)
		}
		c.Close()
	}
	conn("one")
	waitLine(t, path, "the first line", func(map[string]any) bool { return true })
	if err := os.Rename(path, path+".1"); err != nil {
		t.Fatal(err)
	}
	conn("three")
	waitLine(t, path+".1", "the second line, in the moved file", func(m map[string]any) bool { return field(m, "client_bytes") == "5" })
	if err := p.ReopenLogs(); err != nil {
		t.Fatal(err)
	}
	conn("fifteen")
	m := waitLine(t, path, "the third line, in a new file", func(map[string]any) bool { return true })
	checkFields(t, m, map[string]string{"client_bytes": "7"})
	if n := len(logLines(t, path+".1")); n != 2 {
		t.Errorf("%d lines in the moved file, want 2", n)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	os.Remove(path)
	if err := p.ReopenLogs(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Errorf("ReopenLogs after Run made the file: %v", err)
	}
}

// TestAccessLogServerFaults: a server that breaks off its response (the
// client reset: SD), one whose head the proxy refuses (502: PH) and a
// request head that does not arrive in time (408: CT).
func TestAccessLogServerFaults(t *testing.T) {
	u := newUpstream(t, rawServer(func(c net.Conn, req *http.Request, i int) bool {
		switch req.URL.Path {
		case "/cut":
			io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc")
			c.(*net.TCPConn).SetLinger(0)
		case "/bad":
			io.WriteString(c, "HTTP/1.1 2OO OK\r\n\r\n")
		}
		return false
	}))
	path := filepath.Join(t.TempDir(), "access.log")
	cfg := httpConfig(engine.BackendEpoll, u.addr)
	cfg.Listeners[0].RequestTimeout = Duration(200 * time.Millisecond)
	cfg.Listeners[0].AccessLog = &AccessLogConfig{Path: path}
	p := startProxy(t, cfg)
	for _, tc := range []struct{ target, status, resBytes, term string }{
		{"/cut", "200", "3", "SD"},
		{"/bad", "502", "0", "PH"},
	} {
		c := dial(t, p)
		fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: x\r\n\r\n", tc.target)
		c.SetReadDeadline(time.Now().Add(10 * time.Second))
		io.Copy(io.Discard, c)
		checkFields(t, waitLine(t, path, tc.target+"'s line", func(m map[string]any) bool { return m["target"] == tc.target }),
			map[string]string{"status": tc.status, "resp_bytes": tc.resBytes, "term": tc.term, "server": u.addr})
	}
	c := dial(t, p)
	io.WriteString(c, "GET /late HTTP/1.1\r\n")
	checkFields(t, waitLine(t, path, "the 408's line", func(m map[string]any) bool { return m["status"] == 408.0 }),
		map[string]string{"method": "<nil>", "target": "<nil>", "proto": "-", "term": "CT", "source": "proxy", "server": "-"})
}
