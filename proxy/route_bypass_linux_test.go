package proxy

import (
	"bufio"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/spindlenet/spindle/engine"
)

// TestRouteBypassSpellings: doc.go's rate_limit example, a route for
// /login to the listener's own pool with its limit: the requests for
// /login spelled otherwise to a server go by the route all the same, or
// are refused. "/%6Cogin" (the server decodes it to /login) and
// "//login" (nginx's and Apache's /login) are the route's, over its
// limit (429); "/x/..;/login" (Tomcat's "/login") gets 400. Each reached
// /login past the limit.
func TestRouteBypassSpellings(t *testing.T) {
	forBackends(t, func(t *testing.T, b engine.Backend) {
		u := newHTTPUpstream(t, func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, r.URL.Path) })
		cfg := httpConfig(b, u.addr)
		cfg.Listeners[0].Routes = []RouteConfig{{PathPrefix: "/login", Pool: "app",
			RateLimit: &RateLimitConfig{Rate: 1, Per: Duration(time.Hour), Burst: 1, Key: RateKeyAll}}}
		p := startProxy(t, cfg)
		c := dial(t, p)
		br := bufio.NewReader(c)
		if resp, body := rateGet(t, c, br, "/login"); resp.StatusCode != 200 || body != "/login" {
			t.Fatalf("/login: %d %q, want 200", resp.StatusCode, body)
		}
		for _, tc := range []struct {
			target string
			want   int
		}{
			{"/%6Cogin", 429},
			{"/l%6fgin", 429},
			{"//login", 429},
			{"/x/..;/login", 400},
		} {
			c := dial(t, p)
			br := bufio.NewReader(c)
			if resp, body := rateGet(t, c, br, tc.target); resp.StatusCode != tc.want {
				t.Errorf("%s: %d %q, want %d", tc.target, resp.StatusCode, body, tc.want)
			}
		}
	})
}
