package proxy

import (
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/spindlenet/spindle/engine"
	"golang.org/x/sys/unix"
)

// TestReloadWithLoopLeft: a loop that left while the engine runs on (its
// kernel queue failed: here its epoll descriptor made /dev/null, so that
// its next epoll_wait fails with EINVAL) runs nothing posted to it any
// more; a Reload waited for it to apply the new config until Run
// stopped. It returns at once now, the config in force on the loop left,
// whose CPU's clients the other loop serves (under the new routes), and
// a log a reload retires is closed (the left loop's part ended for it).
func TestReloadWithLoopLeft(t *testing.T) {
	app := newHTTPUpstream(t, reloadHTTPServer("app"))
	other := newHTTPUpstream(t, reloadHTTPServer("other"))
	dir := t.TempDir()
	cfgOf := func(i int) *Config {
		cfg := httpConfig(engine.BackendEpoll, app.addr)
		cfg.Engine.CPUs = []int{0, 1}
		cfg.Listeners[0].AccessLog = &AccessLogConfig{Path: fmt.Sprintf("%s/access%d.log", dir, i)}
		cfg.Pools = append(cfg.Pools, PoolConfig{Name: "other", Servers: []ServerConfig{{Address: other.addr}}})
		if i > 0 {
			cfg.Listeners[0].Routes = []RouteConfig{{PathPrefix: "/o/", Pool: "other"}}
		}
		return cfg
	}
	before := epollFds(t)
	p, stop := runProxy(t, cfgOf(0))
	if len(p.e.Loops()) < 2 {
		stop()
		t.Skip("needs two loops (two CPUs)")
	}
	var loopFds []int
	waitFor(t, "the loops' epoll descriptors", func() bool {
		loopFds = slices.DeleteFunc(epollFds(t), func(fd int) bool { return slices.Contains(before, fd) })
		return len(loopFds) == 2
	})
	null, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.Dup3(int(null.Fd()), loopFds[0], unix.O_CLOEXEC); err != nil {
		t.Fatal(err)
	}
	null.Close()
	els := p.e.Loops()
	for _, el := range els {
		el.Post(func() {}) // (a wake-up: the next wait fails)
	}
	left := -1
	select {
	case <-els[0].Left():
		left = 0
	case <-els[1].Left():
		left = 1
	case <-time.After(5 * time.Second):
		stop()
		t.Fatal("no loop left within 5 s of its epoll descriptor's end")
	}
	reloaded := make(chan error, 1)
	go func() { reloaded <- p.Reload(cfgOf(1)) }()
	select {
	case err := <-reloaded:
		if err != nil {
			t.Errorf("Reload: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Errorf("Reload still waiting 5 s after loop %d left", left)
	}
	for _, cpu := range p.cfg.Engine.CPUs {
		c := dialFromCPU(t, p, cpu)
		io.WriteString(c, "GET /o/x HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
		if st, body := status(t, c); st != 200 || body != "other" {
			t.Errorf("a client from CPU %d: %d %q, want 200 from the route's pool", cpu, st, body)
		}
	}
	waitFor(t, "access0.log closed", func() bool { return !slices.Contains(logsOpen(t, dir), "access0.log") })
	if err := stop(); !errors.Is(err, unix.EINVAL) {
		t.Errorf("Run returned %v, want the left loop's EINVAL", err)
	}
}

// epollFds returns the process's epoll descriptors.
func epollFds(t *testing.T) []int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	var fds []int
	for _, e := range ents {
		var fd int
		if _, err := fmt.Sscan(e.Name(), &fd); err != nil {
			continue
		}
		if to, err := os.Readlink("/proc/self/fd/" + e.Name()); err == nil && to == "anon_inode:[eventpoll]" {
			fds = append(fds, fd)
		}
	}
	return fds
}
