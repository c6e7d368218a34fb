package uring

import (
	"flag"
	"fmt"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/spindlenet/spindle/internal/sys"
)

// TestMain fails the package when a test leaks file descriptors, goroutines
// or off-heap mappings: rings, sockets, buffer rings and arenas must all be
// closed.
func TestMain(m *testing.M) {
	// Start the runtime's network poller (an epoll fd and an eventfd that
	// stay open) before taking the snapshot.
	if pr, pw, err := os.Pipe(); err == nil {
		pr.Close()
		pw.Close()
	}
	fds := openFds()
	goroutines := runtime.NumGoroutine()
	maps := sys.LiveMappings()
	code := m.Run()
	// The fuzzing engine keeps its own goroutines: check only plain runs.
	if f := flag.Lookup("test.fuzz"); code == 0 && (f == nil || f.Value.String() == "") {
		if err := checkLeaks(fds, goroutines); err != nil {
			fmt.Fprintln(os.Stderr, "leak check:", err)
			code = 1
		}
		// Rings, buffer rings and arenas unmap what they mapped.
		if n := sys.LiveMappings(); n != maps {
			fmt.Fprintf(os.Stderr, "leak check: %d off-heap mappings left (%d before)\n", n, maps)
			code = 1
		}
	}
	os.Exit(code)
}

func openFds() map[string]string {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		panic(err)
	}
	m := make(map[string]string, len(ents))
	for _, e := range ents {
		target, err := os.Readlink("/proc/self/fd/" + e.Name())
		if err != nil {
			continue // the directory fd of this very listing, closed by now
		}
		m[e.Name()] = target
	}
	return m
}

func checkLeaks(before map[string]string, goroutines int) error {
	var err error
	for range 50 { // closed rings are torn down asynchronously; give them a moment
		err = nil
		var leaked []string
		for fd, target := range openFds() {
			if _, ok := before[fd]; !ok && !strings.HasPrefix(target, "/proc/") {
				leaked = append(leaked, fd+" -> "+target)
			}
		}
		if len(leaked) > 0 {
			err = fmt.Errorf("leaked fds: %v", leaked)
		} else if n := runtime.NumGoroutine(); n > goroutines {
			err = fmt.Errorf("leaked goroutines: %d now, %d before", n, goroutines)
		}
		if err == nil {
			return nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	return err
}
