package engine

import (
	"fmt"
	"net"
	"os"
	"runtime"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/spindlenet/spindle/internal/sys"
)

// TestMain raises RLIMIT_NOFILE for the many-connection tests and checks
// that the engines the tests ran left no fds, goroutines or mappings (the
// engine's and every internal/sys.MapAnon one) behind.
func TestMain(m *testing.M) {
	var rl unix.Rlimit
	if unix.Getrlimit(unix.RLIMIT_NOFILE, &rl) == nil && rl.Cur < 65536 {
		want := unix.Rlimit{Cur: 65536, Max: rl.Max}
		if want.Max < want.Cur {
			want.Max = want.Cur
		}
		if unix.Setrlimit(unix.RLIMIT_NOFILE, &want) != nil {
			want.Cur = rl.Max
			want.Max = rl.Max
			unix.Setrlimit(unix.RLIMIT_NOFILE, &want)
		}
	}
	// Start Go's netpoller (its epoll fd and wake-up fd stay open for the
	// life of the process) before taking the fd snapshot.
	if ln, err := net.Listen("tcp", "127.0.0.1:0"); err == nil {
		ln.Close()
	}
	fds0 := openFds()
	g0 := runtime.NumGoroutine()
	maps0 := sys.LiveMappings()
	code := m.Run()
	if code == 0 {
		if err := checkLeaks(fds0, g0, maps0); err != nil {
			fmt.Fprintln(os.Stderr, "leak check:", err)
			code = 1
		}
	}
	os.Exit(code)
}

func openFds() map[string]string {
	ents, _ := os.ReadDir("/proc/self/fd")
	m := map[string]string{}
	for _, e := range ents {
		l, _ := os.Readlink("/proc/self/fd/" + e.Name())
		m[e.Name()] = l
	}
	return m
}

func checkLeaks(fds0 map[string]string, g0, maps0 int) error {
	var err error
	for i := 0; i < 100; i++ {
		err = nil
		if n := liveMappings.Load(); n != 0 {
			err = fmt.Errorf("%d engine mappings not unmapped", n)
		}
		if n := sys.LiveMappings(); n != maps0 {
			// Every MapAnon mapping: the send slab and the buffer rings.
			err = fmt.Errorf("%d off-heap mappings at start, %d at end", maps0, n)
		}
		var extra []string
		for fd, l := range openFds() {
			if _, ok := fds0[fd]; !ok {
				extra = append(extra, fd+" -> "+l)
			}
		}
		if len(extra) > 0 {
			err = fmt.Errorf("fds left open: %v", extra)
		}
		if g := runtime.NumGoroutine(); g > g0 {
			buf := make([]byte, 1<<16)
			buf = buf[:runtime.Stack(buf, true)]
			err = fmt.Errorf("%d goroutines at start, %d at end:\n%s", g0, g, buf)
		}
		if err == nil {
			return nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	return err
}
