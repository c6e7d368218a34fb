package bench

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"testing"
	"time"
)

// TestGoNetAcceptsAfterEMFILE: the go-net arm keeps accepting after an
// accept fails for want of file descriptors (EMFILE), once connections
// close, as the other arms do. Its accept loop returned on the first error,
// so after one EMFILE it never accepted again. The server child runs with a
// limit of 64 descriptors and is sent 100 connections.
func TestGoNetAcceptsAfterEMFILE(t *testing.T) {
	skipUnlessLinux(t)
	argv, env := testChildCommand()
	p, conns := startAtFdLimit(t, append(argv, "-arm", "go-net", "-control"), env)
	// The handshakes complete in the kernel; the child accepts until it has
	// fdLimit descriptors open, and its next accept fails with EMFILE.
	waitFds(t, p.cmd.Process.Pid, fdLimit)
	for _, c := range conns {
		c.Close()
	}
	if err := selfCheck(p.hello.Addr); err != nil {
		t.Fatalf("once EMFILE had passed, a new connection: %v", err)
	}
}

// waitFds waits until process pid has at least n descriptors open.
// fdLimit is the descriptor limit startAtFdLimit gives a server child.
const fdLimit = 64

// startAtFdLimit starts the server command argv (and env) under a
// descriptor limit of fdLimit and opens 100 connections to it, more than
// it can accept; the server is stopped when the test ends.
func startAtFdLimit(t *testing.T, argv, env []string) (*serverProc, []net.Conn) {
	t.Helper()
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip("no sh to lower the server's descriptor limit with ulimit")
	}
	argv = append([]string{sh, "-c", fmt.Sprintf(`ulimit -n %d && exec "$0" "$@"`, fdLimit)}, argv...)
	p, err := startServerProc(context.Background(), argv, env)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := p.stop(); err != nil {
			t.Error(err)
		}
	})
	var conns []net.Conn
	for range 100 {
		c, err := net.Dial("tcp", p.hello.Addr)
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
	}
	return p, conns
}

func waitFds(t *testing.T, pid, n int) {
	t.Helper()
	dir := fmt.Sprintf("/proc/%d/fd", pid)
	for deadline := time.Now().Add(20 * time.Second); ; {
		ents, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		if len(ents) >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("process %d has %d descriptors open, want %d", pid, len(ents), n)
		}
		time.Sleep(time.Millisecond) // polling the condition: /proc has no change notification
	}
}
