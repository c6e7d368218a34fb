package proxy

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"runtime"
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
