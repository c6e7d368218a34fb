package engine

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// ringFixedFiles reads the fixed-file table of the io_uring with fd ringFd
// from /proc/self/fdinfo: slot -> file path ("socket:[inode]"). fdinfo lists
// the table only when it gets the ring's lock at once; it retries until it
// does.
func ringFixedFiles(t *testing.T, ringFd int) map[int]string {
	t.Helper()
	for try := 0; try < 200; try++ {
		f, err := os.Open(fmt.Sprintf("/proc/self/fdinfo/%d", ringFd))
		if err != nil {
			t.Fatal(err)
		}
		files := map[int]string{}
		inTable, sawTable, sawAfter := false, false, false
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			line := sc.Text()
			if strings.HasPrefix(line, "UserFiles:") {
				inTable, sawTable = true, true
				continue
			}
			if inTable {
				slot, path, ok := strings.Cut(strings.TrimSpace(line), ": ")
				n, err := strconv.Atoi(slot)
				if ok && err == nil {
					files[n] = path
					continue
				}
				inTable, sawAfter = false, true
			}
		}
		f.Close()
		if !sawTable {
			t.Fatalf("/proc/self/fdinfo/%d has no UserFiles line", ringFd)
		}
		if sawAfter {
			return files
		}
		time.Sleep(5 * time.Millisecond) // the loop held the ring's lock
	}
	t.Fatal("fdinfo never listed the fixed-file table")
	return nil
}

// TestFixedFiles checks that the uring backends install every connection's
// socket in the ring's fixed-file table at the connection's slot, and close
// the slot (IORING_OP_CLOSE) when the connection closes: a slot left behind
// would keep the socket open after Close.
func TestFixedFiles(t *testing.T) {
	const conns = 12
	for _, b := range testBackends {
		if !b.isURing() {
			continue
		}
		t.Run(string(b), func(t *testing.T) {
			type open struct {
				l          *Loop
				slot, fd   int
				socketPath string
			}
			var mu sync.Mutex
			var opened []open
			h := &echoHandler{onOpen: func(c *Conn) {
				p, _ := os.Readlink(fmt.Sprintf("/proc/self/fd/%d", c.Fd()))
				mu.Lock()
				opened = append(opened, open{c.Loop(), int(c.slot), c.Fd(), p})
				mu.Unlock()
			}}
			cfg := testConfig(b)
			cfg.CPUs = []int{0}
			e, addr := startEngine(t, cfg, h)
			var clients []net.Conn
			for i := 0; i < conns; i++ {
				c, err := net.Dial("tcp", addr)
				if err != nil {
					t.Fatal(err)
				}
				clients = append(clients, c)
				if _, err := c.Write([]byte("ping")); err != nil {
					t.Fatal(err)
				}
				buf := make([]byte, 4)
				if _, err := io.ReadFull(c, buf); err != nil {
					t.Fatal(err)
				}
			}
			ringFd := int(e.Loops()[0].ringFd.Load())
			files := ringFixedFiles(t, ringFd)
			mu.Lock()
			if len(opened) != conns {
				t.Fatalf("%d OnOpen calls, want %d", len(opened), conns)
			}
			for _, o := range opened {
				if !strings.HasPrefix(o.socketPath, "socket:") {
					t.Fatalf("fd %d of slot %d is %q, not a socket", o.fd, o.slot, o.socketPath)
				}
				if files[o.slot] != o.socketPath {
					t.Errorf("fixed-file slot %d holds %q, want the connection's %q", o.slot, files[o.slot], o.socketPath)
				}
			}
			mu.Unlock()
			if len(files) != conns {
				t.Errorf("fixed-file table holds %d files, want %d: %v", len(files), conns, files)
			}
			for _, c := range clients {
				c.Close()
			}
			waitFor(t, "OnClose of every connection", func() bool { return h.closes.Load() == conns })
			if files := ringFixedFiles(t, ringFd); len(files) != 0 {
				t.Errorf("fixed-file table holds %v after every connection closed", files)
			}
			// The slots are reused: a new connection echoes.
			if err := echoOnce(addr, 3, 1000, 100, nil); err != nil {
				t.Fatal(err)
			}
		})
	}
}
